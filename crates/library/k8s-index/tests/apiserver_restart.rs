//! (d) The kube-apiserver goes away while we watch, an object is deleted
//! meanwhile (through a second apiserver on the same etcd, as in an HA
//! control plane), and the apiserver comes back: the index converges to the
//! truth without restarting the watching process.
//!
//! This test owns a private control plane, since it stops the apiserver.

mod common;

use std::{sync::Arc, time::Duration};

use common::{names, service, wait_names};
use k8s_index::{IndexMetrics, ObjectCache, SharedIndex, resources};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use local_cluster::{Cluster, ClusterOptions, Lifetime};
use prometheus_client::registry::Registry;

const NS: &str = "restart";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_converges_after_an_apiserver_outage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(ClusterOptions::new(dir.path(), Lifetime::Tied))
        .await
        .expect("start a private control plane");
    let client = cluster.client().expect("client");
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    for name in ["a", "b"] {
        services
            .create(&PostParams::default(), &service(name))
            .await
            .expect("create");
    }

    let mut registry = Registry::default();
    let metrics = IndexMetrics::register(&mut registry);
    let index: SharedIndex<ObjectCache<Service>> = Arc::default();
    let watch = resources::services(client.clone(), index.clone(), &metrics);
    let task = tokio::spawn(watch.future);
    wait_names(&index, NS, &["a", "b"], "initial list").await;

    // The apiserver we watch through goes away; meanwhile "b" is deleted
    // and "c" created through another apiserver on the same etcd.
    let (other, other_config) = cluster
        .start_additional_apiserver()
        .await
        .expect("second apiserver");
    cluster.stop_apiserver();
    let other_services: Api<Service> =
        Api::namespaced(kube::Client::try_from(other_config).expect("client"), NS);
    other_services
        .delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
    other_services
        .create(&PostParams::default(), &service("c"))
        .await
        .expect("create c");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        names(&index, NS),
        ["a", "b"],
        "nothing can be seen while the apiserver is down"
    );
    drop(other);

    cluster.start_apiserver().await.expect("apiserver back");
    wait_names(&index, NS, &["a", "c"], "convergence after the outage").await;

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    let restarts: u64 = text
        .lines()
        .find(|l| l.starts_with("index_watch_restarts_total{kind=\"services\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("restart counter present");
    assert!(
        restarts >= 1,
        "the outage was observed as a watch failure:\n{text}"
    );
    task.abort();
}
