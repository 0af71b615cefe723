//! The questions about what lives outside the pod network: for every
//! ExternalWorkload, `GetProfile` of each `workloadIP:port` (what a proxy
//! asks for a connection straight to it) and the inbound policy of each
//! port as the workload's own proxy asks it; for every EgressNetwork, the
//! outbound policy of one address it captures (what a proxy asks for a
//! connection leaving the cluster).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_api::{policy::EgressNetwork, workload::ExternalWorkload};
use kube::{Api as KubeApi, Client, api::ListParams};

use super::{
    client::{ClientPod, json},
    question::{Api, Question, Request, age, now_since_epoch},
};

/// The port asked of an EgressNetwork's address (a proxy asks for the
/// port it connects to; HTTPS is the usual one).
const EGRESS_PORT: u16 = 443;

/// An address outside every private and shared range (RFC 5737's TEST-NET-2),
/// asked for an EgressNetwork without `networks` (all that is outside the
/// cluster networks). Nothing is sent to it: compare only asks about it.
const OUTSIDE: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));

/// The ExternalWorkloads and EgressNetworks in scope (`namespace`: `None`
/// for all), sorted by namespace and name; absent kinds (CRDs not
/// installed) give none.
pub async fn list(
    kube: &Client,
    namespace: Option<&str>,
    params: &ListParams,
) -> (Vec<ExternalWorkload>, Vec<EgressNetwork>) {
    let (workloads, egress): (KubeApi<ExternalWorkload>, KubeApi<EgressNetwork>) = match namespace {
        Some(ns) => (
            KubeApi::namespaced(kube.clone(), ns),
            KubeApi::namespaced(kube.clone(), ns),
        ),
        None => (KubeApi::all(kube.clone()), KubeApi::all(kube.clone())),
    };
    let key = |m: &kube::api::ObjectMeta| (m.namespace.clone(), m.name.clone());
    let mut workloads = workloads
        .list(params)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut egress = egress
        .list(params)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    workloads.sort_by_key(|w| key(&w.metadata));
    egress.sort_by_key(|e| key(&e.metadata));
    (workloads, egress)
}

/// The policy workload of an ExternalWorkload, as its proxy sends it.
pub fn external_workload(namespace: &str, name: &str) -> String {
    format!(
        "{{\"ns\":{}, \"external_workload\":{}}}\n",
        json(namespace),
        json(name)
    )
}

/// The questions about one ExternalWorkload.
pub fn workload_questions(ew: &ExternalWorkload, client: &ClientPod) -> Vec<Question> {
    let created = age(&ew.metadata.creation_timestamp, now_since_epoch());
    let ns = ew.metadata.namespace.clone().unwrap_or_default();
    let name = ew.metadata.name.clone().unwrap_or_default();
    let mut ports: Vec<u16> = ew
        .spec
        .ports
        .iter()
        .flatten()
        .map(|p| p.port)
        .filter(|port| *port > 0)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let ips: Vec<IpAddr> = ew
        .spec
        .workload_ips
        .iter()
        .flatten()
        .filter_map(|w| w.ip.parse().ok())
        .collect();
    let mut out = Vec::new();
    for &port in &ports {
        for ip in &ips {
            let addr = SocketAddr::new(*ip, port).to_string();
            out.push(client.ask_destination(Api::GetProfile, addr, created));
        }
        let request = Request::Inbound {
            workload: external_workload(&ns, &name),
            port: u32::from(port),
        };
        out.push(client.ask(
            Api::Inbound,
            format!("{ns}/{name}:{port}"),
            request,
            created,
        ));
    }
    out
}

/// The outbound question about one EgressNetwork: the first address of
/// its first network (or an address outside the cluster when it names
/// none), on port 443.
pub fn egress_question(egress: &EgressNetwork, client: &ClientPod) -> Option<Question> {
    let ip = match egress.spec.networks.as_deref() {
        None | Some([]) => OUTSIDE,
        Some([first, ..]) => first_host(&first.cidr)?,
    };
    let addr = SocketAddr::new(ip, EGRESS_PORT);
    let request = Request::Outbound {
        addr,
        workload: client.workload(),
    };
    let created = age(&egress.metadata.creation_timestamp, now_since_epoch());
    Some(client.ask(Api::Outbound, addr.to_string(), request, created))
}

/// The first host address of a CIDR (its only one for a /32 or /128).
fn first_host(cidr: &str) -> Option<IpAddr> {
    let net: ipnet::IpNet = cidr
        .parse()
        .or_else(|_| cidr.parse::<IpAddr>().map(ipnet::IpNet::from))
        .ok()?;
    Some(net.hosts().next().unwrap_or(net.addr()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientPod {
        ClientPod {
            namespace: "vms".into(),
            pod: "meridian-compare".into(),
            node: "node-1".into(),
        }
    }

    #[test]
    fn an_external_workload_gives_its_addresses_and_its_inbound_ports() {
        let ew: ExternalWorkload = serde_json::from_value(serde_json::json!({
            "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
            "metadata": {"name": "vm-1", "namespace": "vms"},
            "spec": {
                "meshTLS": {"identity": "spiffe://root.linkerd.cluster.local/vm-1", "serverName": "vm-1.cluster.local"},
                "ports": [{"port": 8080}, {"name": "admin", "port": 4191}],
                "workloadIPs": [{"ip": "172.20.0.9"}],
            },
        }))
        .expect("ExternalWorkload");
        let qs = workload_questions(&ew, &client());
        let titles: Vec<String> = qs.iter().map(Question::title).collect();
        assert_eq!(
            titles,
            [
                "Destination.GetProfile 172.20.0.9:4191",
                "InboundServerPolicies.WatchPort vms/vm-1:4191",
                "Destination.GetProfile 172.20.0.9:8080",
                "InboundServerPolicies.WatchPort vms/vm-1:8080",
            ]
        );
        let Request::Inbound { workload, .. } = &qs[1].request else {
            panic!("inbound")
        };
        assert_eq!(
            workload,
            "{\"ns\":\"vms\", \"external_workload\":\"vm-1\"}\n"
        );
    }

    #[test]
    fn an_egress_network_is_asked_at_its_first_address() {
        let egress = |networks: serde_json::Value| -> EgressNetwork {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "EgressNetwork",
                "metadata": {"name": "out", "namespace": "vms"},
                "spec": {"trafficPolicy": "Allow", "networks": networks},
            }))
            .expect("EgressNetwork")
        };
        let title = |e: &EgressNetwork| egress_question(e, &client()).map(|q| q.title());
        assert_eq!(
            title(&egress(serde_json::json!([{"cidr": "203.0.113.0/24"}]))),
            Some("OutboundPolicies.Watch 203.0.113.1:443".into())
        );
        assert_eq!(
            title(&egress(serde_json::json!([{"cidr": "203.0.113.7/32"}]))),
            Some("OutboundPolicies.Watch 203.0.113.7:443".into())
        );
        assert_eq!(
            title(&egress(serde_json::Value::Null)),
            Some("OutboundPolicies.Watch 198.51.100.1:443".into())
        );
        assert_eq!(
            title(&egress(serde_json::json!([{"cidr": "nonsense"}]))),
            None
        );
    }
}
