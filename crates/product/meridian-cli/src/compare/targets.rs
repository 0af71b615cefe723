//! The questions, from the cluster's own objects: for every Service port,
//! `Get` and `GetProfile` by name and, for a ClusterIP, `GetProfile` and
//! the outbound policy of `ClusterIP:port` (what a proxy asks for a
//! connection to it); for every pod, `GetProfile` of `podIP:port` for each
//! container port and, for a StatefulSet's pods, `Get` and `GetProfile`
//! of their hostnames; for every meshed pod, the inbound policy of each
//! container port and of its proxy's admin port. Each is asked as a client
//! pod: `--as`, or a synthetic one per namespace (`meridian-compare` on the
//! first Node), with the context token and workload a proxy sends, as the
//! Linkerd 2.20 chart writes them into the proxy's environment.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use k8s_api::labels;
use k8s_openapi::api::core::v1::{Container, Node as KubeNode, Pod, Service};
use kube::{Api as KubeApi, Client, api::ListParams};

use super::{
    client::{ClientPod, workload},
    question::{Api, Question, Request, age, now_since_epoch},
};

/// The synthetic client's pod name.
pub const SYNTHETIC_POD: &str = "meridian-compare";

/// The proxy's admin port when its container does not say.
const DEFAULT_ADMIN_PORT: u16 = 4191;

/// The proxy container's name (the chart's).
const PROXY_CONTAINER: &str = "linkerd-proxy";

/// What to ask about.
pub struct Scope<'a> {
    /// `None`: every namespace.
    pub namespace: Option<&'a str>,
    pub selector: Option<&'a str>,
    pub cluster_domain: &'a str,
    /// `[<ns>/]<pod>` to ask as, else a synthetic client per namespace.
    pub client: Option<&'a str>,
    /// The namespace of an `--as` pod given without one.
    pub default_namespace: &'a str,
}

/// Every question in scope, in a stable order (namespace, object, port, API).
pub async fn questions(kube: &Client, scope: &Scope<'_>) -> anyhow::Result<Vec<Question>> {
    let mut params = ListParams::default();
    if let Some(selector) = scope.selector {
        params = params.labels(selector);
    }
    let (services, pods): (KubeApi<Service>, KubeApi<Pod>) = match scope.namespace {
        Some(ns) => (
            KubeApi::namespaced(kube.clone(), ns),
            KubeApi::namespaced(kube.clone(), ns),
        ),
        None => (KubeApi::all(kube.clone()), KubeApi::all(kube.clone())),
    };
    let mut services = services
        .list(&params)
        .await
        .context("listing Services")?
        .items;
    let mut pods = pods.list(&params).await.context("listing Pods")?.items;
    let key = |m: &kube::api::ObjectMeta| (m.namespace.clone(), m.name.clone());
    services.sort_by_key(|s| key(&s.metadata));
    pods.sort_by_key(|p| key(&p.metadata));

    let fixed = match scope.client {
        Some(client) => Some(client_pod(kube, client, scope.default_namespace).await?),
        None => None,
    };
    // The synthetic client sits on the first Node; its `Get`s are asked
    // again from a Node of each other zone (an endpoint's `zone_locality`,
    // and which endpoints a zone- or node-local Service keeps, depend on
    // the client's Node).
    let nodes = match &fixed {
        Some(_) => Vec::new(),
        None => client_nodes(kube).await,
    };
    let synthetic = |ns: &str, node: &str| ClientPod {
        namespace: ns.to_string(),
        pod: SYNTHETIC_POD.to_string(),
        node: node.to_string(),
    };
    let first_node = nodes.first().cloned().unwrap_or_default();
    let client_for = |ns: &str| fixed.clone().unwrap_or_else(|| synthetic(ns, &first_node));
    let now = now_since_epoch();
    let mut out = Vec::new();
    for svc in &services {
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let created = age(&svc.metadata.creation_timestamp, now);
        out.extend(service_questions(
            svc,
            &client_for(&ns),
            scope.cluster_domain,
            created,
        ));
        for node in nodes.iter().skip(1) {
            let gets = service_questions(svc, &synthetic(&ns, node), scope.cluster_domain, created)
                .into_iter()
                .filter(|q| q.api == Api::Get)
                .map(|mut q| {
                    q.client = format!("{} on {node}", q.client);
                    q
                });
            out.extend(gets);
        }
    }
    for pod in &pods {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        out.extend(pod_questions(
            pod,
            &client_for(&ns),
            scope.cluster_domain,
            age(&pod.metadata.creation_timestamp, now),
        ));
    }
    let (workloads, egress) = super::outside::list(kube, scope.namespace, &params).await;
    for ew in &workloads {
        let ns = ew.metadata.namespace.clone().unwrap_or_default();
        out.extend(super::outside::workload_questions(ew, &client_for(&ns)));
    }
    for network in &egress {
        let ns = network.metadata.namespace.clone().unwrap_or_default();
        out.extend(super::outside::egress_question(network, &client_for(&ns)));
    }
    Ok(out)
}

