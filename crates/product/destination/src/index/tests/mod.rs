//! Unit tests of the destination index, driven with plain Kubernetes objects
//! and no server, like the policy index's: apply objects → take a receiver →
//! did it change? → full equality of what a stream would now see.
//!
//! One file per concern; the builders and the comparable [`View`] of a
//! group's state live here.

use k8s_api::labels;
mod audit;
mod external_workloads;
pub(crate) mod get;
mod opacity;
mod owners;
mod profiles;
mod relist;
mod zones;

use std::sync::Arc;

use k8s_index::{Index, ObjectKey};
use k8s_openapi::api::{core::v1::Pod, core::v1::Service, discovery::v1::EndpointSlice};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{EndpointsIndex, endpoints::GroupState};
use crate::{
    config::TranslatorConfig,
    core::{FilterKey, ServiceId},
};

pub(crate) const NS: &str = "ns";

pub(crate) fn index() -> EndpointsIndex {
    EndpointsIndex::new(Arc::new(TranslatorConfig::default()))
}

pub(crate) fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid Kubernetes object")
}

pub(crate) fn svc_id(name: &str) -> ServiceId {
    ServiceId {
        namespace: NS.into(),
        name: name.into(),
    }
}

/// A Service `name` with port 80 → target port `http`, and a ClusterIP.
pub(crate) fn service(name: &str, cluster_ip: &str) -> Service {
    obj(json!({
        "metadata": {"namespace": NS, "name": name},
        "spec": {
            "clusterIP": cluster_ip,
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]
        }
    }))
}

/// A Running pod on node-1 with `app: web`.
pub(crate) fn pod(name: &str, ip: &str) -> Pod {
    obj(json!({
        "metadata": {"namespace": NS, "name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app"}]},
        "status": {"phase": "Running", "podIP": ip, "hostIP": "192.168.0.1"}
    }))
}

/// A slice `name` of Service `service` with (pod, ip, ready) endpoints on
/// port `http` = 8080, in zone z1.
pub(crate) fn slice(name: &str, service: &str, pods: &[(&str, &str, bool)]) -> EndpointSlice {
    let endpoints = pods
        .iter()
        .map(|(pod, ip, ready)| {
            json!({
                "addresses": [ip],
                "conditions": {"ready": ready},
                "zone": "z1",
                "hostname": pod,
                "targetRef": {"kind": "Pod", "namespace": NS, "name": pod}
            })
        })
        .collect();
    slice_of(name, service, endpoints)
}

/// A slice `name` of Service `service` on port `http` = 8080 with these
/// endpoint values.
pub(crate) fn slice_of(name: &str, service: &str, endpoints: Vec<Value>) -> EndpointSlice {
    obj(json!({
        "metadata": {"namespace": NS, "name": name,
                     "labels": {labels::SERVICE_NAME: service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": endpoints
    }))
}

pub(crate) fn subscribe(
    idx: &mut EndpointsIndex,
    service: &str,
    key: FilterKey,
) -> watch::Receiver<Arc<GroupState>> {
    idx.subscribe(&svc_id(service), 80, key)
        .expect("subscribed")
}

pub(super) fn delete<K>(idx: &mut EndpointsIndex, name: &str)
where
    EndpointsIndex: Index<K>,
{
    Index::<K>::delete(idx, ObjectKey::new(Some(NS), name));
}

/// What one endpoint of a group looks like to a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct EndpointView {
    pub addr: String,
    /// The `pod` metric label.
    pub pod: Option<String>,
    /// The owner metric label (key, name).
    pub owner: (String, String),
    /// The `zone_locality` metric label.
    pub locality: String,
    pub opaque_by_server: bool,
}

/// What a group's stream would see: whether the Service exists and every
/// endpoint, in address-ID order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct View {
    pub exists: bool,
    pub endpoints: Vec<EndpointView>,
}

pub(super) fn view(state: &GroupState) -> View {
    let endpoints = state
        .snapshot
        .entries()
        .map(|e| {
            let pod = e.endpoint.pod();
            EndpointView {
                addr: e.endpoint.addr.to_string(),
                pod: e.addr.metric_labels.get("pod").cloned(),
                owner: pod
                    .map(|p| (p.owner.key.clone(), p.owner.name.clone()))
                    .unwrap_or_default(),
                locality: e
                    .addr
                    .metric_labels
                    .get("zone_locality")
                    .cloned()
                    .unwrap_or_default(),
                opaque_by_server: e.endpoint.opaque_by_server,
            }
        })
        .collect();
    View {
        exists: state.snapshot.exists(),
        endpoints,
    }
}

/// The view of a plain pod endpoint (owner `pod`, locality unknown).
pub(super) fn ep(pod: &str, addr: &str) -> EndpointView {
    EndpointView {
        addr: addr.into(),
        pod: Some(pod.into()),
        owner: ("pod".into(), pod.into()),
        locality: "unknown".into(),
        opaque_by_server: false,
    }
}

pub(super) fn exists(endpoints: Vec<EndpointView>) -> View {
    View {
        exists: true,
        endpoints,
    }
}

pub(super) fn missing() -> View {
    View {
        exists: false,
        endpoints: Vec::new(),
    }
}

/// Takes the newest state if the receiver changed.
pub(super) fn changed(rx: &mut watch::Receiver<Arc<GroupState>>) -> Option<View> {
    rx.has_changed()
        .expect("publisher alive")
        .then(|| view(&rx.borrow_and_update()))
}

/// The current state, whether or not it changed.
pub(super) fn current(rx: &mut watch::Receiver<Arc<GroupState>>) -> View {
    view(&rx.borrow_and_update())
}
