//! Tests of the Kubernetes → endpoint translation and of the `WeightedAddr`
//! each translated endpoint becomes.

use k8s_api::labels;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use linkerd2_proxy_api::destination::{
    AuthorityOverride, ProtocolHint, TlsIdentity, WeightedAddr, protocol_hint, tls_identity,
};
use linkerd2_proxy_api::net::TcpAddress;
use serde_json::json;

use super::endpoints::*;
use super::fixtures::*;
use super::pods::*;
use crate::config::TranslatorConfig;
use crate::core::endpoint::*;
use crate::proto::weighted_addr::*;

pub(super) fn only(set: &EndpointMap) -> &Arc<Endpoint> {
    assert_eq!(set.len(), 1, "{set:#?}");
    set.values().next().expect("one endpoint")
}

pub(super) fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().expect("ip"), port)
}

pub(super) fn hint(wa: &WeightedAddr) -> ProtocolHint {
    wa.protocol_hint.expect("protocol hint")
}

/// An endpoint's metric labels, to compare with a `BTreeMap` literal.
pub(super) fn labels(wa: &WeightedAddr) -> BTreeMap<&str, &str> {
    wa.metric_labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The hint of a meshed HTTP/2 endpoint without opaque transport.
pub(super) fn h2_hint() -> ProtocolHint {
    ProtocolHint {
        protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
        opaque_transport: None,
    }
}

pub(super) fn cfg() -> TranslatorConfig {
    TranslatorConfig::default()
}

fn translate_one(pod: Pod, port: u16) -> Arc<Endpoint> {
    let cache = Cache::new([pod]);
    let set = cache.translate(
        None,
        port,
        &[slice(
            "IPv4",
            json!([{"port": port}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        )],
    );
    Arc::clone(only(&set))
}

#[test]
fn named_target_port_resolves_through_service_port_name() {
    let svc = service(&[(80, "http", json!("web")), (9000, "metrics", json!(9090))]);
    let cache = Cache::new([meshed_pod("p1", "n1"), meshed_pod("p2", "n1")]);
    let slices = [
        slice(
            "IPv4",
            json!([{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        ),
        // A slice without the named port contributes nothing.
        slice(
            "IPv4",
            json!([{"name": "other", "port": 7000}]),
            json!([pod_ep("10.0.0.2", "p2", "z1")]),
        ),
    ];
    let set = cache.translate(Some(&svc), 80, &slices);
    assert_eq!(only(&set).addr, addr("10.0.0.1", 8080));
    let set = cache.translate(Some(&svc), 9000, &slices);
    assert_eq!(only(&set).addr, addr("10.0.0.1", 9090));
}

#[test]
fn unnamed_service_port_matches_unnamed_slice_port() {
    let svc: Service = from_json(json!({
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}]},
    }));
    assert_eq!(target_port(Some(&svc), 80), TargetPort::Name(String::new()));
    let cache = Cache::new([meshed_pod("p1", "n1")]);
    let set = cache.translate(
        Some(&svc),
        80,
        &[slice(
            "IPv4",
            json!([{"port": 8080}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        )],
    );
    assert_eq!(only(&set).addr, addr("10.0.0.1", 8080));
}

#[test]
fn undeclared_port_or_missing_service_uses_requested_number() {
    let svc = service(&[(80, "http", json!(8080))]);
    assert_eq!(target_port(Some(&svc), 5555), TargetPort::Number(5555));
    assert_eq!(target_port(None, 80), TargetPort::Number(80));
    let cache = Cache::new([meshed_pod("p1", "n1")]);
    let eps = json!([pod_ep("10.0.0.1", "p1", "z1")]);
    let set = cache.translate(
        Some(&svc),
        5555,
        &[slice(
            "IPv4",
            json!([{"name": "http", "port": 8080}]),
            eps.clone(),
        )],
    );
    assert_eq!(only(&set).addr, addr("10.0.0.1", 5555));
    let set = cache.translate(None, 80, &[slice("IPv4", json!([]), eps.clone())]);
    assert_eq!(only(&set).addr, addr("10.0.0.1", 80));
    // A slice without a ports list contributes nothing.
    let set = cache.translate(None, 80, &[slice("IPv4", json!(null), eps)]);
    assert!(set.is_empty());
}

#[test]
fn readiness_and_missing_pods() {
    let cache = Cache::new([
        meshed_pod("p1", "n1"),
        meshed_pod("p2", "n1"),
        meshed_pod("p3", "n1"),
    ]);
    let eps = json!([
        {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "p1", "namespace": "ns"}},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": false, "serving": true},
         "targetRef": {"kind": "Pod", "name": "p2", "namespace": "ns"}},
        {"addresses": ["10.0.0.3"], "conditions": {"ready": true, "terminating": true},
         "targetRef": {"kind": "Pod", "name": "p3", "namespace": "ns"}},
        {"addresses": ["10.0.0.4"], "targetRef": {"kind": "Pod", "name": "gone", "namespace": "ns"}},
        {"addresses": ["10.0.0.5"], "targetRef": {"kind": "ExternalWorkload", "name": "ew", "namespace": "ns"}},
    ]);
    let set = cache.translate(None, 80, &[slice("IPv4", json!([{"port": 80}]), eps)]);
    let names: Vec<_> = set
        .values()
        .filter_map(|e| e.pod())
        .map(|p| &*p.name)
        .collect();
    assert_eq!(names, ["p1", "p3"]);
    assert!(set.contains_key(&AddressId::Pod {
        namespace: "ns".into(),
        name: "p1".into(),
        family: AddressFamily::V4
    }));
}

#[test]
fn headless_hostnames_and_targetless_ids() {
    let cache = Cache::new([meshed_pod("db-0", "n1")]);
    let eps = json!([
        {"addresses": ["10.0.0.1"], "hostname": "db-0", "targetRef": {"kind": "Pod", "name": "db-0", "namespace": "ns"}},
        {"addresses": ["10.0.0.9"], "hostname": "gw"},
        {"addresses": ["10.0.0.8"]},
    ]);
    let set = cache.translate(None, 5432, &[slice("IPv4", json!([{"port": 5432}]), eps)]);
    assert_eq!(set.len(), 3);
    let pod = set
        .get(&AddressId::Pod {
            namespace: "ns".into(),
            name: "db-0".into(),
            family: AddressFamily::V4,
        })
        .expect("pod endpoint");
    assert_eq!(pod.hostname.as_deref(), Some("db-0"));
    for (name, host) in [
        ("web-10.0.0.9-5432-gw", Some("gw")),
        ("web-10.0.0.8-5432", None),
    ] {
        let ep = set
            .get(&AddressId::Service {
                namespace: "ns".into(),
                name: name.into(),
            })
            .expect(name);
        assert_eq!(ep.hostname.as_deref(), host);
        assert!(matches!(ep.workload, Workload::Gateway(_)));
    }
}

#[test]
fn owner_label_rules() {
    let with_owners = |owners: serde_json::Value| -> Pod {
        from_json(json!({"metadata": {"name": "p", "namespace": "ns", "ownerReferences": owners}}))
    };
    let rf = |kind: &str, name: &str| json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": "u"});
    let label = |pod: &Pod| {
        let l = owner_label(&facts(pod), &Cache::new([]));
        (l.key, l.name)
    };
    let pair = |k: &str, n: &str| (k.to_string(), n.to_string());
    assert_eq!(label(&plain_pod("p", "n")), pair("pod", "p"));
    assert_eq!(
        label(&with_owners(json!([
            rf("ReplicaSet", "a"),
            rf("ReplicaSet", "b")
        ]))),
        pair("pod", "p")
    );
    assert_eq!(
        label(&with_owners(json!([rf("ReplicaSet", "web-abc")]))),
        pair("deployment", "web")
    );
    assert_eq!(
        label(&with_owners(json!([rf("ReplicaSet", "odd-rs")]))),
        pair("replicaset", "odd-rs")
    );
    assert_eq!(
        label(&with_owners(json!([rf("ReplicaSet", "unknown")]))),
        pair("replicaset", "unknown")
    );
    assert_eq!(
        label(&with_owners(json!([rf("ReplicaSet", "job-rs")]))),
        pair("k8s_job", "j")
    );
    assert_eq!(
        label(&with_owners(json!([rf("Job", "batch-1")]))),
        pair("cronjob", "batch")
    );
    assert_eq!(
        label(&with_owners(json!([rf("Job", "lonely")]))),
        pair("k8s_job", "lonely")
    );
    assert_eq!(
        label(&with_owners(json!([rf("StatefulSet", "db")]))),
        pair("statefulset", "db")
    );
    assert_eq!(
        label(&with_owners(json!([rf("DaemonSet", "ds")]))),
        pair("daemonset", "ds")
    );
    assert_eq!(
        label(&with_owners(json!([rf("ReplicationController", "rc")]))),
        pair("replicationcontroller", "rc")
    );

    let rs: Pod = from_json(json!({"metadata": {"ownerReferences": [rf("Deployment", "web")]}}));
    assert_eq!(
        sole_owner(&rs),
        Some(OwnerRef {
            kind: "Deployment".into(),
            name: "web".into()
        })
    );
    assert_eq!(sole_owner(&Pod::default()), None);
}

#[test]
fn meshed_pod_weighted_addr() {
    let ep = translate_one(meshed_pod("p1", "n1"), 8080);
    let mut cfg = cfg();
    cfg.meshed_http2_client_params = crate::config::parse_http2_client_params(
        r#"{"keep_alive":{"interval":{"seconds":10},"timeout":{"seconds":3},"while_idle":true}}"#,
    )
    .expect("params");
    let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("translated");
    assert_eq!(wa.addr, Some(TcpAddress::from(addr("10.0.0.1", 8080))));
    assert_eq!(wa.weight, 10_000);
    assert_eq!(
        labels(&wa),
        BTreeMap::from([
            ("pod", "p1"),
            ("deployment", "web"),
            ("serviceaccount", "web-sa"),
            ("control_plane_ns", "linkerd"),
            ("pod_template_hash", "abc"),
            ("zone", "z1"),
            ("zone_locality", "local"),
        ])
    );
    assert_eq!(hint(&wa), h2_hint());
    let id = tls_identity::DnsLikeIdentity {
        name: "web-sa.ns.serviceaccount.identity.linkerd.cluster.local".into(),
    };
    assert_eq!(
        wa.tls_identity,
        Some(TlsIdentity {
            strategy: Some(tls_identity::Strategy::DnsLikeIdentity(id.clone())),
            server_name: Some(id)
        })
    );
    let seconds = |seconds| Some(prost_types::Duration { seconds, nanos: 0 });
    assert_eq!(
        wa.http2,
        Some(linkerd2_proxy_api::destination::Http2ClientParams {
            keep_alive: Some(
                linkerd2_proxy_api::destination::http2_client_params::KeepAlive {
                    interval: seconds(10),
                    timeout: seconds(3),
                    while_idle: true,
                }
            ),
            ..Default::default()
        })
    );
    assert_eq!(wa.authority_override, None);
    assert_eq!(wa.resource_ref, None);

    // Without H2 upgrade the hint is still present, but empty.
    cfg.enable_h2_upgrade = false;
    let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("translated");
    assert_eq!(hint(&wa), ProtocolHint::default());
}

#[test]
fn unmeshed_pod_gets_only_addr_weight_labels() {
    let ep = translate_one(plain_pod("p1", "n1"), 80);
    let wa = weighted_addr(&ep, &cfg(), None).expect("translated");
    assert_eq!(wa.protocol_hint, None);
    assert_eq!(wa.tls_identity, None);
    assert_eq!(wa.http2, None);
    assert_eq!(
        wa.metric_labels.get("serviceaccount").map(String::as_str),
        Some("default")
    );
    assert_eq!(wa.metric_labels.get("pod").map(String::as_str), Some("p1"));
    assert_eq!(
        wa.metric_labels.get("zone_locality").map(String::as_str),
        Some("unknown")
    );
    assert!(!wa.metric_labels.contains_key("control_plane_ns"));
}

#[test]
fn opaque_ports_from_annotation_default_and_server() {
    let opaque_hint = ProtocolHint {
        protocol: Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {})),
        opaque_transport: Some(protocol_hint::OpaqueTransport { inbound_port: 4143 }),
    };
    let mut cfg = cfg();
    cfg.default_opaque_ports = k8s_api::ports::PortRanges::parse("3306");

    // Default set applies without annotation.
    let ep = translate_one(meshed_pod("p1", "n1"), 3306);
    assert_eq!(
        hint(&weighted_addr(&ep, &cfg, None).expect("ok")),
        opaque_hint
    );

    // The annotation replaces the default, named ports resolve.
    let mut pod = meshed_pod("p1", "n1");
    set_annotation(&mut pod, labels::OPAQUE_PORTS, "http, 9000-9001");
    for (port, opaque) in [(8080, true), (9001, true), (3306, false)] {
        let ep = translate_one(pod.clone(), port);
        let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
        assert_eq!(h == opaque_hint, opaque, "port {port}: {h:?}");
    }

    // An empty annotation means no opaque ports at all.
    let mut pod = meshed_pod("p1", "n1");
    set_annotation(&mut pod, labels::OPAQUE_PORTS, "");
    let ep = translate_one(pod, 3306);
    assert_ne!(
        hint(&weighted_addr(&ep, &cfg, None).expect("ok")),
        opaque_hint
    );

    // A Server can make the port opaque.
    let mut cache = Cache::new([meshed_pod("p1", "n1")]);
    cache.opaque_by_server = Some(7000);
    let set = cache.translate(
        None,
        7000,
        &[slice(
            "IPv4",
            json!([{"port": 7000}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        )],
    );
    let ep = only(&set);
    assert!(ep.opaque_by_server);
    assert_eq!(
        hint(&weighted_addr(ep, &cfg, None).expect("ok")),
        opaque_hint
    );
}

#[test]
fn transport_header_mode_and_meta_ports() {
    let mut cfg = cfg();
    cfg.outbound_transport_mode = crate::config::OutboundTransportMode::TransportHeader;
    let ep = translate_one(meshed_pod("p1", "n1"), 8080);
    let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
    assert_eq!(
        h.opaque_transport,
        Some(protocol_hint::OpaqueTransport { inbound_port: 4143 })
    );
    assert_eq!(
        h.protocol,
        Some(protocol_hint::Protocol::H2(protocol_hint::H2 {}))
    );

    // The admin and control ports never get opaque transport.
    for port in [4191, 4190] {
        let ep = translate_one(meshed_pod("p1", "n1"), port);
        let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
        assert_eq!(h.opaque_transport, None, "port {port}");
    }
}

#[test]
fn skip_inbound_ports_disable_mesh_features() {
    let mut pod = meshed_pod("p1", "n1");
    set_annotation(&mut pod, labels::SKIP_INBOUND_PORTS, "8080,9000-9100");
    let ep = translate_one(pod.clone(), 8080);
    let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
    assert_eq!(wa.protocol_hint, None);
    assert_eq!(wa.tls_identity, None);
    assert_eq!(wa.http2, None);
    assert_eq!(
        wa.metric_labels.get("control_plane_ns").map(String::as_str),
        Some("linkerd")
    );
    let ep = translate_one(pod, 8081);
    let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
    assert!(wa.protocol_hint.is_some() && wa.tls_identity.is_some());
}

#[test]
fn identity_needs_same_control_plane_and_trust_domain() {
    let mut pod = meshed_pod("p1", "n1");
    set_label(&mut pod, labels::CONTROL_PLANE_NS, "other-linkerd");
    let ep = translate_one(pod, 8080);
    let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
    assert!(
        wa.protocol_hint.is_some(),
        "meshed by another control plane"
    );
    assert_eq!(wa.tls_identity, None);

    let ep = translate_one(meshed_pod("p1", "n1"), 8080);
    let mut cfg = cfg();
    cfg.identity_trust_domain.clear();
    assert_eq!(
        weighted_addr(&ep, &cfg, None).expect("ok").tls_identity,
        None
    );
    cfg.identity_trust_domain = "example.org".into();
    let wa = weighted_addr(&ep, &cfg, None).expect("ok");
    let name = wa
        .tls_identity
        .and_then(|t| t.server_name)
        .map(|s| s.name)
        .expect("server name");
    assert_eq!(
        name,
        "web-sa.ns.serviceaccount.identity.linkerd.example.org"
    );
}

#[test]
fn proxy_env_problems_drop_meshed_addresses() {
    let strip_env = |name: &str| {
        let mut pod = meshed_pod("p1", "n1");
        let spec = pod.spec.as_mut().expect("spec");
        for c in &mut spec.containers {
            if let Some(env) = c.env.as_mut() {
                env.retain(|e| e.name != name);
            }
        }
        pod
    };
    let mut cfg = cfg();
    cfg.default_opaque_ports = k8s_api::ports::PortRanges::parse("3306");

    // Admin port missing → dropped even for a non-opaque port.
    let ep = translate_one(strip_env(labels::ENV_PROXY_ADMIN_LISTEN_ADDR), 8080);
    let err = weighted_addr(&ep, &cfg, None).expect_err("dropped");
    assert!(
        err.to_string()
            .contains(labels::ENV_PROXY_ADMIN_LISTEN_ADDR),
        "{err}"
    );

    // Inbound port is only needed for opaque transport.
    let ep = translate_one(strip_env(labels::ENV_PROXY_INBOUND_LISTEN_ADDR), 8080);
    assert!(weighted_addr(&ep, &cfg, None).is_ok());
    let ep = translate_one(strip_env(labels::ENV_PROXY_INBOUND_LISTEN_ADDR), 3306);
    assert!(weighted_addr(&ep, &cfg, None).is_err());

    // Unparsable value.
    let mut pod = meshed_pod("p1", "n1");
    let spec = pod.spec.as_mut().expect("spec");
    for c in &mut spec.containers {
        for e in c.env.iter_mut().flatten() {
            if e.name == labels::ENV_PROXY_CONTROL_LISTEN_ADDR {
                e.value = Some("localhost:4190".into());
            }
        }
    }
    let ep = translate_one(pod, 8080);
    assert!(matches!(
        weighted_addr(&ep, &cfg, None),
        Err(TranslateError::ProxyPort {
            source: ProxyPortError::Unparsable { .. },
            ..
        })
    ));

    // Unmeshed pods never need proxy ports.
    let ep = translate_one(plain_pod("p1", "n1"), 3306);
    assert!(weighted_addr(&ep, &cfg, None).is_ok());
}

#[test]
fn native_sidecar_proxy_in_init_containers() {
    let mut pod = meshed_pod("p1", "n1");
    let spec = pod.spec.as_mut().expect("spec");
    let proxy_idx = spec
        .containers
        .iter()
        .position(|c| c.name == labels::PROXY_CONTAINER)
        .expect("proxy");
    let mut proxy = spec.containers.remove(proxy_idx);
    for e in proxy.env.iter_mut().flatten() {
        if e.name == labels::ENV_PROXY_INBOUND_LISTEN_ADDR {
            e.value = Some("[::]:5143".into());
        }
    }
    spec.init_containers = Some(vec![proxy]);
    let ports = facts(&pod).spec.proxy_ports.clone();
    assert_eq!(ports.inbound, Ok(5143));
    assert_eq!(ports.admin, Ok(4191));
    assert_eq!(
        facts(&plain_pod("p", "n")).spec.proxy_ports.admin,
        Err(ProxyPortError::NoProxyContainer)
    );
}

#[test]
fn zone_locality_and_zone_weights() {
    let ep = translate_one(meshed_pod("p1", "n1"), 8080);
    let mut cfg = cfg();
    let loc = |wa: &WeightedAddr| {
        wa.metric_labels
            .get("zone_locality")
            .cloned()
            .unwrap_or_default()
    };
    let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("ok");
    assert_eq!((loc(&wa).as_str(), wa.weight), ("local", 10_000));
    let wa = weighted_addr(&ep, &cfg, Some("z2")).expect("ok");
    assert_eq!((loc(&wa).as_str(), wa.weight), ("remote", 10_000));
    for zone in [None, Some("")] {
        let wa = weighted_addr(&ep, &cfg, zone).expect("ok");
        assert_eq!(loc(&wa), "unknown");
    }
    cfg.ext_endpoint_zone_weights = true;
    assert_eq!(
        weighted_addr(&ep, &cfg, Some("z1")).expect("ok").weight,
        100_000
    );
    assert_eq!(
        weighted_addr(&ep, &cfg, Some("z2")).expect("ok").weight,
        10_000
    );

    // An endpoint without a zone is "unknown" with an empty zone label.
    let cache = Cache::new([meshed_pod("p1", "n1")]);
    let set = cache.translate(
        None,
        80,
        &[slice(
            "IPv4",
            json!([{"port": 80}]),
            json!([{"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "p1", "namespace": "ns"}}]),
        )],
    );
    let wa = weighted_addr(only(&set), &cfg, Some("z1")).expect("ok");
    assert_eq!(loc(&wa), "unknown");
    assert_eq!(wa.metric_labels.get("zone").map(String::as_str), Some(""));
}

#[test]
fn gateway_endpoints() {
    let mut s = slice(
        "IPv4",
        json!([{"port": 4143}]),
        json!([{"addresses": ["172.16.0.1"], "zone": "z1"}]),
    );
    let labels = s.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(labels::REMOTE_CLUSTER_NAME.into(), "east".into());
    s.metadata.annotations = Some(BTreeMap::from([
        (
            labels::REMOTE_SVC_FQ_NAME.to_string(),
            "web.prod.svc.cluster.local".to_string(),
        ),
        (
            labels::REMOTE_GATEWAY_IDENTITY.to_string(),
            "gw.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local".to_string(),
        ),
    ]));
    let cache = Cache::new([]);
    let set = cache.translate(None, 80, std::slice::from_ref(&s));
    let wa = weighted_addr(only(&set), &cfg(), Some("z1")).expect("ok");
    // No Service: the requested port is the target port.
    assert_eq!(wa.addr, Some(TcpAddress::from(addr("172.16.0.1", 80))));
    assert_eq!(
        wa.authority_override,
        Some(AuthorityOverride {
            authority_override: "web.prod.svc.cluster.local:80".into()
        })
    );
    let tls = wa.tls_identity.clone().expect("identity");
    assert!(tls.server_name.is_none());
    assert!(matches!(
        tls.strategy,
        Some(tls_identity::Strategy::DnsLikeIdentity(_))
    ));
    assert_eq!(hint(&wa), h2_hint());
    // Only zone_locality, and "unknown" because targetless endpoints carry no zone.
    assert_eq!(
        wa.metric_labels,
        HashMap::from([("zone_locality".to_string(), "unknown".to_string())])
    );

    let set_labels = set_labels(&svc_id(), [&super::slices::slice_facts(&s)]);
    assert_eq!(set_labels.get("service").map(String::as_str), Some("web"));
    assert_eq!(set_labels.get("namespace").map(String::as_str), Some("ns"));
    assert_eq!(
        set_labels.get("target_cluster").map(String::as_str),
        Some("east")
    );
    assert_eq!(
        set_labels.get("target_service").map(String::as_str),
        Some("web")
    );
    assert_eq!(
        set_labels
            .get("target_service_namespace")
            .map(String::as_str),
        Some("prod")
    );

    // Without an identity: plain address.
    s.metadata.annotations = None;
    let set = cache.translate(None, 80, &[s]);
    let wa = weighted_addr(only(&set), &cfg(), None).expect("ok");
    assert_eq!(
        (
            wa.tls_identity,
            wa.protocol_hint,
            wa.authority_override,
            wa.http2
        ),
        (None, None, None, None)
    );
}

#[test]
fn plain_set_labels() {
    let s = slice("IPv4", json!([]), json!([]));
    assert_eq!(
        set_labels(&svc_id(), [&super::slices::slice_facts(&s)]),
        HashMap::from([
            ("service".to_string(), "web".to_string()),
            ("namespace".to_string(), "ns".to_string())
        ])
    );
}

#[test]
fn dual_stack_ids_and_hints() {
    let cache = Cache::new([meshed_pod("p1", "n1")]);
    let v4 = slice(
        "IPv4",
        json!([{"port": 80}]),
        json!([pod_ep("10.0.0.1", "p1", "z1")]),
    );
    let mut v6 = slice(
        "IPv6",
        json!([{"port": 80}]),
        json!([pod_ep("fd00::1", "p1", "z1")]),
    );
    v6.metadata.name = Some("web-v6".into());
    if let Some(ep) = v6.endpoints.iter_mut().flatten().next() {
        ep.hints = Some(from_json(
            json!({"forZones": [{"name": "z2"}, {"name": "z1"}, {"name": "z1"}]}),
        ));
    }
    let set = cache.translate(None, 80, &[v4, v6]);
    let families: Vec<_> = set.values().map(|e| e.family()).collect();
    assert_eq!(families, [AddressFamily::V4, AddressFamily::V6]);
    let v6 = set.values().nth(1).expect("v6");
    assert_eq!(v6.for_zones, Some(vec!["z1".to_string(), "z2".to_string()]));
    assert_eq!(v6.addr, addr("fd00::1", 80));
    // Both entries share the pod facts.
    match (&set.values().next().expect("v4").workload, &v6.workload) {
        (Workload::Pod(a), Workload::Pod(b)) => assert!(Arc::ptr_eq(a, b)),
        other => panic!("unexpected workloads {other:?}"),
    }
}

#[test]
fn pod_edits_change_the_endpoint() {
    let base = translate_one(meshed_pod("p1", "n1"), 8080);
    assert_eq!(base, translate_one(meshed_pod("p1", "n1"), 8080));
    let mut pod = meshed_pod("p1", "n1");
    set_label(&mut pod, "pod-template-hash", "def");
    assert_ne!(base, translate_one(pod, 8080));
    let mut pod = meshed_pod("p1", "n1");
    set_annotation(&mut pod, labels::OPAQUE_PORTS, "8080");
    assert_ne!(base, translate_one(pod, 8080));
}

#[test]
fn helpers() {
    let node: ObjectMeta = from_json(json!({"labels": {"topology.kubernetes.io/zone": "z9"}}));
    assert_eq!(node_topology_zone(&node), Some("z9"));
    assert_eq!(node_topology_zone(&ObjectMeta::default()), None);
    let mut svc = service(&[]);
    assert!(!internal_traffic_policy_local(&svc));
    if let Some(spec) = svc.spec.as_mut() {
        spec.internal_traffic_policy = Some("Local".into());
    }
    assert!(internal_traffic_policy_local(&svc));
    // Named ports of the opaque-ports annotation resolve against the
    // pod's container ports; an unknown name resolves to nothing.
    let mut pod = meshed_pod("p", "n");
    set_annotation(&mut pod, labels::OPAQUE_PORTS, "http,nope");
    let opaque = facts(&pod).spec.opaque_ports.clone().expect("annotated");
    assert!(opaque.contains(8080));
    assert!(!opaque.contains(80));
}

/// A pod is decoded straight from JSON into the facts the index keeps: the
/// fields read, and nothing else (managed fields, other labels, annotations
/// and containers' env are skipped).
#[test]
fn pods_decode_into_their_facts() {
    let pod: super::pods::PodObject = from_json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-0", "namespace": "ns", "resourceVersion": "42",
            "labels": {"app": "web", "linkerd.io/control-plane-ns": "linkerd", "pod-template-hash": "abc"},
            "annotations": {
                "config.linkerd.io/opaque-ports": "db,9000-9001",
                "config.linkerd.io/skip-inbound-ports": "4190",
                "linkerd.io/proxy-version": "stable"
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u"}],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
        },
        "spec": {
            "serviceAccountName": "web-sa", "nodeName": "node-1",
            "initContainers": [{"name": "linkerd-proxy", "env": [
                {"name": "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "value": "0.0.0.0:4143"},
                {"name": "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "value": "0.0.0.0:4191"},
                {"name": "LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "value": "0.0.0.0:4190"},
                {"name": "LINKERD2_PROXY_LOG", "value": "warn"}
            ]}],
            "containers": [{"name": "app", "image": "x", "ports": [
                {"name": "db", "containerPort": 5432},
                {"containerPort": 8080, "hostPort": 30080}
            ]}]
        },
        "status": {
            "phase": "Running", "podIP": "10.0.0.1",
            "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            "hostIP": "192.168.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }));
    assert_eq!(
        kube::Resource::meta(&pod).resource_version.as_deref(),
        Some("42")
    );
    let f = pod.facts;
    assert_eq!(
        (&*f.name, &*f.namespace, &*f.spec.service_account),
        ("web-0", "ns", "web-sa")
    );
    assert_eq!(f.node_name.as_deref(), Some("node-1"));
    assert_eq!(f.spec.control_plane_ns.as_deref(), Some("linkerd"));
    assert_eq!(f.spec.pod_template_hash.as_deref(), Some("abc"));
    assert_eq!(
        f.spec.owner,
        Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "web-abc".into()
        })
    );
    let opaque = f.spec.opaque_ports.as_ref().expect("annotated");
    assert!(opaque.contains(5432) && opaque.contains(9001) && !opaque.contains(8080));
    assert!(f.spec.skip_inbound_ports.contains(4190));
    assert_eq!(
        (
            f.spec.proxy_ports.inbound.clone(),
            f.spec.proxy_ports.admin.clone()
        ),
        (Ok(4143), Ok(4191))
    );
    assert!(f.is_running() && f.terminating && !f.serves_pod_ip());
    assert_eq!(f.pod_ip(), Some("10.0.0.1".parse().expect("ip")));
    assert_eq!(f.ips().count(), 3, "two pod IPs and the host IP");
    assert!(f.exposes_host_port("192.168.0.1:30080".parse().expect("addr")));
    assert!(!f.exposes_host_port("192.168.0.1:8080".parse().expect("addr")));
}

/// A slice is decoded straight from JSON into the facts translation reads.
#[test]
fn slices_decode_into_their_facts() {
    use crate::core::slice::SliceTarget;
    let slice: super::slices::SliceObject = from_json(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "addressType": "IPv4",
        "metadata": {
            "name": "web-abc", "namespace": "ns", "resourceVersion": "7",
            "labels": {"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "x"},
            "managedFields": [{"manager": "kcm"}]
        },
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"port": 70000}],
        "endpoints": [
            {"addresses": ["10.0.0.1", "not-an-ip"], "conditions": {"ready": false, "serving": true},
             "hostname": "web-0", "zone": "z1", "nodeName": "node-1",
             "hints": {"forZones": [{"name": "z2"}, {"name": "z1"}, {"name": "z2"}]},
             "targetRef": {"kind": "Pod", "name": "web-0", "uid": "u"}},
            {"addresses": ["10.0.0.2"], "targetRef": {"kind": "ExternalWorkload", "name": "vm"}},
            {"addresses": ["10.0.0.3"], "targetRef": {"kind": "Node", "name": "n"}},
            {"addresses": ["10.0.0.4"], "hostname": ""}
        ]
    }));
    assert_eq!(
        kube::Resource::meta(&slice).name.as_deref(),
        Some("web-abc")
    );
    let f = slice.facts;
    assert_eq!((&*f.namespace, f.service.as_deref()), ("ns", Some("web")));
    assert!(f.mirror.is_none());
    let ports = f.ports.as_deref().expect("ports");
    assert_eq!(
        ports.iter().map(|p| (&*p.name, p.port)).collect::<Vec<_>>(),
        [("http", Some(8080)), ("", None)]
    );
    let [pod, ew, node, bare] = &f.endpoints[..] else {
        panic!("four endpoints: {:?}", f.endpoints);
    };
    assert_eq!(
        pod.addresses.len(),
        1,
        "the address that is not an IP is skipped"
    );
    assert_eq!(pod.ready, Some(false));
    assert_eq!(pod.hostname.as_deref(), Some("web-0"));
    assert_eq!(pod.zone.as_deref(), Some("z1"));
    assert_eq!(
        pod.for_zones
            .as_deref()
            .map(|z| z.iter().map(|z| &**z).collect::<Vec<_>>()),
        Some(vec!["z1", "z2"])
    );
    assert_eq!(
        pod.target.as_ref().and_then(|t| t.pod("ns")),
        Some(("ns", "web-0"))
    );
    assert!(matches!(&ew.target, Some(SliceTarget::ExternalWorkload { name }) if &**name == "vm"));
    assert!(matches!(&node.target, Some(SliceTarget::Other { kind, .. }) if &**kind == "Node"));
    assert_eq!((bare.hostname.as_deref(), bare.ready), (None, None));
}

mod external_workloads;
