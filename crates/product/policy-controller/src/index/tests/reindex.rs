//! A pass over many workloads ([`crate::index::reindex`]): what the pods of one
//! definition share is computed once, and nothing of one definition leaks
//! into another's servers.

use std::sync::Arc;

use k8s_index::Index as _;
use serde_json::json;

use super::*;
use crate::core::routes;

#[test]
fn siblings_share_one_server_and_other_definitions_get_their_own() {
    let probe_networks = vec![net("0.0.0.0/0")];
    let mut index = Index::new(ClusterInfo {
        probe_networks: probe_networks.clone(),
        ..cluster()
    });
    index.apply(server(
        "srv",
        0,
        json!({"podSelector": {}, "port": "http", "proxyProtocol": "HTTP/1"}),
    ));
    // Two pods of one definition, one of another (probes on the port),
    // and a third definition whose "http" is another port: one re-list.
    index.reset(
        vec![
            pod("a", json!({}), &[("http", 8080)]),
            pod("b", json!({}), &[("http", 8080)]),
            probed_pod("probed"),
            pod("other", json!({}), &[("http", 9090)]),
        ],
        vec![],
    );
    let a = rx(&mut index, "a", 8080).borrow().clone();
    let b = rx(&mut index, "b", 8080).borrow().clone();
    assert!(Arc::ptr_eq(&a, &b), "siblings share their server");
    assert_eq!(a.http_routes, routes::default_http_routes([], &[]));
    let probed = rx(&mut index, "probed", 8080).borrow().clone();
    assert_eq!(
        probed.http_routes,
        routes::default_http_routes(["/live", "/ready"], &probe_networks)
    );
    assert_eq!(probed.reference, a.reference);
    let other = rx(&mut index, "other", 9090).borrow().clone();
    assert_eq!(other.reference, ServerRef::Server("srv".into()));
    let other_8080 = rx(&mut index, "other", 8080).borrow().clone();
    assert!(
        matches!(other_8080.reference, ServerRef::Default(_)),
        "the Server selects port 9090 of this definition, not 8080"
    );

    // A later pass (the Server's protocol changes) moves every pod, each
    // to its definition's server.
    let (mut ra, mut rp) = (rx(&mut index, "a", 8080), rx(&mut index, "probed", 8080));
    index.apply(server(
        "srv",
        0,
        json!({"podSelector": {}, "port": "http", "proxyProtocol": "HTTP/2"}),
    ));
    assert!(ra.has_changed().expect("open") && rp.has_changed().expect("open"));
    assert_eq!(
        ra.borrow_and_update().protocol,
        crate::core::ProxyProtocol::Http2
    );
    let probed = rp.borrow_and_update().clone();
    assert_eq!(probed.protocol, crate::core::ProxyProtocol::Http2);
    assert_eq!(
        probed.http_routes,
        routes::default_http_routes(["/live", "/ready"], &probe_networks)
    );
}