/// The questions about one Service's TCP ports.
pub fn service_questions(
    svc: &Service,
    client: &ClientPod,
    domain: &str,
    age: Option<Duration>,
) -> Vec<Question> {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    let cluster_ip = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok());
    let mut out = Vec::new();
    for port in spec.ports.iter().flatten() {
        if port.protocol.as_deref().is_some_and(|p| p != "TCP") {
            continue;
        }
        let Ok(number) = u16::try_from(port.port) else {
            continue;
        };
        let authority = format!("{name}.{ns}.svc.{domain}:{number}");
        for api in [Api::Get, Api::GetProfile] {
            out.push(client.ask_destination(api, authority.clone(), age));
        }
        if let Some(ip) = cluster_ip {
            let addr = SocketAddr::new(ip, number);
            out.push(client.ask_destination(Api::GetProfile, addr.to_string(), age));
            let request = Request::Outbound {
                addr,
                workload: client.workload(),
            };
            out.push(client.ask(Api::Outbound, addr.to_string(), request, age));
        }
    }
    out
}

/// The questions about a pod with an IP of its own (not the host's): for
/// each TCP port of its application containers, `GetProfile` of
/// `podIP:port` (what a proxy asks for a connection straight to the pod)
/// and, with a hostname and subdomain (a StatefulSet's pods), `Get` and
/// `GetProfile` of `<hostname>.<subdomain>.<ns>.svc.<domain>:port`; for a
/// meshed pod, the inbound policy of each of those ports and of its
/// proxy's admin port.
pub fn pod_questions(
    pod: &Pod,
    client: &ClientPod,
    domain: &str,
    age: Option<Duration>,
) -> Vec<Question> {
    let meshed = pod
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::CONTROL_PLANE_NS));
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok());
    let (Some(spec), Some(ip)) = (&pod.spec, ip) else {
        return Vec::new();
    };
    if spec.host_network == Some(true) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut app_ports: Vec<u16> = spec
        .containers
        .iter()
        .filter(|c| c.name != PROXY_CONTAINER)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.protocol.as_deref().is_none_or(|p| p == "TCP"))
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .collect();
    app_ports.sort_unstable();
    app_ports.dedup();
    let mut out = Vec::new();
    let host = match (spec.hostname.as_deref(), spec.subdomain.as_deref()) {
        (Some(host), Some(sub)) if !host.is_empty() && !sub.is_empty() => {
            Some(format!("{host}.{sub}.{ns}.svc.{domain}"))
        }
        _ => None,
    };
    for &port in &app_ports {
        let addr = SocketAddr::new(ip, port).to_string();
        out.push(client.ask_destination(Api::GetProfile, addr, age));
        if let Some(host) = &host {
            for api in [Api::Get, Api::GetProfile] {
                out.push(client.ask_destination(api, format!("{host}:{port}"), age));
            }
        }
    }
    if !meshed {
        return out;
    }
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let proxy = all.clone().find(|c| c.name == PROXY_CONTAINER);
    let mut inbound = app_ports;
    inbound.push(proxy.map_or(DEFAULT_ADMIN_PORT, admin_port));
    inbound.sort_unstable();
    inbound.dedup();
    out.extend(inbound.into_iter().map(|port| {
        let request = Request::Inbound {
            workload: workload(&ns, &name),
            port: u32::from(port),
        };
        client.ask(Api::Inbound, format!("{ns}/{name}:{port}"), request, age)
    }));
    out
}

/// The proxy's admin port: `LINKERD2_PROXY_ADMIN_LISTEN_ADDR`, else its
/// port named `linkerd-admin`, else 4191.
fn admin_port(proxy: &Container) -> u16 {
    let from_env = proxy
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "LINKERD2_PROXY_ADMIN_LISTEN_ADDR")
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok());
    let named = || {
        proxy
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("linkerd-admin"))
            .and_then(|p| u16::try_from(p.container_port).ok())
    };
    from_env.or_else(named).unwrap_or(DEFAULT_ADMIN_PORT)
}

/// The `--as` pod.
async fn client_pod(kube: &Client, spec: &str, default_ns: &str) -> anyhow::Result<ClientPod> {
    let (ns, name) = spec.split_once('/').unwrap_or((default_ns, spec));
    let pod = KubeApi::<Pod>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Pod {ns}/{name}"))?
        .with_context(|| format!("--as: Pod {ns}/{name} does not exist"))?;
    Ok(ClientPod {
        namespace: ns.to_string(),
        pod: name.to_string(),
        node: pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
    })
}

/// The synthetic client's Nodes: the first Node by name, then the first
/// of each other zone (`topology.kubernetes.io/zone`); none if Nodes
/// cannot be listed.
async fn client_nodes(kube: &Client) -> Vec<String> {
    let nodes = KubeApi::<KubeNode>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    one_per_zone(
        nodes
            .into_iter()
            .filter_map(|n| {
                let zone = n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::TOPOLOGY_ZONE))
                    .cloned();
                Some((n.metadata.name?, zone))
            })
            .collect(),
    )
}

