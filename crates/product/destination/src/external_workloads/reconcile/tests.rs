//! Unit tests of [`reconcile`](super::reconcile) on plain
//! objects: what slices a Service and its workloads call for, and that a
//! second pass over what the first wrote writes nothing.

use std::collections::BTreeMap;

use k8s_api::{
    labels::{ENDPOINT_SLICE_MANAGED_BY, SERVICE_NAME},
    workload::ExternalWorkload,
};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use serde_json::{Value, json};

use super::{Actions, reconcile};
use crate::external_workloads::MANAGED_BY;

fn svc(name: &str, selector: Value, ports: Value, families: &[&str]) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "labels": {"team": "a"}},
        "spec": {"selector": selector, "ports": ports, "ipFamilies": families}
    }))
    .expect("service")
}

/// `web` selecting `app: web`, port 80 → the workloads' `http` port.
fn web() -> Service {
    svc(
        "web",
        json!({"app": "web"}),
        json!([{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]),
        &["IPv4"],
    )
}

fn ew(name: &str, labels: Value, ips: &[&str], ready: Option<bool>) -> ExternalWorkload {
    let status = match ready {
        Some(r) => {
            json!({"conditions": [{"type": "Ready", "status": if r {"True"} else {"False"}}]})
        }
        None => json!({}),
    };
    serde_json::from_value(json!({
        "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": labels},
        "spec": {
            "meshTLS": {"identity": "id", "serverName": "sn"},
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"port": 9000}],
            "workloadIPs": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>()
        },
        "status": status
    }))
    .expect("workload")
}

fn web_ew(name: &str, ip: &str) -> ExternalWorkload {
    ew(name, json!({"app": "web"}), &[ip], Some(true))
}

fn run(svc: &Service, ews: &[ExternalWorkload], slices: &[EndpointSlice], max: usize) -> Actions {
    let ews: Vec<&ExternalWorkload> = ews.iter().collect();
    let slices: Vec<&EndpointSlice> = slices.iter().collect();
    reconcile(svc, &ews, &slices, max)
}

/// The slices as the API would store them after `actions`, on top of `slices`.
fn store(slices: &[EndpointSlice], actions: &Actions) -> Vec<EndpointSlice> {
    let mut by_name: BTreeMap<String, EndpointSlice> = slices
        .iter()
        .map(|s| (s.metadata.name.clone().expect("name"), s.clone()))
        .collect();
    for name in &actions.delete {
        by_name.remove(name);
    }
    for s in &actions.update {
        by_name.insert(s.metadata.name.clone().expect("name"), s.clone());
    }
    for (i, s) in actions.create.iter().enumerate() {
        let mut s = s.clone();
        let name = format!(
            "{}{i}x{}",
            s.metadata.generate_name.clone().expect("generateName"),
            by_name.len()
        );
        s.metadata.name = Some(name.clone());
        s.metadata.generate_name = None;
        by_name.insert(name, s);
    }
    by_name.into_values().collect()
}

fn addresses(slice: &EndpointSlice) -> Vec<String> {
    let mut a: Vec<String> = slice
        .endpoints
        .iter()
        .flatten()
        .flat_map(|e| e.addresses.clone())
        .collect();
    a.sort();
    a
}

