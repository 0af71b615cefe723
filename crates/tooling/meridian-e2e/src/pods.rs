//! What the API says about a test's pods (the truth the suites compare the
//! Meridian pod's and the cluster DNS's answers with).

use std::{collections::BTreeSet, net::IpAddr};

use k8s_openapi::api::{core::v1::Pod, discovery::v1::EndpointSlice};
use kube::{Api, api::ListParams};

use crate::{Cluster, dns::eventually};

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Cluster {
    /// The pods of `ns` matching the label `selector` that are not being
    /// deleted.
    async fn live_pods(&self, ns: &str, selector: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        pods.list(&ListParams::default().labels(selector))
            .await
            .unwrap_or_else(|e| panic!("listing pods {selector} in {ns}: {e}"))
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// The IPs of the Ready pods matching `selector`.
    pub async fn ready_pod_ips(&self, ns: &str, selector: &str) -> BTreeSet<IpAddr> {
        self.live_pods(ns, selector)
            .await
            .iter()
            .filter(|pod| is_ready(pod))
            .filter_map(|pod| pod.status.as_ref()?.pod_ip.as_ref()?.parse().ok())
            .collect()
    }

    /// Names of the pods of `app=<app>`.
    pub async fn pod_names(&self, ns: &str, app: &str) -> Vec<String> {
        self.live_pods(ns, &format!("app={app}"))
            .await
            .into_iter()
            .filter_map(|pod| pod.metadata.name)
            .collect()
    }

    /// Waits until pod `ns/name` is Ready.
    pub async fn wait_pod_ready(&self, ns: &str, name: &str) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        eventually(&format!("pod {ns}/{name} Ready"), || async {
            let pod = pods.get(name).await.map_err(|e| e.to_string())?;
            if is_ready(&pod) {
                Ok(())
            } else {
                Err(format!("{:?}", pod.status.and_then(|s| s.phase)))
            }
        })
        .await
    }

    /// Waits until the EndpointSlices of Service `ns/service` list `n`
    /// ready endpoints: the endpoint-slice controller follows pod readiness
    /// a moment later, and what reads slices (Meridian, `explain`) sees
    /// them, not the pods.
    pub async fn wait_slices_ready(&self, ns: &str, service: &str, n: usize) {
        let slices: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let selector = format!("kubernetes.io/service-name={service}");
        eventually(
            &format!("{n} ready endpoints in the slices of {ns}/{service}"),
            || async {
                let ready = slices
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .iter()
                    .flat_map(|slice| slice.endpoints.iter().flatten())
                    .filter(|endpoint| {
                        endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true)
                    })
                    .count();
                if ready == n {
                    Ok(())
                } else {
                    Err(format!("{ready} ready"))
                }
            },
        )
        .await
    }
}
