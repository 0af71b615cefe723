//! `Server` resources as the index uses them: workload selector (pods or
//! external workloads), port, protocol, access policy and age.

use std::{num::NonZeroU16, time::SystemTime};

use k8s_api::policy::{ProxyProtocol as ServerProtocol, Server};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    InvalidResource,
    selector::{Labels, Selector},
};
use crate::core::{ClusterInfo, DefaultPolicy, ProxyProtocol, WorkloadKind};

/// The parts of a Server that matter to policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The Server's own labels (ServerAuthorization selectors match them).
    pub labels: Labels,
    /// The workloads whose ports the Server may select.
    pub selector: WorkloadSelector,
    pub port: PortRef,
    pub protocol: ProxyProtocol,
    /// `accessPolicy`; `None` (unset, `deny` or invalid) adds nothing.
    pub access_policy: Option<DefaultPolicy>,
    pub created_at: Option<SystemTime>,
}

/// A Server's `podSelector` or `externalWorkloadSelector`: each selects
/// only workloads of its own kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadSelector {
    Pods(Selector),
    ExternalWorkloads(Selector),
}

impl WorkloadSelector {
    /// Whether a workload of `kind` labelled `labels` is selected.
    pub fn selects(&self, kind: WorkloadKind, labels: &Labels) -> bool {
        match (self, kind) {
            (Self::Pods(s), WorkloadKind::Pod)
            | (Self::ExternalWorkloads(s), WorkloadKind::External) => s.matches(labels),
            _ => false,
        }
    }
}

/// A Server's `port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRef {
    Number(NonZeroU16),
    /// Every container port (or the external workload port) with this name.
    Name(String),
}

impl ServerSpec {
    /// Converts a Server resource.
    pub fn from_resource(srv: &Server, cluster: &ClusterInfo) -> Result<Self, InvalidResource> {
        let port = match &srv.spec.port {
            IntOrString::Int(n) => u16::try_from(*n)
                .ok()
                .and_then(NonZeroU16::new)
                .map(PortRef::Number)
                .ok_or(InvalidResource::Port(*n))?,
            IntOrString::String(name) => PortRef::Name(name.clone()),
        };
        let selector = match (&srv.spec.pod_selector, &srv.spec.external_workload_selector) {
            (None, None) => return Err(InvalidResource::NoServerSelector),
            (Some(_), Some(_)) => return Err(InvalidResource::BothServerSelectors),
            (Some(pods), None) => WorkloadSelector::Pods(Selector::try_from(pods)?),
            (None, Some(external)) => {
                WorkloadSelector::ExternalWorkloads(Selector::try_from(external)?)
            }
        };
        let access_policy = match srv.spec.access_policy.as_deref() {
            None => None,
            Some(p) => match p.parse::<DefaultPolicy>() {
                Ok(p) => Some(p),
                Err(error) => {
                    tracing::warn!(%error, "invalid Server accessPolicy; it adds no authorizations");
                    None
                }
            },
        };
        Ok(Self {
            labels: srv.metadata.labels.clone().unwrap_or_default(),
            selector,
            port,
            protocol: protocol(srv.spec.proxy_protocol, cluster),
            access_policy,
            created_at: srv
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0)),
        })
    }
}

fn protocol(p: Option<ServerProtocol>, cluster: &ClusterInfo) -> ProxyProtocol {
    match p {
        None | Some(ServerProtocol::Unknown) => ProxyProtocol::Detect {
            timeout: cluster.detect_timeout,
        },
        Some(ServerProtocol::Http1) => ProxyProtocol::Http1,
        Some(ServerProtocol::Http2) => ProxyProtocol::Http2,
        Some(ServerProtocol::Grpc) => ProxyProtocol::Grpc,
        Some(ServerProtocol::Opaque) => ProxyProtocol::Opaque,
        Some(ServerProtocol::Tls) => ProxyProtocol::Tls,
    }
}
