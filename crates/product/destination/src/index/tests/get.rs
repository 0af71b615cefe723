//! `Get` publishers: subscribe, refresh on the objects that feed a target,
//! share groups, release, coalesce for slow streams, and pods moving
//! between Services.

use super::*;
use crate::index::SubscribeError;

pub(crate) fn web_slice(pods: &[(&str, &str, bool)]) -> EndpointSlice {
    slice("web-abc", "web", pods)
}

#[test]
fn publishes_changes_to_subscribed_targets_only() {
    let mut idx = index();
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert!(!rx.borrow_and_update().snapshot.exists());

    idx.apply(service("web", "10.96.0.1"));
    assert_eq!(changed(&mut rx), Some(exists(vec![])));

    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    assert_eq!(changed(&mut rx), None, "pods not yet in a slice");
    idx.apply(web_slice(&[
        ("web-0", "10.0.0.1", true),
        ("web-1", "10.0.0.2", false),
    ]));
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![ep("web-0", "10.0.0.1:8080")]))
    );

    // An unrelated pod publishes nothing; a referenced pod's edit does.
    idx.apply(pod("other", "10.0.0.9"));
    assert_eq!(changed(&mut rx), None);
    let mut relabeled = pod("web-0", "10.0.0.1");
    relabeled.metadata.labels = Some(
        [
            ("app".to_string(), "web".to_string()),
            ("pod-template-hash".to_string(), "abc".to_string()),
        ]
        .into(),
    );
    idx.apply(relabeled);
    assert!(
        rx.has_changed().expect("open"),
        "a label that feeds a response"
    );
    let state = rx.borrow_and_update().clone();
    assert_eq!(state.step.len(), 1, "one re-Add: {:?}", state.step);
    assert_eq!(
        state
            .snapshot
            .entries()
            .map(|e| e.addr.metric_labels.get("pod_template_hash").cloned())
            .collect::<Vec<_>>(),
        [Some("abc".to_string())]
    );

    // A status update of what no answer reads (a container's readiness:
    // the slice says that), or a label no answer reads, publishes nothing:
    // the facts the index keeps of the pod are the same.
    let mut ready_again = pod("web-0", "10.0.0.1");
    ready_again.metadata.labels = Some(
        [
            ("app".to_string(), "web".to_string()),
            ("pod-template-hash".to_string(), "abc".to_string()),
            ("version".to_string(), "2".to_string()),
        ]
        .into(),
    );
    if let Some(status) = ready_again.status.as_mut() {
        status.conditions = Some(vec![obj(json!({"type": "Ready", "status": "False"}))]);
    }
    idx.apply(ready_again);
    assert_eq!(changed(&mut rx), None);

    delete::<Service>(&mut idx, "web");
    assert_eq!(changed(&mut rx), Some(missing()));
}

#[test]
fn a_late_subscriber_sees_the_stored_state_and_a_deleted_slice_empties_it() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    idx.apply(web_slice(&[
        ("web-0", "10.0.0.1", true),
        ("web-1", "10.0.0.2", true),
    ]));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert_eq!(
        current(&mut rx),
        exists(vec![
            ep("web-0", "10.0.0.1:8080"),
            ep("web-1", "10.0.0.2:8080")
        ])
    );

    // A pod deletion removes its endpoint even while the slice still names it.
    delete::<Pod>(&mut idx, "web-1");
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![ep("web-0", "10.0.0.1:8080")]))
    );
    // Deleting an unknown pod touches nothing.
    delete::<Pod>(&mut idx, "nope");
    assert_eq!(changed(&mut rx), None);

    delete::<EndpointSlice>(&mut idx, "web-abc");
    assert_eq!(changed(&mut rx), Some(exists(vec![])));
}

#[test]
fn groups_are_shared_and_dropped_with_their_last_subscriber() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    let key = FilterKey::default();
    let a = subscribe(&mut idx, "web", key.clone());
    let b = subscribe(&mut idx, "web", key.clone());
    let other = FilterKey {
        node_name: "node-1".into(),
        ..FilterKey::default()
    };
    let c = subscribe(&mut idx, "web", other.clone());
    assert_eq!((idx.publisher_count(), idx.group_count()), (1, 2));
    drop(a);
    idx.release(&svc_id("web"), 80, &key);
    assert_eq!(idx.group_count(), 2, "b still uses the group");
    drop(b);
    idx.release(&svc_id("web"), 80, &key);
    assert_eq!(idx.group_count(), 1);
    drop(c);
    idx.release(&svc_id("web"), 80, &other);
    assert_eq!((idx.publisher_count(), idx.group_count()), (0, 0));
}

#[test]
fn a_released_target_is_recomputed_from_the_store_on_resubscribe() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    let rx = subscribe(&mut idx, "web", FilterKey::default());
    drop(rx);
    idx.release(&svc_id("web"), 80, &FilterKey::default());
    assert_eq!(idx.publisher_count(), 0);

    // Changes while nobody subscribes are stored, not published.
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(web_slice(&[("web-0", "10.0.0.1", true)]));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert_eq!(current(&mut rx), exists(vec![ep("web-0", "10.0.0.1:8080")]));
    assert_eq!(rx.borrow().version, 0, "a new group starts at version 0");
}

#[test]
fn external_name_services_are_refused() {
    let mut idx = index();
    let mut svc = service("web", "10.96.0.1");
    if let Some(spec) = svc.spec.as_mut() {
        spec.type_ = Some("ExternalName".into());
    }
    idx.apply(svc);
    assert_eq!(
        idx.subscribe(&svc_id("web"), 80, FilterKey::default())
            .err(),
        Some(SubscribeError::ExternalName(svc_id("web")))
    );
}

#[test]
fn pods_moving_between_services() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(service("api", "10.96.0.2"));
    idx.apply(pod("p", "10.0.0.1"));
    idx.apply(slice("web-abc", "web", &[("p", "10.0.0.1", true)]));
    idx.apply(slice("api-abc", "api", &[]));
    let mut web = subscribe(&mut idx, "web", FilterKey::default());
    let mut api = subscribe(&mut idx, "api", FilterKey::default());
    assert_eq!(current(&mut web), exists(vec![ep("p", "10.0.0.1:8080")]));
    assert_eq!(current(&mut api), exists(vec![]));

    // The pod leaves web's slice and joins api's.
    idx.apply(slice("web-abc", "web", &[]));
    idx.apply(slice("api-abc", "api", &[("p", "10.0.0.1", true)]));
    assert_eq!(changed(&mut web), Some(exists(vec![])));
    assert_eq!(
        changed(&mut api),
        Some(exists(vec![ep("p", "10.0.0.1:8080")]))
    );

    // Now an edit of the pod concerns api only.
    let mut moved = pod("p", "10.0.0.1");
    moved
        .metadata
        .labels
        .get_or_insert_default()
        .insert("pod-template-hash".into(), "h2".into());
    idx.apply(moved);
    assert_eq!(changed(&mut web), None);
    assert!(api.has_changed().expect("open"));
    api.borrow_and_update();

    // A slice relabelled to another Service leaves its old one.
    idx.apply(slice("api-abc", "web", &[("p", "10.0.0.1", true)]));
    assert_eq!(changed(&mut api), Some(exists(vec![])));
    assert_eq!(
        changed(&mut web),
        Some(exists(vec![ep("p", "10.0.0.1:8080")]))
    );
}
