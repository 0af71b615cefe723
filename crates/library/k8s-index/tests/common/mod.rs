//! Helpers shared by the tests that own a private control plane: a plain
//! Service, and the names a Services index holds in one namespace.

use std::time::Duration;

use k8s_index::{ObjectCache, SharedIndex};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};

/// A Service named `name` with one port (80).
pub fn service(name: &str) -> Service {
    Service {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The names `index` holds in namespace `ns`.
pub fn names(index: &SharedIndex<ObjectCache<Service>>, ns: &str) -> Vec<String> {
    index
        .read()
        .iter()
        .filter(|(k, _)| k.namespace.as_deref() == Some(ns))
        .map(|(k, _)| k.name.clone())
        .collect()
}

/// Waits (up to 60 s) until `index` holds exactly `want` in `ns`.
pub async fn wait_names(
    index: &SharedIndex<ObjectCache<Service>>,
    ns: &str,
    want: &[&str],
    what: &str,
) {
    test_support::eventually(what, Duration::from_secs(60), || {
        let seen = names(index, ns);
        async move {
            if seen == want {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        }
    })
    .await;
}
