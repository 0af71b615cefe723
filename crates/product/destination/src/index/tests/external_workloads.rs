//! ExternalWorkloads in the index: `Get` groups follow the workloads their
//! slices name (an edit re-adds, a deletion drops), the policy link's
//! Server opacity reaches them, and `GetProfile` by a workload's `ip:port`
//! serves its endpoint profile.

use std::collections::BTreeSet;

use k8s_api::workload::ExternalWorkload;
use linkerd2_proxy_api::destination::tls_identity;

use super::*;
use crate::{
    core::{OpaquePortsUpdate, endpoint::WorkloadRef},
    index::{ProfileKey, ProfileLookupError},
    k8s::fixtures::external_workload,
};

/// A slice of Service `service` naming ExternalWorkloads (name, ip, ready)
/// on port `http` = 8080.
fn workload_slice(name: &str, service: &str, workloads: &[(&str, &str, bool)]) -> EndpointSlice {
    let endpoints = workloads
        .iter()
        .map(|(ew, ip, ready)| {
            json!({
                "addresses": [ip],
                "conditions": {"ready": ready},
                "targetRef": {"kind": "ExternalWorkload", "namespace": NS, "name": ew}
            })
        })
        .collect();
    slice_of(name, service, endpoints)
}

/// (addr, external_workload label, identity URI) of every endpoint.
fn workloads(rx: &mut watch::Receiver<Arc<GroupState>>) -> Vec<(String, String, String)> {
    rx.borrow_and_update()
        .snapshot
        .entries()
        .map(|e| {
            let uri = match e
                .addr
                .tls_identity
                .as_ref()
                .and_then(|t| t.strategy.as_ref())
            {
                Some(tls_identity::Strategy::UriLikeIdentity(id)) => id.uri.clone(),
                other => format!("{other:?}"),
            };
            (
                e.endpoint.addr.to_string(),
                e.addr
                    .metric_labels
                    .get("external_workload")
                    .cloned()
                    .unwrap_or_default(),
                uri,
            )
        })
        .collect()
}

fn vm(name: &str, ip: &str) -> ExternalWorkload {
    external_workload(name, json!({"spec": {"workloadIPs": [{"ip": ip}]}}))
}

#[test]
fn get_follows_the_workloads_a_slice_names() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(vm("vm-1", "192.0.2.1"));
    idx.apply(workload_slice(
        "web-ew",
        "web",
        &[
            ("vm-1", "192.0.2.1", true),
            ("vm-2", "192.0.2.2", true),
            ("vm-3", "192.0.2.3", false),
        ],
    ));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    // vm-2 is not stored yet, vm-3 is not ready.
    assert_eq!(
        workloads(&mut rx),
        [(
            "192.0.2.1:8080".to_string(),
            "vm-1".to_string(),
            "spiffe://root.linkerd.cluster.local/vm-1".to_string()
        )]
    );

    // The workload appearing adds its endpoint.
    idx.apply(vm("vm-2", "192.0.2.2"));
    assert!(rx.has_changed().expect("alive"));
    assert_eq!(workloads(&mut rx).len(), 2);

    // An edit that feeds the response (its identity) re-publishes.
    idx.apply(external_workload(
        "vm-1",
        json!({"spec": {"workloadIPs": [{"ip": "192.0.2.1"}],
                        "meshTLS": {"identity": "spiffe://other/vm-1", "serverName": "vm-1"}}}),
    ));
    assert!(rx.has_changed().expect("alive"));
    assert_eq!(workloads(&mut rx)[0].2, "spiffe://other/vm-1");

    // A workload no slice names changes nothing.
    idx.apply(vm("elsewhere", "192.0.2.9"));
    assert!(!rx.has_changed().expect("alive"));

    // Deleting a workload drops its endpoint.
    delete::<ExternalWorkload>(&mut idx, "vm-2");
    assert!(rx.has_changed().expect("alive"));
    assert_eq!(workloads(&mut rx).len(), 1);
}

