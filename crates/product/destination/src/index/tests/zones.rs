//! Node zones: a group keyed by a client node sees `zone_locality` from that
//! node's zone; a zone change republishes only the groups it changes.

use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;

use super::*;

fn node(name: &str, zone: Option<&str>) -> PartialObjectMeta<Node> {
    let labels: serde_json::Map<String, Value> = zone
        .map(|z| ("topology.kubernetes.io/zone".to_string(), json!(z)))
        .into_iter()
        .collect();
    PartialObjectMeta {
        types: None,
        metadata: obj(json!({"name": name, "labels": labels})),
        _phantom: Default::default(),
    }
}

fn at(locality: &str) -> View {
    exists(vec![EndpointView {
        locality: locality.into(),
        ..ep("web-0", "10.0.0.1:8080")
    }])
}

#[test]
fn the_client_nodes_zone_decides_locality() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(slice("web-s", "web", &[("web-0", "10.0.0.1", true)]));
    let on_node_1 = FilterKey {
        node_name: "node-1".into(),
        ..FilterKey::default()
    };
    let mut client = subscribe(&mut idx, "web", on_node_1);
    let mut anywhere = subscribe(&mut idx, "web", FilterKey::default());
    assert_eq!(current(&mut client), at("unknown"));
    assert_eq!(current(&mut anywhere), at("unknown"));

    idx.apply(node("node-1", Some("z1")));
    assert_eq!(changed(&mut client), Some(at("local")));
    assert_eq!(changed(&mut anywhere), None, "no client node, no zone");
    assert_eq!(idx.node_zone("node-1"), Some("z1"));

    idx.apply(node("node-1", Some("z2")));
    assert_eq!(changed(&mut client), Some(at("remote")));

    // Another node's zone, or the same zone again, changes nothing.
    idx.apply(node("node-2", Some("z1")));
    idx.apply(node("node-1", Some("z2")));
    assert_eq!(changed(&mut client), None);

    delete::<PartialObjectMeta<Node>>(&mut idx, "node-1");
    assert_eq!(changed(&mut client), Some(at("unknown")));
    assert_eq!(idx.node_zone("node-1"), None);
}

#[test]
fn a_node_is_known_by_its_zone_or_its_pods() {
    let mut idx = index();
    let mut epoch = idx.node_epoch();
    assert!(!idx.cluster().knows_node("node-1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    assert!(idx.cluster().knows_node("node-1"), "a pod runs on it");
    assert!(epoch.has_changed().expect("open"));
    epoch.mark_unchanged();
    idx.apply(pod("web-1", "10.0.0.2"));
    assert!(!epoch.has_changed().expect("open"), "already known");
    delete::<Pod>(&mut idx, "web-0");
    assert!(idx.cluster().knows_node("node-1"), "web-1 still runs on it");
    delete::<Pod>(&mut idx, "web-1");
    assert!(!idx.cluster().knows_node("node-1"));
    idx.apply(node("node-2", None));
    assert!(
        !idx.cluster().knows_node("node-2"),
        "no zone, no pods: as unknown"
    );
    idx.apply(node("node-2", Some("z1")));
    assert!(idx.cluster().knows_node("node-2"));
    assert!(epoch.has_changed().expect("open"));
}