/// Of (Node, zone) pairs: the first Node by name, then the first by name
/// of each zone not yet represented, in zone order.
fn one_per_zone(mut nodes: Vec<(String, Option<String>)>) -> Vec<String> {
    nodes.sort();
    let Some((first, first_zone)) = nodes.first().cloned() else {
        return Vec::new();
    };
    let mut zones = std::collections::BTreeMap::new();
    for (name, zone) in nodes {
        if zone != first_zone {
            zones.entry(zone).or_insert(name);
        }
    }
    std::iter::once(first).chain(zones.into_values()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientPod {
        ClientPod {
            namespace: "demo".into(),
            pod: "client-0".into(),
            node: "node-1".into(),
        }
    }

    #[test]
    fn one_client_node_per_zone_the_first_node_first() {
        let nodes = |v: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            v.iter()
                .map(|(n, z)| (n.to_string(), z.map(str::to_string)))
                .collect()
        };
        assert_eq!(
            one_per_zone(nodes(&[
                ("node-c", Some("zone-b")),
                ("node-b", Some("zone-a")),
                ("node-a", Some("zone-b")),
                ("node-d", Some("zone-c")),
                ("node-e", None),
            ])),
            ["node-a", "node-e", "node-b", "node-d"]
        );
        assert_eq!(one_per_zone(nodes(&[("only", None)])), ["only"]);
        assert!(one_per_zone(Vec::new()).is_empty());
    }

    #[test]
    fn tokens_as_the_chart_renders_them() {
        assert_eq!(
            client().context_token(),
            "{\"ns\":\"demo\", \"nodeName\":\"node-1\", \"pod\":\"client-0\"}\n"
        );
        assert_eq!(
            client().workload(),
            "{\"ns\":\"demo\", \"pod\":\"client-0\"}\n"
        );
        // What the chart writes is JSON either way.
        let parsed: serde_json::Value =
            serde_json::from_str(&client().context_token()).expect("json");
        assert_eq!(parsed["nodeName"], "node-1");
    }

    #[test]
    fn service_ports_give_four_questions_headless_two() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "demo"},
            "spec": {"clusterIP": "10.96.0.7", "ports": [
                {"port": 80}, {"port": 53, "protocol": "UDP"}]},
        }))
        .expect("service");
        let qs = service_questions(&svc, &client(), "cluster.local", None);
        let titles: Vec<String> = qs.iter().map(Question::title).collect();
        assert_eq!(
            titles,
            [
                "Destination.Get web.demo.svc.cluster.local:80",
                "Destination.GetProfile web.demo.svc.cluster.local:80",
                "Destination.GetProfile 10.96.0.7:80",
                "OutboundPolicies.Watch 10.96.0.7:80",
            ]
        );
        let mut headless = svc.clone();
        if let Some(spec) = headless.spec.as_mut() {
            spec.cluster_ip = Some("None".into());
        }
        assert_eq!(
            service_questions(&headless, &client(), "cluster.local", None).len(),
            2
        );
    }

    #[test]
    fn pods_give_their_ip_ports_hostnames_and_if_meshed_inbound_ports() {
        let pod = |labels: serde_json::Value, spec: serde_json::Value| -> Pod {
            let mut spec = spec;
            spec["containers"] = serde_json::json!([
                {"name": "app", "ports": [{"containerPort": 8080}, {"containerPort": 9000, "protocol": "UDP"}]},
                {"name": "linkerd-proxy", "ports": [{"name": "linkerd-proxy", "containerPort": 4143},
                    {"name": "linkerd-admin", "containerPort": 4191}],
                 "env": [{"name": "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "value": "0.0.0.0:4199"}]},
            ]);
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web-0", "namespace": "demo", "labels": labels},
                "spec": spec,
                "status": {"podIP": "10.0.0.9"},
            }))
            .expect("pod")
        };
        let titles = |pod: &Pod| -> Vec<String> {
            pod_questions(pod, &client(), "cluster.local", None)
                .iter()
                .map(Question::title)
                .collect()
        };
        let meshed = serde_json::json!({"linkerd.io/control-plane-ns": "linkerd"});
        assert_eq!(
            titles(&pod(meshed.clone(), serde_json::json!({}))),
            [
                "Destination.GetProfile 10.0.0.9:8080",
                "InboundServerPolicies.WatchPort demo/web-0:4199",
                "InboundServerPolicies.WatchPort demo/web-0:8080",
            ]
        );
        let stateful = serde_json::json!({"hostname": "web-0", "subdomain": "web"});
        assert_eq!(
            titles(&pod(serde_json::json!({}), stateful)),
            [
                "Destination.GetProfile 10.0.0.9:8080",
                "Destination.Get web-0.web.demo.svc.cluster.local:8080",
                "Destination.GetProfile web-0.web.demo.svc.cluster.local:8080",
            ]
        );
        let host_network = serde_json::json!({"hostNetwork": true});
        assert!(titles(&pod(meshed, host_network)).is_empty());
    }
}
