//! EndpointSlices → [`SliceFacts`]: a slice decoded straight from the API's
//! JSON ([`SliceObject`]: no `k8s-openapi` `EndpointSlice` is built on the
//! watch path), keeping only what translation reads.

use std::{net::IpAddr, sync::Arc};

use k8s_api::labels;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::{Deserialize, Deserializer};

use crate::core::slice::{Mirror, SliceEndpoint, SliceFacts, SlicePort, SliceTarget};
use k8s_index::partial::{Kept, read_keys};

/// `targetRef.kind` of a pod-backed endpoint.
pub const POD_KIND: &str = "Pod";
/// `targetRef.kind` of an ExternalWorkload-backed endpoint.
pub const EXTERNAL_WORKLOAD_KIND: &str = "ExternalWorkload";

k8s_index::partial_object! {
    /// An EndpointSlice as the destination watches it: `metadata` reduced to
    /// name, namespace and resourceVersion, and its [`SliceFacts`].
    #[derive(Clone, Debug)]
    pub struct SliceObject {
        /// What the index keeps.
        pub facts: SliceFacts,
    }
    kind = "EndpointSlice", group = "discovery.k8s.io", version = "v1", plural = "endpointslices";
    decoded from SliceJson by facts;
    from EndpointSlice;
}

/// The facts of a `k8s-openapi` slice (tests, linked clusters' fixtures).
pub fn slice_facts(slice: &EndpointSlice) -> SliceFacts {
    SliceObject::from(slice).facts
}

// ---- the JSON fields read, and only those ----

#[derive(Default, Deserialize)]
struct SliceJson {
    #[serde(default)]
    metadata: MetaJson,
    #[serde(default)]
    ports: Option<Vec<PortJson>>,
    #[serde(default)]
    endpoints: Option<Vec<EndpointJson>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaJson {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    #[serde(default, deserialize_with = "read_labels")]
    labels: Kept,
    #[serde(default, deserialize_with = "read_annotations")]
    annotations: Kept,
}

/// Label keys read: the Service name, a mirror's cluster name.
const LABELS: [&str; 2] = [labels::SERVICE_NAME, labels::REMOTE_CLUSTER_NAME];
/// Annotation keys read: a mirror's remote Service and gateway identity.
const ANNOTATIONS: [&str; 2] = [labels::REMOTE_SVC_FQ_NAME, labels::REMOTE_GATEWAY_IDENTITY];

fn read_labels<'de, D: Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
    read_keys(d, &LABELS)
}

fn read_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
    read_keys(d, &ANNOTATIONS)
}

#[derive(Deserialize)]
struct PortJson {
    name: Option<String>,
    port: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointJson {
    #[serde(default)]
    addresses: Vec<String>,
    conditions: Option<ConditionsJson>,
    hostname: Option<String>,
    target_ref: Option<TargetJson>,
    zone: Option<String>,
    hints: Option<HintsJson>,
}

#[derive(Deserialize)]
struct ConditionsJson {
    ready: Option<bool>,
}

#[derive(Deserialize)]
struct TargetJson {
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HintsJson {
    #[serde(default)]
    for_zones: Vec<ZoneJson>,
}

#[derive(Deserialize)]
struct ZoneJson {
    name: String,
}

impl SliceJson {
    fn facts(self) -> SliceFacts {
        let meta = self.metadata;
        let mirror = Mirror {
            cluster: meta.labels.get(1).map(Box::from),
            remote_svc_fq_name: meta.annotations.get(0).map(Box::from),
            gateway_identity: meta
                .annotations
                .get(1)
                .filter(|id| !id.is_empty())
                .map(Box::from),
        };
        SliceFacts {
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            service: meta.labels.get(0).map(Box::from),
            ports: self.ports.map(|ports| {
                ports
                    .into_iter()
                    .map(|p| SlicePort {
                        name: p.name.unwrap_or_default().into(),
                        port: p.port.and_then(|p| u16::try_from(p).ok()),
                    })
                    .collect()
            }),
            endpoints: self
                .endpoints
                .unwrap_or_default()
                .into_iter()
                .map(EndpointJson::facts)
                .collect(),
            mirror: (mirror != Mirror::default()).then(|| Box::new(mirror)),
        }
    }
}

impl EndpointJson {
    fn facts(self) -> SliceEndpoint {
        let addresses = self
            .addresses
            .iter()
            .filter_map(|a| match a.parse::<IpAddr>() {
                Ok(ip) => Some(ip),
                Err(_) => {
                    tracing::debug!(address = %a, "skipping non-IP endpoint address");
                    None
                }
            })
            .collect();
        let for_zones = self
            .hints
            .map(|h| {
                let mut names: Vec<String> = h.for_zones.into_iter().map(|z| z.name).collect();
                names.sort_unstable();
                names.dedup();
                names
            })
            .filter(|names| !names.is_empty())
            .map(|names| names.into_iter().map(Arc::from).collect());
        let target = self.target_ref.map(|r| {
            let name = r.name.unwrap_or_default().into();
            match r.kind.as_deref() {
                Some(POD_KIND) => SliceTarget::Pod {
                    namespace: r.namespace.map(Arc::from),
                    name,
                },
                Some(EXTERNAL_WORKLOAD_KIND) => SliceTarget::ExternalWorkload { name },
                kind => SliceTarget::Other {
                    kind: kind.unwrap_or_default().into(),
                    name,
                },
            }
        });
        SliceEndpoint {
            addresses,
            ready: self.conditions.and_then(|c| c.ready),
            hostname: self.hostname.filter(|h| !h.is_empty()).map(Box::from),
            target,
            zone: self.zone.map(Arc::from),
            for_zones,
        }
    }
}