#[test]
fn a_selected_workload_gets_one_slice_with_the_original_shape() {
    let service = web();
    let actions = run(&service, &[web_ew("vm", "192.0.2.1")], &[], 100);
    assert!(actions.update.is_empty() && actions.delete.is_empty());
    let [slice] = actions.create.as_slice() else {
        panic!("one slice: {actions:?}");
    };
    assert_eq!(
        slice.metadata.generate_name.as_deref(),
        Some("linkerd-external-web-")
    );
    assert_eq!(slice.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().expect("labels");
    assert_eq!(labels[SERVICE_NAME], "web");
    assert_eq!(labels[ENDPOINT_SLICE_MANAGED_BY], MANAGED_BY);
    assert_eq!(labels["team"], "a", "the Service's labels are copied");
    let owner = &slice.metadata.owner_references.as_ref().expect("owners")[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("v1", "Service", "web", "uid-web")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    let ports = slice.ports.as_ref().expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name.as_deref(), Some("http"));
    assert_eq!(
        ports[0].port,
        Some(8080),
        "named targetPort resolved on the workload"
    );
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    let ep = &slice.endpoints.as_ref().expect("endpoints")[0];
    assert_eq!(ep.addresses, ["192.0.2.1"]);
    let conditions = ep.conditions.as_ref().expect("conditions");
    assert_eq!(conditions.ready, Some(true));
    assert_eq!(conditions.serving, Some(true));
    assert_eq!(conditions.terminating, Some(false));
    let target = ep.target_ref.as_ref().expect("targetRef");
    assert_eq!(target.kind.as_deref(), Some("ExternalWorkload"));
    assert_eq!(target.name.as_deref(), Some("vm"));
    assert_eq!(target.namespace.as_deref(), Some("ns"));
    assert_eq!(target.uid.as_deref(), Some("uid-vm"));
    assert_eq!(ep.hostname, None, "hostnames only for headless Services");
}

#[test]
fn only_matching_live_workloads_are_selected() {
    let mut deleting = web_ew("going", "192.0.2.3");
    deleting.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).expect("time"));
    let mut elsewhere = web_ew("elsewhere", "192.0.2.4");
    elsewhere.metadata.namespace = Some("other".into());
    let ews = [
        web_ew("vm", "192.0.2.1"),
        ew("db", json!({"app": "db"}), &["192.0.2.2"], Some(true)),
        ew("partial", json!({"tier": "x"}), &["192.0.2.5"], Some(true)),
        deleting,
        elsewhere,
        ew("no-ips", json!({"app": "web"}), &[], Some(true)),
    ];
    let actions = run(&web(), &ews, &[], 100);
    assert_eq!(actions.create.len(), 1);
    assert_eq!(addresses(&actions.create[0]), ["192.0.2.1"]);

    // A Service with several selector labels needs them all.
    let strict = svc(
        "web",
        json!({"app": "web", "tier": "x"}),
        json!([{"port": 80, "targetPort": 8080}]),
        &["IPv4"],
    );
    let both = ew(
        "both",
        json!({"app": "web", "tier": "x"}),
        &["192.0.2.6"],
        Some(true),
    );
    let actions = run(&strict, &[web_ew("vm", "192.0.2.1"), both], &[], 100);
    assert_eq!(addresses(&actions.create[0]), ["192.0.2.6"]);
}

#[test]
fn no_selector_no_slices() {
    let none = svc("web", Value::Null, json!([{"port": 80}]), &["IPv4"]);
    assert!(run(&none, &[web_ew("vm", "192.0.2.1")], &[], 100).is_empty());
    let empty = svc("web", json!({}), json!([{"port": 80}]), &["IPv4"]);
    assert!(run(&empty, &[web_ew("vm", "192.0.2.1")], &[], 100).is_empty());
}

#[test]
fn readiness_follows_the_ready_condition() {
    for (ready, want) in [(Some(true), true), (Some(false), false), (None, false)] {
        let w = ew("vm", json!({"app": "web"}), &["192.0.2.1"], ready);
        let actions = run(&web(), &[w], &[], 100);
        let ep = &actions.create[0].endpoints.as_ref().expect("endpoints")[0];
        let conditions = ep.conditions.as_ref().expect("conditions");
        assert_eq!(conditions.ready, Some(want), "{ready:?}");
        assert_eq!(conditions.serving, Some(want), "{ready:?}");
    }
    // Flipping readiness updates the slice in place.
    let first = run(&web(), &[web_ew("vm", "192.0.2.1")], &[], 100);
    let stored = store(&[], &first);
    let unready = ew("vm", json!({"app": "web"}), &["192.0.2.1"], Some(false));
    let actions = run(&web(), &[unready], &stored, 100);
    assert!(actions.create.is_empty() && actions.delete.is_empty());
    let [slice] = actions.update.as_slice() else {
        panic!("one update: {actions:?}");
    };
    assert_eq!(slice.metadata.name, stored[0].metadata.name);
    let ep = &slice.endpoints.as_ref().expect("endpoints")[0];
    assert_eq!(ep.conditions.as_ref().and_then(|c| c.ready), Some(false));
}

