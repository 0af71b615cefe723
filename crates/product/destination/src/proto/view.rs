//! What a stream is sent, as the admin server shows it: a group's snapshot
//! and a published profile, read from the proxy-API messages themselves, so
//! the view is the answer on the wire and not a second computation of it.

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
};

use linkerd2_proxy_api::{
    destination::{DestinationProfile, WeightedAddr, protocol_hint, tls_identity},
    meta::metadata,
    net::TcpAddress,
};
use serde::Serialize;

use super::{profile::ProfileState, snapshot::Snapshot};

/// The socket address of a proxy-API address (`None` if malformed).
pub fn socket_addr(addr: &TcpAddress) -> Option<SocketAddr> {
    let ip: IpAddr = (*addr.ip.as_ref()?).try_into().ok()?;
    Some(SocketAddr::new(ip, u16::try_from(addr.port).ok()?))
}

/// One endpoint as sent to the proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EndpointView {
    pub addr: String,
    pub weight: u32,
    /// The mTLS identity the proxy expects, if the endpoint is meshed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// `h2`, `opaque` or absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_hint: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opaque_transport_port: Option<u32>,
    /// The endpoint's metric labels (pod, namespace, owner…).
    pub labels: BTreeMap<String, String>,
}

/// A group's snapshot as sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SnapshotView {
    /// Whether the Service exists (`NoEndpoints{exists}` when empty).
    pub exists: bool,
    /// The set's metric labels.
    pub labels: BTreeMap<String, String>,
    pub endpoints: Vec<EndpointView>,
}

impl SnapshotView {
    pub fn of(snapshot: &Snapshot) -> Self {
        Self {
            exists: snapshot.exists(),
            labels: snapshot
                .labels()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            endpoints: snapshot
                .entries()
                .map(|entry| EndpointView::of(&entry.addr))
                .collect(),
        }
    }
}

impl EndpointView {
    pub fn of(addr: &WeightedAddr) -> Self {
        let identity = addr
            .tls_identity
            .as_ref()
            .and_then(|id| id.strategy.as_ref())
            .map(|strategy| match strategy {
                tls_identity::Strategy::DnsLikeIdentity(id) => id.name.clone(),
                tls_identity::Strategy::UriLikeIdentity(id) => id.uri.clone(),
            });
        let hint = addr.protocol_hint.as_ref();
        Self {
            addr: addr
                .addr
                .as_ref()
                .and_then(socket_addr)
                .map_or_else(|| "?".to_string(), |a| a.to_string()),
            weight: addr.weight,
            identity,
            protocol_hint: hint.and_then(|h| h.protocol.as_ref()).map(|p| match p {
                protocol_hint::Protocol::H2(_) => "h2",
                protocol_hint::Protocol::Opaque(_) => "opaque",
            }),
            opaque_transport_port: hint
                .and_then(|h| h.opaque_transport.as_ref())
                .map(|t| t.inbound_port),
            labels: addr
                .metric_labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// A published profile as sent, summarised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProfileView {
    pub version: u64,
    pub fully_qualified_name: String,
    pub opaque_protocol: bool,
    /// Routes of the ServiceProfile, by name.
    pub routes: Vec<String>,
    /// The ServiceProfile it comes from (`ServiceProfile ns/name`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_ref: Option<String>,
    /// The endpoint of an endpoint profile (a pod IP or host port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointView>,
}

impl ProfileView {
    pub fn of(state: &ProfileState) -> Self {
        let p: &DestinationProfile = &state.profile;
        Self {
            version: state.version,
            fully_qualified_name: p.fully_qualified_name.clone(),
            opaque_protocol: p.opaque_protocol,
            routes: p.routes.iter().map(route_name).collect(),
            profile_ref: p.profile_ref.as_ref().and_then(|r| match r.kind.as_ref()? {
                // (The wire's `kind` is empty, as the original's: the name
                // says whether a ServiceProfile applies.)
                metadata::Kind::Resource(r) if !r.name.is_empty() => {
                    Some(format!("ServiceProfile {}/{}", r.namespace, r.name))
                }
                _ => None,
            }),
            endpoint: p.endpoint.as_ref().map(EndpointView::of),
        }
    }
}

fn route_name(route: &linkerd2_proxy_api::destination::Route) -> String {
    route
        .metrics_labels
        .get("route")
        .cloned()
        .unwrap_or_default()
}
