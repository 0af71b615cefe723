//! Kubernetes objects → core values, as pure functions: the only place that
//! reads Kubernetes fields. [`pods`] and [`slices`] decode pods and
//! EndpointSlices straight from the API's JSON into the facts the index
//! keeps (typed partial objects, `k8s_index::partial`), [`endpoints`] turns slice
//! facts into endpoints, [`pods`] also reads owners, [`external_workloads`] the facts
//! of ExternalWorkloads, [`services`] reads Service ports,
//! [`profiles`] reads ServiceProfiles, [`multicluster`] how a Service is
//! discovered and linked clusters' Secrets;
//! [`lookups`] is what they may ask of the caller's stored objects.

pub mod endpoints;
pub mod external_workloads;
pub mod lookups;
pub mod multicluster;
pub mod pods;
pub mod profiles;
pub mod services;
pub mod slices;

#[cfg(test)]
mod tests;

// Label, annotation and env names are Linkerd's vocabulary, defined once in
// `k8s_api::labels`.

/// Builders of Kubernetes objects shared by the tests of this crate.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::endpoints::translate_endpoints;
    use super::lookups::ClusterLookups;
    use crate::core::authority::ServiceId;
    use crate::core::endpoint::EndpointMap;
    use crate::core::endpoint::{OwnerRef, ParentKind, WorkloadRef};
    use crate::core::pod::PodFacts;
    use k8s_api::workload::ExternalWorkload;
    use k8s_openapi::api::core::v1::{Pod, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use serde_json::{Value, json};
    use std::sync::Arc;

    pub(crate) fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("valid Kubernetes object")
    }

    pub(crate) fn svc_id() -> ServiceId {
        ServiceId {
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    /// Service `ns/web` with the given `(port, name, targetPort)` entries.
    pub(crate) fn service(ports: &[(u16, &str, Value)]) -> Service {
        let ports: Vec<Value> = ports
            .iter()
            .map(|(port, name, target)| json!({"port": port, "name": name, "targetPort": target}))
            .collect();
        from_json(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": ports},
        }))
    }

    /// A meshed pod on `node` with a `linkerd-proxy` container (inbound 4143,
    /// admin 4191, control 4190) and a `web` container port named `http` (8080).
    pub(crate) fn meshed_pod(name: &str, node: &str) -> Pod {
        from_json(json!({
            "metadata": {
                "name": name, "namespace": "ns", "resourceVersion": "1",
                "labels": {"linkerd.io/control-plane-ns": "linkerd", "pod-template-hash": "abc"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1"}],
            },
            "spec": {
                "nodeName": node,
                "serviceAccountName": "web-sa",
                "containers": [
                    {"name": "web", "ports": [{"name": "http", "containerPort": 8080}]},
                    {"name": "linkerd-proxy", "env": [
                        {"name": "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "value": "0.0.0.0:4143"},
                        {"name": "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "value": "0.0.0.0:4191"},
                        {"name": "LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "value": "0.0.0.0:4190"},
                    ]},
                ],
            },
        }))
    }

    /// A pod without a proxy and without owners.
    pub(crate) fn plain_pod(name: &str, node: &str) -> Pod {
        from_json(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [{"name": "app"}]},
        }))
    }

    pub(crate) fn set_annotation(pod: &mut Pod, key: &str, value: &str) {
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    pub(crate) fn set_label(pod: &mut Pod, key: &str, value: &str) {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    /// A slice of `ns/web` with the given address type, ports and endpoints.
    pub(crate) fn slice(address_type: &str, ports: Value, endpoints: Value) -> EndpointSlice {
        from_json(json!({
            "metadata": {"name": "web-xyz", "namespace": "ns", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": address_type,
            "ports": ports,
            "endpoints": endpoints,
        }))
    }

    /// A ServiceProfile `web.ns.svc.cluster.local` in `ns` with `spec`.
    pub(crate) fn service_profile(spec: Value) -> k8s_api::service_profile::ServiceProfile {
        from_json(json!({
            "apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
            "metadata": {"name": "web.ns.svc.cluster.local", "namespace": "ns"},
            "spec": spec
        }))
    }

    /// The ExternalWorkload `ns/<name>` at 192.0.2.10 and 2001:db8::10 with
    /// ports `http` 8080 and 9090 and a SPIFFE identity; `extra` is merged
    /// over it (objects key by key, anything else replaced).
    pub(crate) fn external_workload(name: &str, extra: Value) -> ExternalWorkload {
        fn merge(base: &mut Value, extra: Value) {
            match (base, extra) {
                (Value::Object(b), Value::Object(e)) => {
                    for (k, v) in e {
                        merge(b.entry(k).or_insert(Value::Null), v);
                    }
                }
                (b, e) => *b = e,
            }
        }
        let mut obj = json!({
            "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "meshTLS": {"identity": format!("spiffe://root.linkerd.cluster.local/{name}"), "serverName": format!("{name}.ns.cluster.local")},
                "ports": [{"name": "http", "port": 8080}, {"port": 9090}],
                "workloadIPs": [{"ip": "192.0.2.10"}, {"ip": "2001:db8::10"}]
            }
        });
        merge(&mut obj, extra);
        from_json(obj)
    }

    /// An ExternalWorkload endpoint JSON value.
    pub(crate) fn external_ep(ip: &str, name: &str, zone: &str) -> Value {
        json!({
            "addresses": [ip],
            "conditions": {"ready": true},
            "zone": zone,
            "targetRef": {"kind": "ExternalWorkload", "name": name, "namespace": "ns"},
        })
    }

    /// A pod endpoint JSON value.
    pub(crate) fn pod_ep(ip: &str, pod: &str, zone: &str) -> Value {
        json!({
            "addresses": [ip],
            "conditions": {"ready": true},
            "zone": zone,
            "targetRef": {"kind": "Pod", "name": pod, "namespace": "ns"},
        })
    }

    /// The facts the index keeps of `pod`, decoded as the watch decodes it.
    pub(crate) fn facts(pod: &Pod) -> PodFacts {
        super::pods::PodObject::from(pod).facts
    }

    /// Lookup answering from a fixed list of pods and ExternalWorkloads, with owner chains
    /// `ReplicaSet web-abc → Deployment web` and `Job batch-1 → CronJob batch`.
    pub(crate) struct Cache {
        pub(crate) pods: Vec<Arc<PodFacts>>,
        pub(crate) external_workloads: Vec<Arc<ExternalWorkload>>,
        pub(crate) opaque_by_server: Option<u16>,
    }

    impl Cache {
        pub(crate) fn new(pods: impl IntoIterator<Item = Pod>) -> Self {
            Self {
                pods: pods.into_iter().map(|p| Arc::new(facts(&p))).collect(),
                external_workloads: Vec::new(),
                opaque_by_server: None,
            }
        }

        /// Translates `slices` for `ns/web` (Service `svc`) and port `port`.
        pub(crate) fn translate(
            &self,
            svc: Option<&Service>,
            port: u16,
            slices: &[EndpointSlice],
        ) -> EndpointMap {
            let facts: Vec<_> = slices.iter().map(super::slices::slice_facts).collect();
            translate_endpoints(&svc_id(), svc, port, &facts, self)
        }
    }

    impl ClusterLookups for Cache {
        fn pod(&self, ns: &str, name: &str) -> Option<Arc<PodFacts>> {
            self.pods
                .iter()
                .find(|p| &*p.namespace == ns && &*p.name == name)
                .cloned()
        }

        fn owner(&self, kind: ParentKind, _ns: &str, name: &str) -> Option<OwnerRef> {
            let owner = |kind: &str, name: &str| {
                Some(OwnerRef {
                    kind: kind.into(),
                    name: name.into(),
                })
            };
            match (kind, name) {
                (ParentKind::ReplicaSet, "web-abc") => owner("Deployment", "web"),
                (ParentKind::ReplicaSet, "odd-rs") => owner("Widget", "w"),
                (ParentKind::ReplicaSet, "job-rs") => owner("Job", "j"),
                (ParentKind::Job, "batch-1") => owner("CronJob", "batch"),
                _ => None,
            }
        }

        fn external_workload(&self, ns: &str, name: &str) -> Option<Arc<ExternalWorkload>> {
            self.external_workloads
                .iter()
                .find(|w| {
                    w.metadata.namespace.as_deref() == Some(ns)
                        && w.metadata.name.as_deref() == Some(name)
                })
                .cloned()
        }

        fn server_opaque(&self, _: &WorkloadRef, port: u16) -> bool {
            Some(port) == self.opaque_by_server
        }

        fn node_zone(&self, _: &str) -> Option<&str> {
            None
        }
    }
}