#[test]
fn target_ports_by_number_and_by_name() {
    let service = svc(
        "web",
        json!({"app": "web"}),
        json!([
            {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
            {"name": "metrics", "port": 9000, "targetPort": 9000, "protocol": "TCP"},
            {"name": "grpc", "port": 81, "targetPort": "grpc", "protocol": "TCP"},
            {"name": "udp", "port": 9001, "targetPort": 9000, "protocol": "UDP"}
        ]),
        &["IPv4"],
    );
    let actions = run(&service, &[web_ew("vm", "192.0.2.1")], &[], 100);
    let ports = actions.create[0].ports.clone().expect("ports");
    let got: Vec<(Option<&str>, Option<i32>)> =
        ports.iter().map(|p| (p.name.as_deref(), p.port)).collect();
    // `grpc` is not a port of the workload and 9000/UDP is not either:
    // both are left out of its endpoint's ports.
    assert_eq!(
        got,
        [(Some("http"), Some(8080)), (Some("metrics"), Some(9000))]
    );

    // Workloads resolving different ports land in different slices.
    let mut other = web_ew("vm2", "192.0.2.2");
    other.spec.ports = Some(vec![k8s_api::workload::PortSpec {
        name: Some("http".into()),
        port: 8081,
        protocol: None,
    }]);
    let actions = run(&web(), &[web_ew("vm", "192.0.2.1"), other], &[], 100);
    assert_eq!(actions.create.len(), 2);
    let mut by_port: Vec<(Option<i32>, Vec<String>)> = actions
        .create
        .iter()
        .map(|s| (s.ports.as_ref().expect("ports")[0].port, addresses(s)))
        .collect();
    by_port.sort();
    assert_eq!(
        by_port,
        [
            (Some(8080), vec!["192.0.2.1".to_string()]),
            (Some(8081), vec!["192.0.2.2".to_string()])
        ]
    );
}

#[test]
fn a_dual_stack_workload_gets_a_slice_per_family() {
    let dual = svc(
        "web",
        json!({"app": "web"}),
        json!([{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]),
        &["IPv4", "IPv6"],
    );
    let w = ew(
        "vm",
        json!({"app": "web"}),
        &["192.0.2.1", "2001:db8::1"],
        Some(true),
    );
    let actions = run(&dual, std::slice::from_ref(&w), &[], 100);
    let mut got: Vec<(String, Vec<String>)> = actions
        .create
        .iter()
        .map(|s| (s.address_type.clone(), addresses(s)))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("IPv4".to_string(), vec!["192.0.2.1".to_string()]),
            ("IPv6".to_string(), vec!["2001:db8::1".to_string()])
        ]
    );
    // An IPv4-only Service gets only the IPv4 slice.
    let actions = run(&web(), &[w], &[], 100);
    assert_eq!(actions.create.len(), 1);
    assert_eq!(actions.create[0].address_type, "IPv4");
}

#[test]
fn slices_split_at_the_maximum() {
    let ews: Vec<ExternalWorkload> = (0..7)
        .map(|i| web_ew(&format!("vm{i}"), &format!("192.0.2.{i}")))
        .collect();
    let actions = run(&web(), &ews, &[], 3);
    let mut sizes: Vec<usize> = actions
        .create
        .iter()
        .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
        .collect();
    sizes.sort();
    assert_eq!(sizes, [1, 3, 3]);
    // With the original's quota, 100 per slice.
    let many: Vec<ExternalWorkload> = (0..150)
        .map(|i| web_ew(&format!("vm{i}"), &format!("10.0.{}.{}", i / 200, i % 200)))
        .collect();
    let actions = run(&web(), &many, &[], crate::external_workloads::MAX_ENDPOINTS);
    let mut sizes: Vec<usize> = actions
        .create
        .iter()
        .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
        .collect();
    sizes.sort();
    assert_eq!(sizes, [50, 100]);
    // A new workload fills the slice with room rather than a new one.
    let stored = store(&[], &actions);
    let mut more = many.clone();
    more.push(web_ew("late", "10.1.0.1"));
    let next = run(
        &web(),
        &more,
        &stored,
        crate::external_workloads::MAX_ENDPOINTS,
    );
    assert!(next.create.is_empty() && next.delete.is_empty(), "{next:?}");
    assert_eq!(next.update.len(), 1);
    assert_eq!(next.update[0].endpoints.as_ref().map(Vec::len), Some(51));
}

#[test]
fn nothing_is_written_when_nothing_changed() {
    let ews: Vec<ExternalWorkload> = (0..5)
        .map(|i| web_ew(&format!("vm{i}"), &format!("192.0.2.{i}")))
        .collect();
    let first = run(&web(), &ews, &[], 2);
    let stored = store(&[], &first);
    assert_eq!(stored.len(), 3);
    assert!(run(&web(), &ews, &stored, 2).is_empty(), "no churn");
    // Workload order does not matter either.
    let reversed: Vec<ExternalWorkload> = ews.iter().rev().cloned().collect();
    assert!(run(&web(), &reversed, &stored, 2).is_empty());
    // A Service label change rewrites the labels only.
    let mut relabelled = web();
    relabelled
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("team".into(), "b".into());
    let actions = run(&relabelled, &ews, &stored, 2);
    assert_eq!(actions.update.len(), 3);
    assert!(actions.create.is_empty() && actions.delete.is_empty());
    assert!(
        actions
            .update
            .iter()
            .all(|s| s.metadata.labels.as_ref().expect("labels")["team"] == "b")
    );
}

