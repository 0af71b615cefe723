//! Against the real local control plane: EndpointSlices made by
//! kube-controller-manager from pods we make Ready reach the index, and
//! follow readiness flips and deletions.

use std::{sync::Arc, time::Duration};

use k8s_index::{IndexMetrics, ObjectCache, SharedIndex, resources};
use k8s_openapi::api::{
    core::v1::{Service, ServicePort, ServiceSpec},
    discovery::v1::EndpointSlice,
};
use kube::api::PostParams;
use test_support::{TestEnv, eventually};

const TIMEOUT: Duration = Duration::from_secs(30);

/// (ip, ready) of every endpoint of the Service's slices in the index.
fn endpoints(
    index: &SharedIndex<ObjectCache<EndpointSlice>>,
    ns: &str,
    service: &str,
) -> Vec<(String, bool)> {
    let index = index.read();
    let mut out: Vec<(String, bool)> = index
        .iter()
        .filter(|(key, slice)| {
            key.namespace.as_deref() == Some(ns)
                && slice
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                    .is_some_and(|s| s == service)
        })
        .flat_map(|(_, slice)| slice.endpoints.clone().into_iter().flatten())
        .flat_map(|ep| {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            ep.addresses.into_iter().map(move |ip| (ip, ready))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn controller_made_slices_follow_pod_readiness_and_deletion() {
    let env = TestEnv::new("idx").await;
    let index: SharedIndex<ObjectCache<EndpointSlice>> = Arc::default();
    let watch =
        resources::endpoint_slices(env.client.clone(), index.clone(), &IndexMetrics::default());
    let mut synced = watch.synced.clone();
    let task = tokio::spawn(watch.future);
    tokio::time::timeout(TIMEOUT, synced.wait_for(|s| *s))
        .await
        .expect("endpointslices synced in time")
        .expect("watch alive");

    let svc = Service {
        metadata: kube::api::ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("app".to_string(), "web".to_string())].into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: Some(
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                        "http".into(),
                    ),
                ),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    env.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service");

    // (a) three pods made Ready → one controller-made slice with 3 ready endpoints.
    let mut ips = Vec::new();
    for i in 0..3 {
        let pod = env
            .pod(&format!("web-{i}"))
            .label("app", "web")
            .port(Some("http"), 8080);
        let (_, ip) = env.create_ready_pod(&pod).await;
        ips.push(ip.to_string());
    }
    ips.sort();
    let expected: Vec<(String, bool)> = ips.iter().map(|ip| (ip.clone(), true)).collect();
    eventually("3 ready endpoints in the index", TIMEOUT, || {
        let seen = endpoints(&index, &env.ns, "web");
        let expected = expected.clone();
        async move {
            if seen == expected {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        }
    })
    .await;
    {
        let index = index.read();
        let managed_by: Vec<String> = index
            .iter()
            .filter(|(k, _)| k.namespace.as_deref() == Some(env.ns.as_str()))
            .filter_map(|(_, s)| {
                s.metadata
                    .labels
                    .as_ref()?
                    .get("endpointslice.kubernetes.io/managed-by")
                    .cloned()
            })
            .collect();
        assert_eq!(
            managed_by,
            ["endpointslice-controller.k8s.io"],
            "made by kube-controller-manager"
        );
    }

    // (b) one pod not ready → its endpoint is ready: false.
    let flipped = ips[0].clone();
    let (name, ip) = {
        // Find which pod has the first IP.
        let pods = env.api::<k8s_openapi::api::core::v1::Pod>();
        let list = pods.list(&Default::default()).await.expect("list pods");
        let pod = list
            .items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_deref()) == Some(flipped.as_str()))
            .expect("pod with the first IP");
        (
            pod.metadata.name.expect("name"),
            flipped.parse().expect("ip"),
        )
    };
    env.set_pod_ready(&name, ip, false).await;
    eventually("the flipped endpoint is not ready", TIMEOUT, || {
        let seen = endpoints(&index, &env.ns, "web");
        let flipped = flipped.clone();
        async move {
            let ok = seen.len() == 3 && seen.iter().all(|(ip, ready)| *ready == (*ip != flipped));
            if ok { Ok(()) } else { Err(format!("{seen:?}")) }
        }
    })
    .await;

    // (c) pods deleted → their endpoints are gone.
    for i in 0..3 {
        env.delete_pod_now(&format!("web-{i}")).await;
    }
    eventually("no endpoints left", TIMEOUT, || {
        let seen = endpoints(&index, &env.ns, "web");
        async move {
            if seen.is_empty() {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        }
    })
    .await;
    task.abort();
}
