//! The index's self-audit: consistent after any sequence of applied events,
//! and a change that was stored but never published is found, with both
//! sides.

use super::{get::web_slice, *};
use crate::index::ProfileKey;

fn populated() -> EndpointsIndex {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    idx.apply(web_slice(&[("web-0", "10.0.0.1", true)]));
    idx
}

#[test]
fn published_state_matches_the_index_after_applied_events() {
    let mut idx = populated();
    let _all = subscribe(&mut idx, "web", FilterKey::default());
    let _node = subscribe(
        &mut idx,
        "web",
        FilterKey {
            node_name: "node-1".into(),
            ..FilterKey::default()
        },
    );
    idx.apply(web_slice(&[
        ("web-0", "10.0.0.1", true),
        ("web-1", "10.0.0.2", true),
    ]));
    delete::<Pod>(&mut idx, "web-0");
    let audit = idx.audit();
    assert_eq!(audit.groups, 2);
    assert!(audit.is_consistent(), "{audit:?}");
}

#[test]
fn a_change_stored_but_not_published_is_found() {
    let mut idx = populated();
    let _rx = subscribe(&mut idx, "web", FilterKey::default());
    // Store a slice change without telling the publishers (a lost refresh).
    let _ = idx.cluster.apply_slice(
        NS.into(),
        "web-abc".into(),
        crate::k8s::slices::slice_facts(&web_slice(&[("web-1", "10.0.0.2", true)])),
    );
    let audit = idx.audit();
    assert_eq!(audit.groups, 1);
    let [mismatch] = &audit.group_mismatches[..] else {
        panic!("one mismatch expected: {audit:?}");
    };
    assert_eq!(mismatch.service, svc_id("web"));
    let published: Vec<_> = mismatch
        .published
        .snapshot
        .entries()
        .map(|e| e.endpoint.addr.to_string())
        .collect();
    let truth: Vec<_> = mismatch
        .truth
        .entries()
        .map(|e| e.endpoint.addr.to_string())
        .collect();
    assert_eq!(published, ["10.0.0.1:8080"]);
    assert_eq!(truth, ["10.0.0.2:8080"]);

    // The next event of that Service publishes it, and the audit is clean
    // (the same slice again would be no event: nothing it says changed).
    idx.apply(service("web", "10.96.0.1"));
    assert!(idx.audit().is_consistent());
}

#[test]
fn profiles_are_audited_too() {
    let mut idx = populated();
    let key = ProfileKey::Endpoint("10.0.0.1:8080".parse().expect("addr"));
    let _rx = idx.subscribe_profile(key.clone());
    assert!(idx.audit().is_consistent());
    assert_eq!(idx.audit().profiles, 1);
    // The pod leaves without the profile publishers hearing of it.
    let _ = idx
        .cluster
        .apply_pod((NS.to_string(), "web-0".to_string()), None);
    let audit = idx.audit();
    assert_eq!(audit.profile_mismatches.len(), 1, "{audit:?}");
    assert_eq!(audit.profile_mismatches[0].key, key);
}