#[test]
fn a_deleted_workload_leaves_its_slice() {
    let ews = [web_ew("vm0", "192.0.2.1"), web_ew("vm1", "192.0.2.2")];
    let stored = store(&[], &run(&web(), &ews, &[], 100));
    let actions = run(&web(), &ews[..1], &stored, 100);
    assert!(actions.create.is_empty() && actions.delete.is_empty());
    assert_eq!(addresses(&actions.update[0]), ["192.0.2.1"]);
    // The last one gone: the slice is deleted.
    let actions = run(&web(), &[], &stored, 100);
    assert_eq!(
        actions.delete,
        vec![stored[0].metadata.name.clone().expect("name")]
    );
    assert!(actions.create.is_empty() && actions.update.is_empty());
}

#[test]
fn slices_of_other_managers_are_never_touched() {
    let stored = store(&[], &run(&web(), &[web_ew("vm", "192.0.2.1")], &[], 100));
    let mut kube = stored[0].clone();
    kube.metadata.name = Some("web-abcde".into());
    kube.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            ENDPOINT_SLICE_MANAGED_BY.into(),
            "endpointslice-controller.k8s.io".into(),
        );
    let mut slices = stored.clone();
    slices.push(kube);
    assert!(run(&web(), &[web_ew("vm", "192.0.2.1")], &slices, 100).is_empty());
    let actions = run(&web(), &[], &slices, 100);
    assert_eq!(
        actions.delete,
        vec![stored[0].metadata.name.clone().expect("name")]
    );
}

#[test]
fn a_service_no_longer_selecting_deletes_our_slices() {
    let stored = store(&[], &run(&web(), &[web_ew("vm", "192.0.2.1")], &[], 100));
    let moved = svc(
        "web",
        json!({"app": "elsewhere"}),
        json!([{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]),
        &["IPv4"],
    );
    let actions = run(&moved, &[web_ew("vm", "192.0.2.1")], &stored, 100);
    assert_eq!(actions.delete.len(), 1);
    assert!(actions.create.is_empty() && actions.update.is_empty());
    // Its selector removed: likewise.
    let bare = svc("web", Value::Null, json!([{"port": 80}]), &["IPv4"]);
    assert_eq!(
        run(&bare, &[web_ew("vm", "192.0.2.1")], &stored, 100)
            .delete
            .len(),
        1
    );
}

#[test]
fn slices_of_a_previous_service_of_the_same_name_are_replaced() {
    let stored = store(&[], &run(&web(), &[web_ew("vm", "192.0.2.1")], &[], 100));
    let mut recreated = web();
    recreated.metadata.uid = Some("uid-new".into());
    let actions = run(&recreated, &[web_ew("vm", "192.0.2.1")], &stored, 100);
    // Not owned by this Service: deleted, and a new one created (an
    // update would keep the old owner's garbage collection pending).
    assert_eq!(actions.delete.len(), 1);
    assert_eq!(actions.create.len(), 1);
    let owner = &actions.create[0]
        .metadata
        .owner_references
        .as_ref()
        .expect("owners")[0];
    assert_eq!(owner.uid, "uid-new");
}

#[test]
fn a_port_change_rewrites_the_slice_in_place() {
    let stored = store(&[], &run(&web(), &[web_ew("vm", "192.0.2.1")], &[], 100));
    let retargeted = svc(
        "web",
        json!({"app": "web"}),
        json!([{"name": "http", "port": 80, "targetPort": 9000, "protocol": "TCP"}]),
        &["IPv4"],
    );
    let actions = run(&retargeted, &[web_ew("vm", "192.0.2.1")], &stored, 100);
    // Create + delete of the same address type become one update.
    assert!(
        actions.create.is_empty() && actions.delete.is_empty(),
        "{actions:?}"
    );
    let [slice] = actions.update.as_slice() else {
        panic!("one update: {actions:?}");
    };
    assert_eq!(slice.metadata.name, stored[0].metadata.name);
    assert_eq!(slice.ports.as_ref().expect("ports")[0].port, Some(9000));
}

#[test]
fn headless_services_name_their_endpoints() {
    let mut headless = web();
    if let Some(spec) = headless.spec.as_mut() {
        spec.cluster_ip = Some("None".into());
        spec.ip_families = None;
    }
    let w = ew(
        "vm",
        json!({"app": "web"}),
        &["192.0.2.1", "2001:db8::1"],
        Some(true),
    );
    let actions = run(&headless, &[w], &[], 100);
    // No families on a headless Service: both.
    assert_eq!(actions.create.len(), 2);
    for slice in &actions.create {
        let ep = &slice.endpoints.as_ref().expect("endpoints")[0];
        assert_eq!(ep.hostname.as_deref(), Some("vm"));
        let labels = slice.metadata.labels.as_ref().expect("labels");
        assert_eq!(
            labels
                .get("service.kubernetes.io/headless")
                .map(String::as_str),
            Some("")
        );
    }
}
