//! `Get` streams whose context token names a node the index does not know
//! share one group (and one set of series) per Service port, each still
//! gets the right endpoints, and a stream whose node appears moves to its
//! node's group and is sent what differs.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_index::Index as _;
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use linkerd2_proxy_api::destination::{GetDestination, Update, update};
use parking_lot::RwLock;
use prometheus_client::registry::Registry;
use serde_json::json;

use super::*;
use crate::{
    grpc::{DestinationService, streams::StreamRegistry},
    index::tests::{index, obj, pod, service, slice_of},
    metrics::{DestinationMetrics, IndexCollector},
};

const PATH: &str = "web.ns.svc.cluster.local:80";

fn request(node: &str) -> GetDestination {
    GetDestination {
        scheme: "k8s".into(),
        path: PATH.into(),
        context_token: format!(r#"{{"ns":"ns","nodeName":"{node}","pod":"client"}}"#),
    }
}

fn node(name: &str, zone: &str) -> PartialObjectMeta<Node> {
    PartialObjectMeta {
        types: None,
        metadata: obj(json!({"name": name, "labels": {"topology.kubernetes.io/zone": zone}})),
        _phantom: Default::default(),
    }
}

/// web-0 (on node-1) in zone z1.
fn cluster() -> Arc<RwLock<EndpointsIndex>> {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(slice_of(
        "web-s",
        "web",
        vec![json!({
            "addresses": ["10.0.0.1"], "conditions": {"ready": true}, "zone": "z1",
            "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-0"}
        })],
    ));
    Arc::new(RwLock::new(idx))
}

/// The service, and the shutdown sender its streams live as long as.
fn server(
    index: &Arc<RwLock<EndpointsIndex>>,
) -> (DestinationService, tokio::sync::watch::Sender<bool>) {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let svc = DestinationService::new(
        index.clone(),
        DestinationMetrics::default(),
        StreamRegistry::new(),
        shutdown,
    );
    (svc, stop)
}

/// The next update of `stream`, if one comes within a moment (the stream
/// must not end).
async fn next(stream: &mut FrameStream) -> Option<Update> {
    let frame = tokio::time::timeout(Duration::from_millis(100), stream.next())
        .await
        .ok()?
        .expect("the stream stays open")
        .expect("a frame");
    Some(grpc_stream::decode_request(&frame).expect("an update"))
}

/// The addresses and `zone_locality` of an `Add`.
fn added(update: &Update) -> Vec<(String, String)> {
    let Some(update::Update::Add(set)) = &update.update else {
        panic!("not an Add: {update:?}");
    };
    set.addrs
        .iter()
        .map(|a| {
            let addr = a.addr.as_ref().expect("addr");
            let ip = addr.ip.as_ref().and_then(|ip| ip.ip);
            let locality = a
                .metric_labels
                .get("zone_locality")
                .cloned()
                .unwrap_or_default();
            (format!("{ip:?}:{}", addr.port), locality)
        })
        .collect()
}

fn web_series(index: &Arc<RwLock<EndpointsIndex>>) -> usize {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(IndexCollector::new(index.clone())));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains("service=\"web\""))
        .count()
}

#[tokio::test]
async fn unknown_nodes_share_a_group_and_move_when_their_node_appears() {
    // One known-to-nobody node name: the baseline.
    let one = cluster();
    let (svc, _stop_one) = server(&one);
    let mut alone = svc
        .open_get(request("made-up-x"), None)
        .await
        .expect("opened");
    let want = added(&next(&mut alone).await.expect("a first update"));
    assert_eq!(want.len(), 1);
    let (one_groups, one_series) = (one.read().group_count(), web_series(&one));

    // 2,000 distinct made-up node names.
    let index = cluster();
    let (svc, _stop) = server(&index);
    let mut streams = Vec::new();
    for i in 0..2_000 {
        let mut stream = svc
            .open_get(request(&format!("made-up-{i}")), None)
            .await
            .expect("opened");
        let first = next(&mut stream).await.expect("a first update");
        assert_eq!(added(&first), want, "stream {i}");
        streams.push(stream);
    }
    assert!(
        index.read().group_count() <= 2 * one_groups,
        "{} groups for 2,000 unknown nodes, {one_groups} for one",
        index.read().group_count()
    );
    assert!(web_series(&index) <= 2 * one_series);
    assert_eq!(want[0].1, "unknown", "no zone for an unknown node");

    // made-up-7 appears, in the endpoint's zone: its stream is sent the
    // endpoint again as local; the others nothing.
    index.write().apply(node("made-up-7", "z1"));
    let moved = next(&mut streams[7])
        .await
        .expect("the moved stream's update");
    let fresh = {
        let mut s = svc
            .open_get(request("made-up-7"), None)
            .await
            .expect("opened");
        next(&mut s).await.expect("a first update")
    };
    assert_eq!(added(&moved), added(&fresh), "as if the node had existed");
    assert_eq!(added(&moved)[0].1, "local");
    for (i, stream) in streams.iter_mut().enumerate().take(20) {
        if i != 7 {
            assert_eq!(next(stream).await, None, "stream {i} is sent nothing");
        }
    }
    assert_eq!(
        index.read().group_count(),
        2,
        "the unknown group and made-up-7's"
    );

    // Every group goes with its streams (the moved one left the unknown
    // group, and releases made-up-7's).
    drop(streams);
    assert_eq!(index.read().group_count(), 0);
    assert_eq!(index.read().publisher_count(), 0);
    drop(alone);
}
