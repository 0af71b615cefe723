//! What every stream should hold, computed only from objects listed from
//! the API (never from the destination's code or answers): the audit's
//! reference. Pure functions, unit-tested below.
//!
//! The rules follow the destination's documented behaviour (spec §1–§3,
//! Meridian's README):
//! - `Get svc:port`: the Service's first port with that number gives a
//!   port *name* (`""` if unnamed); each of the Service's slices (in name
//!   order) offers its port of that name, or the requested number when the
//!   Service has no such port; a slice without a `ports` list offers
//!   nothing. Endpoints with `conditions.ready == false` are skipped; a Pod
//!   targetRef whose pod does not exist drops the endpoint; other targetRef
//!   kinds are skipped. `internalTrafficPolicy: Local` keeps only pod
//!   endpoints on the client's node. IPv6 off drops IPv6 addresses; IPv6 on
//!   drops a pod's IPv4 address when the same pod also has an IPv6 one.
//!   A missing Service has no endpoints.
//! - Topology hints are not modelled: the soak writes none and its nodes
//!   have no zone, in which case the destination keeps every candidate.
//! - `GetProfile svc:port` (whether or not the Service exists or declares
//!   the port, as the original): the route names of the ServiceProfile
//!   `<svc>.<ns>.svc.cluster.local`, in order, and `opaque_protocol` from
//!   the Service's `config.linkerd.io/opaque-ports` annotation (numbers,
//!   ranges, Service port names; no annotation: the destination's default
//!   opaque ports, none in the soak; no Service: none).
//! - `WatchPort pod:port` (policy controller): the Server whose
//!   `podSelector.matchLabels` the pod's labels satisfy and whose `port` is
//!   the number or the name of one of the pod's container ports with that
//!   number (the soak's Servers never contest a port), with its
//!   `proxyProtocol`; without one, the default server (`all-unauthenticated`,
//!   protocol detection).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{IpAddr, SocketAddr},
};

use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};

/// `(namespace, name)` of a pod.
pub type PodKey = (String, String);

/// What the truth needs to know about an existing pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// `spec.nodeName` (`""` if unset).
    pub node_name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Named container ports: (name, containerPort).
    pub named_ports: Vec<(String, i32)>,
}

/// The requested port resolved through the Service.
enum Target {
    Name(String),
    Number(u16),
}

/// One candidate address with its identity (the destination keys its set
/// by it: a later slice overrides an earlier one with the same identity).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Identity {
    Pod { pod: PodKey, v6: bool },
    Other { namespace: String, name: String },
}

struct Candidate {
    addr: SocketAddr,
    /// The pod and its node, for pod endpoints.
    pod: Option<(PodKey, String)>,
}

