//! Services → core values: declared ports, opaque ports, ExternalName, the
//! ClusterIPs a Service answers on.

use k8s_api::labels;
use std::collections::HashSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;

use crate::core::ServiceId;
use k8s_api::ports::{PortRanges, parse_port_list};

/// The id of a Service: its name and namespace (empty if unset).
pub fn service_key(service: &Service) -> Option<ServiceId> {
    Some(ServiceId {
        namespace: service.metadata.namespace.clone().unwrap_or_default(),
        name: service.metadata.name.clone()?,
    })
}

/// The opaque ports of a Service: its `config.linkerd.io/opaque-ports`
/// annotation (numbers, ranges, ServicePort names; empty means none), else
/// the default set.
pub fn service_opaque_ports(service: Option<&Service>, defaults: &PortRanges) -> PortRanges {
    let annotation = service
        .and_then(|s| s.metadata.annotations.as_ref())
        .and_then(|a| a.get(labels::OPAQUE_PORTS));
    match (annotation, service) {
        (Some(list), Some(svc)) => {
            let named = |name: &str| {
                svc.spec
                    .as_ref()?
                    .ports
                    .as_ref()?
                    .iter()
                    .find(|p| p.name.as_deref() == Some(name))
                    .and_then(|p| u16::try_from(p.port).ok())
            };
            parse_port_list(list, &named)
        }
        _ => defaults.clone(),
    }
}

/// Whether the Service declares `port`.
pub fn declares_port(service: &Service, port: u16) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|ports| ports.iter().any(|p| p.port == i32::from(port)))
}

/// Whether the Service is of type `ExternalName` (no endpoints to discover).
pub fn is_external_name(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_some_and(|t| t == "ExternalName")
}

/// The ClusterIPs of a Service (`clusterIPs` and `clusterIP`), parsed.
pub fn cluster_ips(service: &Service) -> HashSet<IpAddr> {
    service
        .spec
        .as_ref()
        .map(|spec| {
            spec.cluster_ips
                .iter()
                .flatten()
                .chain(spec.cluster_ip.iter())
                .filter_map(|ip| ip.parse::<IpAddr>().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_opaque_ports_follow_the_annotation_else_the_defaults() {
        let defaults = PortRanges::parse("3306");
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"annotations": {labels::OPAQUE_PORTS: "mysql,4000-4001"}},
            "spec": {"ports": [{"name": "mysql", "port": 3307}]}
        }))
        .expect("service");
        let set = service_opaque_ports(Some(&svc), &defaults);
        assert!(set.contains(3307) && set.contains(4001) && !set.contains(3306));
        let plain: Service = serde_json::from_value(json!({"spec": {}})).expect("service");
        assert!(service_opaque_ports(Some(&plain), &defaults).contains(3306));
        let empty: Service = serde_json::from_value(json!({
            "metadata": {"annotations": {labels::OPAQUE_PORTS: ""}}
        }))
        .expect("service");
        assert!(service_opaque_ports(Some(&empty), &defaults).is_empty());
    }
}
