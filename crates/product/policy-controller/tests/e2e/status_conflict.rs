//! The status writer against a real API server: a status computed from a
//! route's version that another controller has changed since (it added its
//! own `status.parents` entry, which our copy does not show yet) is refused
//! by the API server, so that entry is never dropped by our merge patch;
//! the conflict is counted, and our entry is written once the route's new
//! version reaches the writer's index.

use std::time::Duration;

use k8s_api::policy::HTTPRoute;
use k8s_index::Index as _;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams, PostParams};
use meridian_runtime::Shutdown;
use policy_controller::{
    gateway::ActiveKinds,
    metrics::StatusMetrics,
    status::{StatusIndex, StatusWriter},
};
use prometheus_client::registry::Registry;
use serde_json::json;
use test_support::{TestEnv, eventually};

const TIMEOUT: Duration = Duration::from_secs(30);
const OURS: &str = "linkerd.io/policy-controller";
const THEIRS: &str = "example.com/gateway-controller";

/// The controllers with an entry in the route's `status.parents`.
async fn controllers(routes: &kube::Api<HTTPRoute>) -> Result<Vec<String>, String> {
    let route = routes.get("api").await.map_err(|e| e.to_string())?;
    Ok(route
        .status
        .map(|s| s.parents)
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.controller_name)
        .collect())
}

fn conflicts(registry: &Registry) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text.lines()
        .find_map(|l| l.strip_prefix("policy_status_patch_conflicts_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_stale_status_patch_keeps_another_controllers_entry() {
    // Another test's controller would write the entry this test's writer must.
    let _alone = crate::support::alone().await;
    let env = TestEnv::new("status-conflict").await;
    env.cluster().ensure_crds();
    let services: kube::Api<Service> = env.api();
    let routes: kube::Api<HTTPRoute> = env.api();
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .expect("service");
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("create the Service");
    let route: HTTPRoute = serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"name": "api"},
        "spec": {"parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}]},
    }))
    .expect("route");
    let stale = routes
        .create(&PostParams::default(), &route)
        .await
        .expect("create the route");

    // Our index's copy is `stale`; meanwhile another controller writes
    // its entry.
    let index = StatusIndex::shared();
    index.write().apply(service);
    index.write().apply(stale.clone());
    let theirs = json!({"status": {"parents": [{
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
        "controllerName": THEIRS,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }]}});
    routes
        .patch_status("api", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .expect("the other controller's status");

    let mut registry = Registry::default();
    let (_leader, leads) = tokio::sync::watch::channel(true);
    let (_synced, synced) = tokio::sync::watch::channel(true);
    let writer = StatusWriter {
        client: env.client.clone(),
        index: index.clone(),
        leader: leads,
        synced: vec![synced],
        gateway: ActiveKinds::default(),
        patch_timeout: Duration::from_secs(5),
        metrics: StatusMetrics::register(&mut registry),
    };
    let (stop, shutdown) = Shutdown::new();
    let task = tokio::spawn(writer.run(shutdown));

    // The writer's patch, computed from `stale`, was sent: refused, or
    // (without the version) applied over their entry.
    let seen = eventually("the writer's first patch", TIMEOUT, || async {
        let now = controllers(&routes).await?;
        if conflicts(&registry) > 0 || now.iter().any(|c| c == OURS) {
            Ok(now)
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    assert_eq!(seen, [THEIRS], "their entry is kept, ours not written");
    assert_eq!(conflicts(&registry), 1);

    // The watch brings the new version: our entry is written beside theirs.
    let fresh = routes.get("api").await.expect("get the route");
    index.write().apply(fresh);
    let both = eventually("both entries", TIMEOUT, || async {
        let now = controllers(&routes).await?;
        if now.iter().any(|c| c == OURS) {
            Ok(now)
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    assert_eq!(both, [THEIRS, OURS]);
    stop.trigger();
    task.await.expect("writer");
}