/// The addresses a `Get` stream for `service:port` (in `namespace`) should
/// hold, for a client on `client_node`.
#[allow(clippy::too_many_arguments)]
pub fn get_endpoints(
    namespace: &str,
    service_name: &str,
    service: Option<&Service>,
    slices: &[&EndpointSlice],
    pods: &BTreeMap<PodKey, PodFacts>,
    port: u16,
    client_node: &str,
    enable_ipv6: bool,
) -> BTreeSet<SocketAddr> {
    let Some(service) = service else {
        return BTreeSet::new();
    };
    let spec = service.spec.as_ref();
    let target = spec
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == i32::from(port)))
        .map_or(Target::Number(port), |p| {
            Target::Name(p.name.clone().unwrap_or_default())
        });
    let local = spec.and_then(|s| s.internal_traffic_policy.as_deref()) == Some("Local");

    let mut ordered: Vec<&EndpointSlice> = slices.to_vec();
    ordered.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut set: BTreeMap<Identity, Candidate> = BTreeMap::new();
    for slice in ordered {
        let Some(ports) = slice.ports.as_ref() else {
            continue;
        };
        let slice_port = match &target {
            Target::Number(n) => Some(*n),
            Target::Name(name) => ports
                .iter()
                .find(|p| p.name.as_deref().unwrap_or("") == name && p.port.is_some())
                .and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok()),
        };
        let Some(slice_port) = slice_port else {
            continue;
        };
        let slice_ns = slice.metadata.namespace.as_deref().unwrap_or(namespace);
        for ep in slice.endpoints.iter().flatten() {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            let hostname = ep.hostname.as_deref().filter(|h| !h.is_empty());
            let ips: Vec<IpAddr> = ep.addresses.iter().filter_map(|a| a.parse().ok()).collect();
            match &ep.target_ref {
                None => {
                    for ip in ips {
                        let mut name = format!("{service_name}-{ip}-{slice_port}");
                        if let Some(h) = hostname {
                            name = format!("{name}-{h}");
                        }
                        set.insert(
                            Identity::Other {
                                namespace: slice_ns.to_string(),
                                name,
                            },
                            Candidate {
                                addr: SocketAddr::new(ip, slice_port),
                                pod: None,
                            },
                        );
                    }
                }
                Some(r) if r.kind.as_deref() == Some("Pod") => {
                    let pod_ns = r
                        .namespace
                        .as_deref()
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or(slice_ns)
                        .to_string();
                    let key = (pod_ns, r.name.clone().unwrap_or_default());
                    let Some(facts) = pods.get(&key) else {
                        continue;
                    };
                    for ip in ips {
                        set.insert(
                            Identity::Pod {
                                pod: key.clone(),
                                v6: ip.is_ipv6(),
                            },
                            Candidate {
                                addr: SocketAddr::new(ip, slice_port),
                                pod: Some((key.clone(), facts.node_name.clone())),
                            },
                        );
                    }
                }
                Some(_) => {}
            }
        }
    }

    let selected: Vec<(&Identity, &Candidate)> = set
        .iter()
        .filter(|(_, c)| {
            !local
                || c.pod
                    .as_ref()
                    .is_some_and(|(_, node)| node.as_str() == client_node)
        })
        .collect();
    let v6_pods: BTreeSet<&PodKey> = selected
        .iter()
        .filter_map(|(id, _)| match id {
            Identity::Pod { pod, v6: true } => Some(pod),
            _ => None,
        })
        .collect();
    selected
        .into_iter()
        .filter(|(id, c)| {
            if enable_ipv6 {
                !matches!(id, Identity::Pod { pod, v6: false } if v6_pods.contains(pod))
            } else {
                c.addr.is_ipv4()
            }
        })
        .map(|(_, c)| c.addr)
        .collect()
}

/// What a `GetProfile` stream of a Service port shows that the audit checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileView {
    /// `routes[].metrics_labels["route"]`, in order.
    pub routes: Vec<String>,
    /// `opaque_protocol`.
    pub opaque: bool,
}

impl std::fmt::Display for ProfileView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "routes {:?}, opaque {}", self.routes, self.opaque)
    }
}

/// The profile of `service:port` from the Service and the `spec` of its
/// ServiceProfile (if one exists).
pub fn profile(
    service: Option<&Service>,
    profile_spec: Option<&serde_json::Value>,
    port: u16,
) -> ProfileView {
    let routes = profile_spec
        .and_then(|spec| spec.get("routes"))
        .and_then(|r| r.as_array())
        .map(|routes| {
            routes
                .iter()
                .map(|r| {
                    r.get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default();
    let annotation = service
        .and_then(|s| s.metadata.annotations.as_ref())
        .and_then(|a| a.get("config.linkerd.io/opaque-ports"));
    let opaque = match (service, annotation) {
        (Some(svc), Some(list)) => opaque_list_contains(svc, list, port),
        // No annotation (or no Service): the default opaque ports, which
        // the soak leaves empty.
        _ => false,
    };
    ProfileView { routes, opaque }
}

/// Whether a port list (`80,9000`, `8000-8100`, Service port names) names `port`.
fn opaque_list_contains(service: &Service, list: &str, port: u16) -> bool {
    let named = |name: &str| -> Option<u16> {
        service
            .spec
            .as_ref()?
            .ports
            .as_ref()?
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u16::try_from(p.port).ok())
    };
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .any(|item| {
            if let Some((lo, hi)) = item.split_once('-')
                && let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u16>(), hi.trim().parse::<u16>())
            {
                return (lo..=hi).contains(&port);
            }
            match item.parse::<u16>() {
                Ok(n) => n == port,
                Err(_) => named(item) == Some(port),
            }
        })
}

/// What a `WatchPort` stream shows that the audit checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InboundView {
    /// `labels["kind"]`: `server` or `default`.
    pub kind: String,
    /// `labels["name"]`: the Server's name, or the default policy's.
    pub name: String,
    /// The protocol: `Detect`, `Opaque`, `Tls`, `Http1`, `Http2`, `Grpc`.
    pub protocol: String,
}

impl std::fmt::Display for InboundView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.kind, self.name, self.protocol)
    }
}

