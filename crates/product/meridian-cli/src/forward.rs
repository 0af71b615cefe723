//! Reaching a cluster's Meridian pod through the API server, as `linkerd
//! diagnostics` does: find the Running destination pod in the control-plane
//! namespace (or a Ready pod of a named Deployment) and forward a local
//! loopback port to each of its ports. Every connection to a local port
//! opens its own port-forward stream.

use anyhow::Context;
use k8s_api::labels::{self, DESTINATION_COMPONENT};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{Api, Client, api::ListParams};
use tokio::net::TcpListener;

/// The Running destination pod of `namespace`.
pub async fn meridian_pod(kube: &Client, namespace: &str) -> anyhow::Result<String> {
    let pods = Api::<Pod>::namespaced(kube.clone(), namespace)
        .list(&ListParams::default().labels(&format!(
            "{}={DESTINATION_COMPONENT}",
            labels::CONTROL_PLANE_COMPONENT
        )))
        .await
        .with_context(|| format!("listing the destination pods of {namespace}"))?;
    pods.items
        .into_iter()
        .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .and_then(|p| p.metadata.name)
        .with_context(|| {
            format!(
                "no Running pod labelled {}={DESTINATION_COMPONENT} in {namespace}",
                labels::CONTROL_PLANE_COMPONENT
            )
        })
}

/// A Running, Ready pod of Deployment `namespace/name` (by its selector's labels).
pub async fn deployment_pod(kube: &Client, namespace: &str, name: &str) -> anyhow::Result<String> {
    let deployment = Api::<Deployment>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Deployment {namespace}/{name}"))?
        .with_context(|| format!("Deployment {namespace}/{name} does not exist"))?;
    let selector = deployment
        .spec
        .and_then(|s| s.selector.match_labels)
        .filter(|l| !l.is_empty())
        .with_context(|| format!("Deployment {namespace}/{name} selects pods by no label"))?
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut pods = Api::<Pod>::namespaced(kube.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing the pods of Deployment {namespace}/{name}"))?
        .items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find(|p| {
            let status = p.status.as_ref();
            status.and_then(|s| s.phase.as_deref()) == Some("Running")
                && status
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .and_then(|p| p.metadata.name)
        .with_context(|| format!("Deployment {namespace}/{name} has no Running and Ready pod"))
}

/// Forwards a new loopback port to `port` of `pod`; returns `http://127.0.0.1:<local>`.
pub async fn forward(
    kube: &Client,
    namespace: &str,
    pod: &str,
    port: u16,
) -> anyhow::Result<String> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("binding a local port")?;
    let local = listener.local_addr()?;
    let pods = Api::<Pod>::namespaced(kube.clone(), namespace);
    let pod = pod.to_string();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let pods = pods.clone();
            let pod = pod.clone();
            tokio::spawn(async move {
                let mut forwarder = match pods.portforward(&pod, &[port]).await {
                    Ok(f) => f,
                    Err(error) => {
                        eprintln!("port-forward to {pod}:{port}: {error}");
                        return;
                    }
                };
                let Some(mut upstream) = forwarder.take_stream(port) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
                drop(upstream);
                let _ = forwarder.join().await;
            });
        }
    });
    Ok(format!("http://{local}"))
}
