//! How a watch reads its initial list, seen from the API server's own
//! request metrics: streamed (one watch request with `sendInitialEvents`,
//! no LIST) where `WatchList` is on, as in Kubernetes 1.34 and later; and
//! where it is off (Kubernetes 1.31 and 1.33 by default), refused once,
//! then listed in pages, with the index as complete, later changes seen,
//! and no watch failure counted.
//!
//! Each test owns a private control plane: the feature gate is the API
//! server's.

mod common;

use std::{sync::Arc, time::Duration};

use common::{names, service, wait_names};
use k8s_index::{IndexMetrics, ObjectCache, SharedIndex, resources};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::{Api, Client, api::PostParams};
use local_cluster::{Cluster, ClusterOptions, Lifetime};
use prometheus_client::registry::Registry;

const NS: &str = "initial-list";

async fn start(gates: &[&str]) -> (tempfile::TempDir, Cluster, Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = ClusterOptions::new(dir.path(), Lifetime::Tied);
    options.apiserver_feature_gates = gates.iter().map(|g| g.to_string()).collect();
    let cluster = Cluster::start(options)
        .await
        .expect("start a private control plane");
    let client = cluster.client().expect("client");
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    (dir, cluster, client)
}

async fn create(client: &Client, name: &str) {
    Api::<Service>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &service(name))
        .await
        .expect("create service");
}

/// The API server's requests for Services: (LIST requests, WATCH requests
/// refused as invalid, streamed lists served).
async fn service_requests(client: &Client) -> (u64, u64, u64) {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client
        .request_text(request)
        .await
        .expect("the API server's /metrics");
    let sum = |name: &str, labels: &[&str]| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter(|l| labels.iter().all(|label| l.contains(label)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let services = "resource=\"services\"";
    (
        sum("apiserver_request_total", &[services, "verb=\"LIST\""]),
        sum(
            "apiserver_request_total",
            &[services, "verb=\"WATCH\"", "code=\"422\""],
        ),
        sum("apiserver_watch_list_duration_seconds_count", &[services]),
    )
}

/// Starts the Services watch and waits for its first sync.
async fn watch(
    client: &Client,
    metrics: &IndexMetrics,
) -> (
    SharedIndex<ObjectCache<Service>>,
    tokio::task::JoinHandle<()>,
) {
    let index: SharedIndex<ObjectCache<Service>> = Arc::default();
    let task = resources::services(client.clone(), index.clone(), metrics);
    let mut synced = task.synced.clone();
    let handle = tokio::spawn(task.future);
    tokio::time::timeout(Duration::from_secs(60), synced.wait_for(|s| *s))
        .await
        .expect("the watch syncs within 60 s")
        .expect("sync signal");
    (index, handle)
}

fn restarts(registry: &Registry) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text.lines()
        .find(|l| l.starts_with("index_watch_restarts_total{kind=\"services\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The API server's Service requests before and after, as
/// [`service_requests`] counts them.
type Requests = (u64, u64, u64);

/// Services `a` and `b`, then the Services watch: its list complete, a
/// later change seen, and no watch failure counted. Returns the API
/// server's Service requests before and after the watch.
async fn list_then_follow(client: &Client) -> (Requests, Requests) {
    for name in ["a", "b"] {
        create(client, name).await;
    }
    let before = service_requests(client).await;

    let mut registry = Registry::default();
    let metrics = IndexMetrics::register(&mut registry);
    let (index, task) = watch(client, &metrics).await;
    assert_eq!(names(&index, NS), ["a", "b"], "the list is complete");
    create(client, "c").await;
    wait_names(&index, NS, &["a", "b", "c"], "a change after the list").await;
    let after = service_requests(client).await;
    assert_eq!(restarts(&registry), 0, "no watch failure counted");
    task.abort();
    (before, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_list_on_the_list_is_streamed() {
    let (_dir, _cluster, client) = start(&[]).await;
    let (before, after) = list_then_follow(&client).await;
    assert_eq!(
        after.0, before.0,
        "no LIST of Services: {before:?} -> {after:?}"
    );
    assert_eq!(
        after.1, before.1,
        "nothing refused: {before:?} -> {after:?}"
    );
    assert!(
        after.2 > before.2,
        "a streamed list was served: {before:?} -> {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_list_off_the_list_is_paged_after_one_refusal() {
    let (_dir, _cluster, client) = start(&["WatchList=false"]).await;
    // The refusal is not a watch failure (list_then_follow checks).
    let (before, after) = list_then_follow(&client).await;
    assert_eq!(
        after.1,
        before.1 + 1,
        "the streamed list was asked once and refused: {before:?} -> {after:?}"
    );
    assert!(
        after.0 > before.0,
        "the Services were listed in pages: {before:?} -> {after:?}"
    );
    assert_eq!(
        after.2, before.2,
        "no streamed list: {before:?} -> {after:?}"
    );
}