/// The inbound server of `port` of a pod, from the namespace's Servers
/// (`(name, spec)`).
pub fn inbound(pod: &PodFacts, servers: &[(String, serde_json::Value)], port: u16) -> InboundView {
    let selects = |spec: &serde_json::Value| {
        let Some(labels) = spec
            .get("podSelector")
            .and_then(|s| s.get("matchLabels"))
            .and_then(|l| l.as_object())
        else {
            return false;
        };
        labels.iter().all(|(k, v)| {
            v.as_str()
                .is_some_and(|v| pod.labels.get(k).map(String::as_str) == Some(v))
        })
    };
    let on_port = |spec: &serde_json::Value| match spec.get("port") {
        Some(serde_json::Value::Number(n)) => n.as_u64() == Some(u64::from(port)),
        Some(serde_json::Value::String(name)) => pod
            .named_ports
            .iter()
            .any(|(n, p)| n == name && *p == i32::from(port)),
        _ => false,
    };
    let found = servers
        .iter()
        .find(|(_, spec)| selects(spec) && on_port(spec));
    match found {
        Some((name, spec)) => InboundView {
            kind: "server".into(),
            name: name.clone(),
            protocol: match spec.get("proxyProtocol").and_then(|p| p.as_str()) {
                Some("HTTP/1") => "Http1",
                Some("HTTP/2") => "Http2",
                Some("gRPC") => "Grpc",
                Some("opaque") => "Opaque",
                Some("TLS") => "Tls",
                _ => "Detect",
            }
            .into(),
        },
        None => InboundView {
            kind: "default".into(),
            name: "all-unauthenticated".into(),
            protocol: "Detect".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ports: serde_json::Value, extra: serde_json::Value) -> Service {
        let mut v = json!({
            "metadata": {"name": "web", "namespace": "soak"},
            "spec": {"ports": ports},
        });
        if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
            for (k, val) in extra {
                spec.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).expect("service")
    }

    fn slice(name: &str, ports: serde_json::Value, endpoints: serde_json::Value) -> EndpointSlice {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "soak",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        });
        if !ports.is_null() {
            v["ports"] = ports;
        }
        serde_json::from_value(v).expect("slice")
    }

    fn pod_ep(ip: &str, pod: &str, ready: Option<bool>) -> serde_json::Value {
        let mut ep = json!({"addresses": [ip], "targetRef": {"kind": "Pod", "name": pod}});
        if let Some(r) = ready {
            ep["conditions"] = json!({"ready": r});
        }
        ep
    }

    fn pods(names: &[(&str, &str)]) -> BTreeMap<PodKey, PodFacts> {
        names
            .iter()
            .map(|(n, node)| {
                (
                    ("soak".to_string(), n.to_string()),
                    PodFacts {
                        node_name: node.to_string(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    fn addrs(list: &[&str]) -> BTreeSet<SocketAddr> {
        list.iter().map(|a| a.parse().expect("addr")).collect()
    }

    fn web() -> Service {
        service(
            json!([{"name": "http", "port": 80}, {"name": "admin", "port": 9000}]),
            json!({}),
        )
    }

    fn get(
        svc: Option<&Service>,
        slices: &[&EndpointSlice],
        pods: &BTreeMap<PodKey, PodFacts>,
        port: u16,
    ) -> BTreeSet<SocketAddr> {
        get_endpoints("soak", "web", svc, slices, pods, port, "", false)
    }

    #[test]
    fn port_name_picks_the_slice_port() {
        let s = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}, {"name": "admin", "port": 9090}]),
            json!([
                pod_ep("10.0.0.1", "p1", None),
                pod_ep("10.0.0.2", "p2", Some(true))
            ]),
        );
        let p = pods(&[("p1", "n1"), ("p2", "n1")]);
        let svc = web();
        assert_eq!(
            get(Some(&svc), &[&s], &p, 80),
            addrs(&["10.0.0.1:8080", "10.0.0.2:8080"])
        );
        assert_eq!(
            get(Some(&svc), &[&s], &p, 9000),
            addrs(&["10.0.0.1:9090", "10.0.0.2:9090"])
        );
        // Not a Service port: the number itself, on every slice with ports.
        assert_eq!(
            get(Some(&svc), &[&s], &p, 81),
            addrs(&["10.0.0.1:81", "10.0.0.2:81"])
        );
    }

    #[test]
    fn unmatched_names_and_portless_slices_offer_nothing() {
        let renamed = slice(
            "web-a",
            json!([{"name": "web", "port": 8080}]),
            json!([pod_ep("10.0.0.1", "p1", None)]),
        );
        let portless = slice(
            "web-b",
            serde_json::Value::Null,
            json!([pod_ep("10.0.0.2", "p2", None)]),
        );
        let p = pods(&[("p1", ""), ("p2", "")]);
        let svc = web();
        assert!(get(Some(&svc), &[&renamed, &portless], &p, 80).is_empty());
        // The number path still needs a ports list.
        assert_eq!(
            get(Some(&svc), &[&renamed, &portless], &p, 81),
            addrs(&["10.0.0.1:81"])
        );
        // An unnamed Service port matches an unnamed slice port.
        let unnamed_svc = service(json!([{"port": 80}]), json!({}));
        let unnamed = slice(
            "web-c",
            json!([{"port": 7000}, {"name": "web", "port": 8080}]),
            json!([pod_ep("10.0.0.3", "p1", None)]),
        );
        assert_eq!(
            get(Some(&unnamed_svc), &[&unnamed], &p, 80),
            addrs(&["10.0.0.3:7000"])
        );
    }

    #[test]
    fn readiness_missing_pods_and_targetless() {
        let s = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}]),
            json!([
                pod_ep("10.0.0.1", "p1", Some(false)),
                pod_ep("10.0.0.2", "gone", None),
                pod_ep("10.0.0.3", "p3", None),
                {"addresses": ["10.9.0.1"]},
                {"addresses": ["10.9.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.9.0.3"], "targetRef": {"kind": "Node", "name": "n1"}},
            ]),
        );
        let p = pods(&[("p1", ""), ("p3", "")]);
        assert_eq!(
            get(Some(&web()), &[&s], &p, 80),
            addrs(&["10.0.0.3:8080", "10.9.0.1:8080"])
        );
    }

    #[test]
    fn missing_service_is_empty() {
        let s = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}]),
            json!([pod_ep("10.0.0.1", "p1", None)]),
        );
        assert!(get(None, &[&s], &pods(&[("p1", "")]), 80).is_empty());
    }

    #[test]
    fn local_traffic_policy_keeps_the_clients_node_only() {
        let svc = service(
            json!([{"name": "http", "port": 80}]),
            json!({"internalTrafficPolicy": "Local"}),
        );
        let s = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}]),
            json!([
                pod_ep("10.0.0.1", "p1", None),
                pod_ep("10.0.0.2", "p2", None),
                {"addresses": ["10.9.0.1"]},
            ]),
        );
        let p = pods(&[("p1", "node-1"), ("p2", "node-2")]);
        let on = |node| get_endpoints("soak", "web", Some(&svc), &[&s], &p, 80, node, false);
        assert_eq!(on("node-1"), addrs(&["10.0.0.1:8080"]));
        assert_eq!(on("node-2"), addrs(&["10.0.0.2:8080"]));
        assert!(
            on("").is_empty(),
            "no fallback; targetless endpoints never match"
        );
    }

    #[test]
    fn address_families() {
        let v4 = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}]),
            json!([
                pod_ep("10.0.0.1", "p1", None),
                pod_ep("10.0.0.2", "p2", None)
            ]),
        );
        let mut v6 = slice(
            "web-b",
            json!([{"name": "http", "port": 8080}]),
            json!([pod_ep("fd00::1", "p1", None)]),
        );
        v6.address_type = "IPv6".into();
        let p = pods(&[("p1", ""), ("p2", "")]);
        let svc = web();
        let with = |ipv6| get_endpoints("soak", "web", Some(&svc), &[&v4, &v6], &p, 80, "", ipv6);
        assert_eq!(with(false), addrs(&["10.0.0.1:8080", "10.0.0.2:8080"]));
        assert_eq!(with(true), addrs(&["[fd00::1]:8080", "10.0.0.2:8080"]));
    }

    #[test]
    fn later_slices_override_the_same_pod() {
        // The same pod in two IPv4 slices: one identity, the later slice
        // (by name) wins, as in the destination's keyed set.
        let a = slice(
            "web-a",
            json!([{"name": "http", "port": 8080}]),
            json!([pod_ep("10.0.0.1", "p1", None)]),
        );
        let b = slice(
            "web-b",
            json!([{"name": "http", "port": 8081}]),
            json!([pod_ep("10.0.0.1", "p1", None)]),
        );
        let p = pods(&[("p1", "")]);
        assert_eq!(
            get(Some(&web()), &[&b, &a], &p, 80),
            addrs(&["10.0.0.1:8081"])
        );
    }

    #[test]
    fn profile_routes_and_opacity() {
        let spec = json!({"routes": [{"name": "GET /"}, {"name": "POST /api"}]});
        let plain = web();
        assert_eq!(
            profile(Some(&plain), Some(&spec), 80),
            ProfileView {
                routes: vec!["GET /".into(), "POST /api".into()],
                opaque: false
            }
        );
        assert_eq!(profile(Some(&plain), None, 80), ProfileView::default());
        let annotated = |list: &str| {
            let mut svc = web();
            svc.metadata.annotations = Some(
                [(
                    "config.linkerd.io/opaque-ports".to_string(),
                    list.to_string(),
                )]
                .into(),
            );
            svc
        };
        for (list, port, opaque) in [
            ("80", 80, true),
            ("9000", 80, false),
            ("80,9000", 9000, true),
            ("70-90", 80, true),
            ("http", 80, true),
            ("admin", 80, false),
            ("", 80, false),
        ] {
            assert_eq!(
                profile(Some(&annotated(list)), None, port).opaque,
                opaque,
                "{list} / {port}"
            );
        }
        assert!(!profile(None, Some(&spec), 80).opaque);
    }

    #[test]
    fn inbound_server_by_selector_and_port() {
        let pod = PodFacts {
            node_name: String::new(),
            labels: [("group".to_string(), "1".to_string())].into(),
            named_ports: vec![("http".into(), 8080), ("admin".into(), 9090)],
        };
        let servers = vec![
            (
                "srv-0".to_string(),
                json!({"podSelector": {"matchLabels": {"group": "0"}}, "port": 8080, "proxyProtocol": "opaque"}),
            ),
            (
                "srv-1".to_string(),
                json!({"podSelector": {"matchLabels": {"group": "1"}}, "port": "http", "proxyProtocol": "HTTP/2"}),
            ),
        ];
        assert_eq!(
            inbound(&pod, &servers, 8080),
            InboundView {
                kind: "server".into(),
                name: "srv-1".into(),
                protocol: "Http2".into()
            }
        );
        let default = inbound(&pod, &servers, 9090);
        assert_eq!(
            (default.kind.as_str(), default.protocol.as_str()),
            ("default", "Detect")
        );
        let numbered = vec![(
            "srv-1".to_string(),
            json!({"podSelector": {"matchLabels": {"group": "1"}}, "port": 9090}),
        )];
        assert_eq!(inbound(&pod, &numbered, 9090).protocol, "Detect");
        assert_eq!(inbound(&pod, &numbered, 9090).kind, "server");
    }
}
