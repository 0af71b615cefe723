//! A watch of a Gateway API route kind at a version chosen at run time:
//! the objects are read as [`DynamicObject`]s of that version and turned
//! into the kind's typed struct (or an invalid object, skipped and counted
//! by the watch like any other), so one typed index serves every version.

use futures::{Stream, StreamExt};
use k8s_api::gateway::{GROUP, GatewayRoute};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
    core::{DeserializeGuard, error_boundary::InvalidObject},
    runtime::watcher,
};

/// The API resource of kind `K` at `version`.
pub fn api_resource<K: GatewayRoute>(version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.to_string(),
        version: version.to_string(),
        api_version: format!("{GROUP}/{version}"),
        kind: K::KIND.to_string(),
        plural: K::PLURAL.to_string(),
    }
}

/// The events of every `K` in the cluster, read at `version`.
pub fn events<K: GatewayRoute>(
    client: Client,
    version: &str,
) -> impl Stream<Item = Result<watcher::Event<DeserializeGuard<K>>, watcher::Error>> + Send + 'static
{
    let api: Api<DynamicObject> = Api::all_with(client, &api_resource::<K>(version));
    let config = k8s_index::resources::watch_config();
    let events = k8s_index::streamed_or_paged(config, move |config| watcher(api.clone(), config));
    k8s_index::with_backoff(events).map(|event| event.map(|event| map_event(event, typed::<K>)))
}

fn map_event<A, B>(event: watcher::Event<A>, f: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(obj) => watcher::Event::InitApply(f(obj)),
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::Apply(obj) => watcher::Event::Apply(f(obj)),
        watcher::Event::Delete(obj) => watcher::Event::Delete(f(obj)),
    }
}

/// The typed object, or the reason it does not read as one.
pub fn typed<K: GatewayRoute>(obj: DynamicObject) -> DeserializeGuard<K> {
    let metadata = obj.metadata.clone();
    let read = serde_json::to_value(obj)
        .and_then(K::deserialize)
        .map_err(|error| InvalidObject {
            error: error.to_string(),
            metadata,
        });
    DeserializeGuard(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_api::gateway::HTTPRoute;

    #[test]
    fn dynamic_objects_become_typed_or_invalid() {
        let ok: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute",
            "metadata": {"namespace": "ns", "name": "r"},
            "spec": {"parentRefs": [{"name": "web", "kind": "Server", "group": "policy.linkerd.io"}]}
        }))
        .expect("object");
        let route = typed::<HTTPRoute>(ok).0.expect("typed");
        assert_eq!(route.spec.parent_refs.map(|p| p.len()), Some(1));
        let bad: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"namespace": "ns", "name": "bad"},
            "spec": {"parentRefs": "not a list"}
        }))
        .expect("object");
        let invalid = typed::<HTTPRoute>(bad).0.expect_err("invalid");
        assert_eq!(invalid.metadata.name.as_deref(), Some("bad"));
        assert_eq!(
            api_resource::<HTTPRoute>("v1").api_version,
            "gateway.networking.k8s.io/v1"
        );
    }
}
