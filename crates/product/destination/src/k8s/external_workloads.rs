//! ExternalWorkloads → core values: the facts of a workload that feed its
//! endpoints, and the `ip:port` keys `GetProfile` finds it under.

use std::net::{IpAddr, SocketAddr};

use k8s_api::{labels, ports::parse_port_list, workload::ExternalWorkload};

use super::pods::sole_owner;
use crate::core::endpoint::{DEFAULT_EXTERNAL_PROXY_INBOUND_PORT, ExternalWorkloadInfo};

/// The facts of a workload its `WeightedAddr` needs.
pub fn external_workload_info(ew: &ExternalWorkload) -> ExternalWorkloadInfo {
    let meta = &ew.metadata;
    let ports = ew.spec.ports.as_deref().unwrap_or_default();
    let named = |name: &str| {
        ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.port)
    };
    ExternalWorkloadInfo {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        owner: sole_owner(ew),
        identity: ew.spec.mesh_tls.identity.clone(),
        server_name: ew.spec.mesh_tls.server_name.clone(),
        proxy_inbound_port: named(labels::PROXY_PORT_NAME)
            .unwrap_or(DEFAULT_EXTERNAL_PROXY_INBOUND_PORT),
        opaque_ports: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::OPAQUE_PORTS))
            .map(|list| parse_port_list(list, &named)),
    }
}

/// The workload's addresses (`spec.workloadIPs`), parsed; entries that are
/// not IPs are skipped.
pub fn workload_ips(ew: &ExternalWorkload) -> Vec<IpAddr> {
    ew.spec
        .workload_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.ip.parse().ok())
        .collect()
}

/// Every `ip:port` a `GetProfile` by address finds the workload under: each
/// of its IPs with each port it declares (as the original indexes them).
pub fn workload_addrs(ew: &ExternalWorkload) -> Vec<SocketAddr> {
    let ports = ew.spec.ports.as_deref().unwrap_or_default();
    workload_ips(ew)
        .into_iter()
        .flat_map(|ip| ports.iter().map(move |p| SocketAddr::new(ip, p.port)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::external_workload;
    use serde_json::json;

    fn workload(extra: serde_json::Value) -> ExternalWorkload {
        external_workload("vm", extra)
    }

    #[test]
    fn reads_identity_owner_and_proxy_port() {
        let ew = workload(json!({
            "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Deployment", "name": "owner", "uid": "u"}]},
            "spec": {"ports": [{"name": "linkerd-proxy", "port": 4200}, {"name": "http", "port": 8080}]}
        }));
        let info = external_workload_info(&ew);
        assert_eq!(info.name, "vm");
        assert_eq!(info.namespace, "ns");
        assert_eq!(info.identity, "spiffe://root.linkerd.cluster.local/vm");
        assert_eq!(info.server_name, "vm.ns.cluster.local");
        assert_eq!(info.proxy_inbound_port, 4200);
        let owner = info.owner.expect("one owner");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Deployment", "owner")
        );
        assert_eq!(info.opaque_ports, None);
    }

    #[test]
    fn proxy_port_defaults_to_4143() {
        assert_eq!(
            external_workload_info(&workload(json!({}))).proxy_inbound_port,
            4143
        );
    }

    #[test]
    fn opaque_annotation_resolves_names_against_declared_ports() {
        let ew = workload(
            json!({"metadata": {"annotations": {"config.linkerd.io/opaque-ports": "http, 3306-3307, bogus"}}}),
        );
        let ports = external_workload_info(&ew).opaque_ports.expect("annotated");
        assert!(ports.contains(8080));
        assert!(ports.contains(3306) && ports.contains(3307));
        assert!(!ports.contains(9090));
    }

    #[test]
    fn empty_opaque_annotation_means_none() {
        let ew =
            workload(json!({"metadata": {"annotations": {"config.linkerd.io/opaque-ports": ""}}}));
        let ports = external_workload_info(&ew).opaque_ports.expect("annotated");
        assert!(!ports.contains(3306));
    }

    #[test]
    fn addresses_are_each_ip_with_each_declared_port() {
        let addrs = workload_addrs(&workload(json!({})));
        let expected: Vec<SocketAddr> = [
            "192.0.2.10:8080",
            "192.0.2.10:9090",
            "[2001:db8::10]:8080",
            "[2001:db8::10]:9090",
        ]
        .iter()
        .map(|a| a.parse().expect("addr"))
        .collect();
        assert_eq!(addrs, expected);
    }
}
