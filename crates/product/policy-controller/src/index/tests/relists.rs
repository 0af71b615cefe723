//! Re-lists, namespaces independent of each other, and the opaque-ports
//! feed of the destination.

use super::*;

#[test]
fn reset_removes_deleted_objects_and_publishes_once() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server("old", 0, json!({"podSelector": {}, "port": 80})));
    changed(&mut rx);

    index.reset(
        vec![
            server(
                "new",
                1,
                json!({"podSelector": {}, "port": 80, "proxyProtocol": "HTTP/2"}),
            ),
            server("newer", 2, json!({"podSelector": {}, "port": 80})),
        ],
        vec![key("old")],
    );
    assert_eq!(
        changed(&mut rx),
        named_server("new", ProxyProtocol::Http2, Authorizations::new())
    );
    k8s_index::Index::<Server>::reset(&mut index, vec![], vec![key("new"), key("newer")]);
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
    assert_eq!(index.stats().servers, 0);
}

#[test]
fn namespaces_are_independent() {
    let mut index = Index::new(cluster());
    index.apply(pod_in("other", "web", json!({}), &[]));
    let rx = index
        .pod_server_rx("other", "web", port(80))
        .expect("known pod");
    index.apply(server("srv", 0, json!({"podSelector": {}, "port": 80})));
    unchanged(&rx);
    assert_eq!(
        rx.borrow().reference,
        ServerRef::Default("all-unauthenticated")
    );
}

#[test]
fn opaque_servers_feed_the_destination_without_a_port_lookup() {
    let mut index = Index::new(cluster());
    index.apply(pod(
        "db",
        json!({"app": "db"}),
        &[("pg", 5432), ("admin", 9000)],
    ));
    let (snapshot, mut feed) = index.follow_opaque_ports();
    assert!(snapshot.is_empty());

    // No proxy has asked about port 5432: the Server alone creates it.
    index.apply(server(
        "db-pg",
        0,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": "pg", "proxyProtocol": "opaque"}),
    ));
    let change = feed.try_recv().expect("a change");
    assert_eq!(
        (change.name.as_str(), change.ports.as_slice()),
        ("db", &[5432][..])
    );
    // A non-opaque Server on another port changes nothing in the feed.
    index.apply(server(
        "db-admin",
        1,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": 9000, "proxyProtocol": "HTTP/1"}),
    ));
    assert!(feed.try_recv().is_err());
    assert_eq!(index.follow_opaque_ports().0.len(), 1);

    k8s_index::Index::<Server>::delete(&mut index, key("db-pg"));
    assert!(feed.try_recv().expect("removal").ports.is_empty());
    index.apply(server(
        "db-pg",
        0,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": "pg", "proxyProtocol": "opaque"}),
    ));
    assert_eq!(feed.try_recv().expect("back").ports, [5432]);
    k8s_index::Index::<Pod>::delete(&mut index, key("db"));
    assert!(feed.try_recv().expect("pod gone").ports.is_empty());
    assert!(index.follow_opaque_ports().0.is_empty());
}
