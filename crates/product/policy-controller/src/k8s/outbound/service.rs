//! A Service as the outbound index keeps it: its ClusterIPs and declared
//! ports, each port's protocol hint, and the Service-wide failure accrual,
//! timeouts and retries from annotations (a bad annotation is logged and
//! ignored, as the original does).

use std::{collections::BTreeMap, net::IpAddr, num::NonZeroU16};

use k8s_api::labels;
use k8s_openapi::api::core::v1::Service;

use super::annotations::{self, Annotations, OutboundSettings};
use crate::core::{
    PortSet,
    outbound::{AppProtocol, LoadBiaser},
    parse_port_set,
};

/// What the index keeps of a Service.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceInfo {
    /// ClusterIPs (`clusterIPs`, else `clusterIP`; `None` skipped).
    pub cluster_ips: Vec<IpAddr>,
    /// Declared ports.
    pub ports: PortSet,
    /// Protocol hints by port: `appProtocol`, else opaque for the ports of
    /// the opaque-ports annotation (or `--default-opaque-ports`).
    pub app_protocols: BTreeMap<NonZeroU16, AppProtocol>,
    /// `balancer.alpha.linkerd.io/penalize-failures` and its settings.
    pub load_biaser: Option<LoadBiaser>,
    /// Failure accrual, timeouts and retries.
    pub settings: OutboundSettings,
}

impl ServiceInfo {
    /// Reads a Service; `default_opaque_ports` applies without the
    /// annotation.
    pub fn from_service(svc: &Service, default_opaque_ports: &PortSet) -> Self {
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let annotations: Annotations = svc.metadata.annotations.clone().unwrap_or_default();
        let warn = |what: &str, error: &dyn std::fmt::Display| {
            tracing::warn!(%ns, service = %name, %error, "ignoring invalid {what}");
        };
        let spec = svc.spec.as_ref();
        let mut cluster_ips: Vec<&String> = spec
            .and_then(|s| s.cluster_ips.as_ref())
            .into_iter()
            .flatten()
            .collect();
        if cluster_ips.is_empty()
            && let Some(ip) = spec.and_then(|s| s.cluster_ip.as_ref())
        {
            cluster_ips.push(ip);
        }
        let cluster_ips = cluster_ips
            .into_iter()
            .filter(|ip| !ip.eq_ignore_ascii_case("none") && !ip.is_empty())
            .filter_map(|ip| {
                ip.parse()
                    .map_err(|e: std::net::AddrParseError| warn("cluster IP", &e))
                    .ok()
            })
            .collect();
        let mut ports = PortSet::new();
        let mut app_protocols = BTreeMap::new();
        for port in spec.and_then(|s| s.ports.as_ref()).into_iter().flatten() {
            let Some(p) = u16::try_from(port.port).ok().and_then(NonZeroU16::new) else {
                warn("port", &port.port);
                continue;
            };
            ports.insert(p);
            if let Some(protocol) = &port.app_protocol {
                app_protocols.insert(p, AppProtocol::parse(protocol));
            }
        }
        let opaque = match annotations.get(labels::OPAQUE_PORTS) {
            Some(list) => parse_port_set(list).unwrap_or_else(|| {
                warn("opaque-ports annotation", list);
                PortSet::new()
            }),
            None => default_opaque_ports.clone(),
        };
        for port in opaque {
            app_protocols.entry(port).or_insert(AppProtocol::Opaque);
        }
        Self {
            cluster_ips,
            ports,
            app_protocols,
            load_biaser: annotations::load_biaser(&annotations)
                .map_err(|e| warn("load biaser", &e))
                .unwrap_or_default(),
            settings: OutboundSettings::parse(&annotations, warn),
        }
    }
}
