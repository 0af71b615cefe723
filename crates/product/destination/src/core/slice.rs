//! What the destination keeps of an EndpointSlice: its Service, its ports,
//! its endpoints as addresses, conditions, hostname, target, zone and hints,
//! and the mirror labels of a linked cluster's gateway. Decoded once at the
//! watch edge ([`crate::k8s::endpoints`]); zones and namespaces are shared
//! strings, interned by the index.

use std::{net::IpAddr, sync::Arc};

/// One EndpointSlice's facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceFacts {
    /// The slice's namespace (its Service's and, by default, its pods').
    pub namespace: Arc<str>,
    /// The `kubernetes.io/service-name` label: the Service it belongs to.
    pub service: Option<Box<str>>,
    /// `ports` (`None`: the slice has no `ports` list and offers nothing).
    pub ports: Option<Box<[SlicePort]>>,
    /// The endpoints.
    pub endpoints: Box<[SliceEndpoint]>,
    /// What a mirrored slice says of its linked cluster.
    pub mirror: Option<Box<Mirror>>,
}

/// The mirror labels and annotations of a slice a linked cluster's
/// gateway backs (rare: boxed so other slices pay one pointer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mirror {
    /// `mirror.linkerd.io/cluster-name` label.
    pub cluster: Option<Box<str>>,
    /// `mirror.linkerd.io/remote-svc-fq-name` annotation.
    pub remote_svc_fq_name: Option<Box<str>>,
    /// `mirror.linkerd.io/remote-gateway-identity` annotation (non-empty).
    pub gateway_identity: Option<Box<str>>,
}

/// One entry of a slice's `ports`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlicePort {
    /// Its name (`""` when unnamed).
    pub name: Box<str>,
    /// Its number, if set and valid.
    pub port: Option<u16>,
}

/// One endpoint of a slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceEndpoint {
    /// Its addresses that are IPs (others are skipped at decoding).
    pub addresses: Box<[IpAddr]>,
    /// `conditions.ready` (`None` when unset, which counts as ready).
    pub ready: Option<bool>,
    /// A non-empty `hostname`.
    pub hostname: Option<Box<str>>,
    /// `targetRef`.
    pub target: Option<SliceTarget>,
    /// `zone`.
    pub zone: Option<Arc<str>>,
    /// `hints.forZones` names, sorted and deduplicated (`None` when empty).
    pub for_zones: Option<Box<[Arc<str>]>>,
}

/// What an endpoint's `targetRef` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceTarget {
    /// A pod: its namespace (`None`: the slice's) and name.
    Pod {
        namespace: Option<Arc<str>>,
        name: Box<str>,
    },
    /// An ExternalWorkload (always looked up in the slice's namespace).
    ExternalWorkload { name: Box<str> },
    /// Any other kind (skipped by translation).
    Other { kind: Box<str>, name: Box<str> },
}

impl SliceTarget {
    /// The pod `(namespace, name)` this names, its namespace defaulting to
    /// `slice_ns`.
    pub fn pod<'a>(&'a self, slice_ns: &'a str) -> Option<(&'a str, &'a str)> {
        match self {
            Self::Pod { namespace, name } => Some((
                namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(slice_ns),
                name,
            )),
            _ => None,
        }
    }
}
