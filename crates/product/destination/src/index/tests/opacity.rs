//! Server-derived opacity: the policy link's updates mark a pod's ports
//! opaque; a snapshot replaces everything known, an incremental update
//! changes only the pods it names, and only affected groups republish.

use std::collections::BTreeSet;

use super::*;
use crate::core::{OpaquePortsUpdate, endpoint::WorkloadRef};

fn ports(pod: &str, ports: &[u16]) -> (WorkloadRef, BTreeSet<u16>) {
    (
        WorkloadRef::Pod(NS.into(), pod.into()),
        ports.iter().copied().collect(),
    )
}

fn view_with(opaque: &[bool]) -> View {
    exists(vec![
        EndpointView {
            opaque_by_server: opaque[0],
            ..ep("web-0", "10.0.0.1:8080")
        },
        EndpointView {
            opaque_by_server: opaque[1],
            ..ep("web-1", "10.0.0.2:8080")
        },
    ])
}

#[test]
fn server_opaque_ports_follow_the_policy_link() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(service("api", "10.96.0.2"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    idx.apply(slice(
        "web-s",
        "web",
        &[("web-0", "10.0.0.1", true), ("web-1", "10.0.0.2", true)],
    ));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    let mut api = subscribe(&mut idx, "api", FilterKey::default());
    assert_eq!(current(&mut rx), view_with(&[false, false]));

    // A snapshot: web-0's 8080 is opaque, web-1's 9090 (not served) too.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: true,
        workloads: vec![ports("web-0", &[8080]), ports("web-1", &[9090])],
    });
    assert_eq!(changed(&mut rx), Some(view_with(&[true, false])));
    assert_eq!(changed(&mut api), None, "api has none of these pods");

    // The same snapshot again publishes nothing.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: true,
        workloads: vec![ports("web-0", &[8080]), ports("web-1", &[9090])],
    });
    assert_eq!(changed(&mut rx), None);

    // An incremental update names only what changed.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![ports("web-1", &[8080])],
    });
    assert_eq!(changed(&mut rx), Some(view_with(&[true, true])));
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![ports("web-0", &[])],
    });
    assert_eq!(changed(&mut rx), Some(view_with(&[false, true])));

    // The link dropping (an empty snapshot) clears everything.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: true,
        workloads: vec![],
    });
    assert_eq!(changed(&mut rx), Some(view_with(&[false, false])));
}

#[test]
fn server_opacity_reaches_endpoint_profiles() {
    let mut idx = index();
    idx.apply(pod("web-0", "10.0.0.1"));
    let key = crate::index::ProfileKey::Endpoint("10.0.0.1:8080".parse().expect("addr"));
    let mut rx = idx.subscribe_profile(key);
    assert!(!rx.borrow_and_update().profile.opaque_protocol);
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: true,
        workloads: vec![ports("web-0", &[8080])],
    });
    assert!(rx.has_changed().expect("open"));
    assert!(rx.borrow_and_update().profile.opaque_protocol);
    // Another port of the pod is not opaque: nothing to publish for 8080.
    idx.apply_server_opaque(OpaquePortsUpdate {
        reset: false,
        workloads: vec![ports("web-0", &[8080, 9090])],
    });
    assert!(!rx.has_changed().expect("open"));
}
