//! Relists: a pod relist replaces the pod cache at once and publishes each
//! group once; a Service relist drops Services gone while the watch was down.

use super::*;

#[test]
fn a_pod_relist_replaces_the_pods_and_publishes_once() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    idx.apply(slice(
        "web-abc",
        "web",
        &[("web-0", "10.0.0.1", true), ("web-1", "10.0.0.2", true)],
    ));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    let before = rx.borrow_and_update().version;

    // web-1 was deleted while the watch was down; web-0 changed.
    let mut web0 = pod("web-0", "10.0.0.1");
    web0.metadata
        .labels
        .get_or_insert_default()
        .insert("pod-template-hash".into(), "h2".into());
    Index::<Pod>::reset(
        &mut idx,
        vec![web0],
        vec![ObjectKey::new(Some(NS), "web-1")],
    );
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![ep("web-0", "10.0.0.1:8080")]))
    );
    assert_eq!(rx.borrow().version, before + 1, "one publication");
    assert!(idx.pod(NS, "web-1").is_none());

    // The same relist again changes nothing.
    let mut web0 = pod("web-0", "10.0.0.1");
    web0.metadata
        .labels
        .get_or_insert_default()
        .insert("pod-template-hash".into(), "h2".into());
    Index::<Pod>::reset(&mut idx, vec![web0], vec![]);
    assert_eq!(changed(&mut rx), None);
}

#[test]
fn a_service_relist_drops_services_deleted_while_the_watch_was_down() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(service("api", "10.96.0.2"));
    let mut web = subscribe(&mut idx, "web", FilterKey::default());
    let mut api = subscribe(&mut idx, "api", FilterKey::default());
    Index::<Service>::reset(
        &mut idx,
        vec![service("api", "10.96.0.2")],
        vec![ObjectKey::new(Some(NS), "web")],
    );
    assert_eq!(changed(&mut web), Some(missing()));
    assert_eq!(changed(&mut api), None, "api is unchanged");
}