#[test]
fn server_opacity_reaches_workload_endpoints() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(vm("vm-1", "192.0.2.1"));
    idx.apply(workload_slice(
        "web-ew",
        "web",
        &[("vm-1", "192.0.2.1", true)],
    ));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert!(!current(&mut rx).endpoints[0].opaque_by_server);

    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![(
            WorkloadRef::External(NS.into(), "vm-1".into()),
            BTreeSet::from([8080]),
        )],
    });
    assert!(rx.has_changed().expect("alive"));
    assert!(current(&mut rx).endpoints[0].opaque_by_server);

    // A pod of the same name is another workload.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![(WorkloadRef::Pod(NS.into(), "vm-1".into()), BTreeSet::new())],
    });
    assert!(!rx.has_changed().expect("alive"));
}

#[test]
fn get_profile_by_workload_address() {
    let mut idx = index();
    let ew = external_workload(
        "vm-1",
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fleet", "uid": "u"}]},
               "spec": {"workloadIPs": [{"ip": "192.0.2.1"}]}}),
    );
    idx.apply(ew);
    let addr = "192.0.2.1:8080".parse().expect("addr");
    assert_eq!(
        idx.resolve_profile_addr(addr, None),
        Ok(ProfileKey::Endpoint(addr))
    );
    let mut rx = idx.subscribe_profile(ProfileKey::Endpoint(addr));
    let endpoint = rx
        .borrow_and_update()
        .profile
        .endpoint
        .clone()
        .expect("endpoint");
    let labels: std::collections::BTreeMap<_, _> =
        endpoint.metric_labels.clone().into_iter().collect();
    assert_eq!(
        labels,
        std::collections::BTreeMap::from([
            ("external_workload".to_string(), "vm-1".to_string()),
            // As the original's profile path: the owner kind as written,
            // and no zone_locality.
            ("Deployment".to_string(), "fleet".to_string()),
            ("zone".to_string(), String::new()),
            ("namespace".to_string(), NS.to_string()),
        ])
    );
    assert!(matches!(
        endpoint.tls_identity.and_then(|t| t.strategy),
        Some(tls_identity::Strategy::UriLikeIdentity(_))
    ));
    assert!(!rx.borrow().profile.opaque_protocol);

    // A Server making the port opaque republishes.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![(
            WorkloadRef::External(NS.into(), "vm-1".into()),
            BTreeSet::from([8080]),
        )],
    });
    assert!(rx.has_changed().expect("alive"));
    assert!(rx.borrow_and_update().profile.opaque_protocol);

    // A port the workload does not declare is a bare address.
    let undeclared = "192.0.2.1:7000".parse().expect("addr");
    let bare = idx.subscribe_profile(ProfileKey::Endpoint(undeclared));
    let endpoint = bare.borrow().profile.endpoint.clone().expect("endpoint");
    assert!(endpoint.metric_labels.is_empty() && endpoint.tls_identity.is_none());

    // Deleting the workload turns the profile into the bare address.
    delete::<ExternalWorkload>(&mut idx, "vm-1");
    assert!(rx.has_changed().expect("alive"));
    let endpoint = rx
        .borrow_and_update()
        .profile
        .endpoint
        .clone()
        .expect("endpoint");
    assert!(endpoint.metric_labels.is_empty());
}

#[test]
fn two_workloads_on_one_address_are_ambiguous() {
    let mut idx = index();
    idx.apply(vm("vm-1", "192.0.2.1"));
    idx.apply(vm("vm-2", "192.0.2.1"));
    let addr = "192.0.2.1:8080".parse().expect("addr");
    let error = idx.resolve_profile_addr(addr, None).expect_err("ambiguous");
    assert_eq!(
        error,
        ProfileLookupError::AmbiguousExternalWorkload { addr, count: 2 }
    );
    assert_eq!(
        error.to_string(),
        "found 2 externalworkloads with a conflicting ip 192.0.2.1:8080"
    );
    // A pod on that IP wins over the workloads, as in the original's order.
    idx.apply(pod("web-0", "192.0.2.1"));
    assert_eq!(
        idx.resolve_profile_addr(addr, None),
        Ok(ProfileKey::Endpoint(addr))
    );
}
