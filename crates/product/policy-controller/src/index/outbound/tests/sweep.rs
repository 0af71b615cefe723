//! The sweep of unheld outbound watches: made-up names, ports and client
//! namespaces keep nothing once their receivers are gone, held watches
//! keep being updated, and a later watch follows its Service into
//! existence.

use k8s_index::Index as _;
use serde_json::json;

use super::*;
use crate::index::outbound::{OutboundCluster, ServiceTarget, sweep::sweep_shared};

const NS: &str = "ns";

fn port(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).expect("nonzero")
}

fn shared() -> k8s_index::SharedIndex<OutboundIndex> {
    OutboundIndex::shared(OutboundCluster {
        networks: vec!["10.0.0.0/8".parse().expect("net")],
        cluster_domain: "cluster.local".into(),
        default_opaque_ports: Default::default(),
        global_egress_network_namespace: "linkerd-egress".into(),
    })
}

fn service(
    name: &str,
    ip: &str,
    annotations: serde_json::Value,
) -> k8s_openapi::api::core::v1::Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": name, "annotations": annotations},
        "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 80}]}
    }))
    .expect("service")
}

fn target(name: &str, p: u16, source_ns: &str) -> ServiceTarget {
    ServiceTarget {
        namespace: NS.into(),
        name: name.into(),
        port: port(p),
        source_namespace: source_ns.into(),
    }
}

#[test]
fn watches_of_absent_services_go_once_unheld() {
    let index = shared();
    index.write().apply(service("web", "10.1.0.1", json!({})));
    let held = index.write().policy_rx(&target("web", 80, NS));
    let baseline = index.read().stats().watches;
    let rxs: Vec<_> = (0..5_000)
        .map(|i| {
            index
                .write()
                .policy_rx(&target(&format!("absent-{i}"), 80, NS))
        })
        .collect();
    assert_eq!(
        index.read().stats().watches,
        baseline + 5_000,
        "held watches stay"
    );
    assert_eq!(sweep_shared(&index), 0, "nothing to sweep while held");
    drop(rxs);
    assert!(index.read().has_unwatched());
    assert_eq!(sweep_shared(&index), 5_000);
    assert_eq!(index.read().stats().watches, baseline);
    assert!(!index.read().has_unwatched());
    assert!(held.has_changed().is_ok(), "the held watch is kept");
}

#[test]
fn odd_ports_and_client_namespaces_of_a_service_go_once_unheld() {
    let index = shared();
    index.write().apply(service("web", "10.1.0.1", json!({})));
    let mut held = index.write().policy_rx(&target("web", 80, NS));
    let baseline = index.read().stats().watches;
    let rxs: Vec<_> = (1..=1_000)
        .flat_map(|i| {
            let by_port = index.write().policy_rx(&target("web", 10_000 + i, NS));
            let by_ns = index
                .write()
                .policy_rx(&target("web", 80, &format!("client-{i}")));
            [by_port, by_ns]
        })
        .collect();
    assert_eq!(index.read().stats().watches, baseline + 2_000);
    drop(rxs);
    assert_eq!(sweep_shared(&index), 2_000);
    assert_eq!(index.read().stats().watches, baseline);
    // The held watch still follows its Service.
    held.mark_unchanged();
    let timeout = "timeout.linkerd.io/response";
    index
        .write()
        .apply(service("web", "10.1.0.1", json!({ timeout: "5s" })));
    assert!(held.has_changed().expect("open"), "a held watch is updated");
}

#[test]
fn a_watch_after_a_sweep_follows_its_service_into_existence() {
    let index = shared();
    drop(index.write().policy_rx(&target("late", 80, NS)));
    assert_eq!(sweep_shared(&index), 1);
    let mut rx = index.write().policy_rx(&target("late", 80, NS));
    assert_eq!(rx.borrow_and_update().app_protocol, None);
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": "late"},
        "spec": {"clusterIP": "10.1.0.9", "ports": [{"port": 80, "appProtocol": "kubernetes.io/h2c"}]}
    }))
    .expect("service");
    index.write().apply(svc);
    assert!(rx.has_changed().expect("open"), "the new Service is sent");
    assert!(rx.borrow().app_protocol.is_some());
}

#[test]
fn creating_watches_sweeps_when_their_count_doubles() {
    let index = shared();
    let mut most = 0;
    for i in 0..10_000 {
        drop(
            index
                .write()
                .policy_rx(&target(&format!("absent-{i}"), 80, NS)),
        );
        most = most.max(index.read().stats().watches);
    }
    assert!(
        most <= 2,
        "unheld watches pile up to {most} without a periodic sweep"
    );
}
