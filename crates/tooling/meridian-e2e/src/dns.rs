//! Looking names up from inside pods, as users do and as users debug the
//! cluster DNS: `kubectl exec` into a pod of the dnsutils image (`getent`
//! through the libc resolver, BusyBox's `nslookup`) or into the test app
//! (`/http-test get NAME`, the app calling a Service by name). The pods'
//! resolv.conf is the kubelet's (`clusterDNS`, `<ns>.svc.cluster.local`
//! search paths), so short names resolve as in any cluster.

use std::{collections::BTreeSet, net::IpAddr, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};

use crate::{Cluster, TIMEOUT};

impl Cluster {
    /// `kubectl exec -n ns pod -- args…`: (success, stdout then stderr).
    pub fn exec(&self, ns: &str, pod: &str, args: &[&str]) -> (bool, String) {
        let mut all = vec!["exec", "-n", ns, pod, "--"];
        all.extend(args);
        self.kubectl(&all, None)
    }
}

/// A pod of the dnsutils image (`getent`, `nslookup`, `sh`) in a namespace.
pub struct DnsUtils<'a> {
    cluster: &'a Cluster,
    pub ns: String,
    pub pod: String,
}

impl<'a> DnsUtils<'a> {
    /// Starts pod `dnsutils` in `ns` (it sleeps) and waits until it runs.
    pub async fn start(cluster: &'a Cluster, ns: &str) -> Self {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "dnsutils", "namespace": ns},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "dnsutils",
                    "image": cluster.dnsutils_image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                }],
            },
        }))
        .expect("pod");
        Api::<Pod>::namespaced(cluster.client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("creating {ns}/dnsutils: {e}"));
        cluster.wait_pod_ready(ns, "dnsutils").await;
        Self {
            cluster,
            ns: ns.to_string(),
            pod: "dnsutils".to_string(),
        }
    }

    /// Runs a command in the pod: (success, stdout then stderr).
    pub fn run(&self, args: &[&str]) -> (bool, String) {
        self.cluster.exec(&self.ns, &self.pod, args)
    }

    /// `getent DATABASE NAME` (`hosts`, `ahostsv4`): (found, output).
    pub fn getent(&self, database: &str, name: &str) -> (bool, String) {
        self.run(&["getent", database, name])
    }

    /// The addresses `getent ahostsv4 NAME` finds (empty if none).
    pub fn addresses(&self, name: &str) -> BTreeSet<IpAddr> {
        let (found, out) = self.getent("ahostsv4", name);
        if found {
            first_column_ips(&out)
        } else {
            BTreeSet::new()
        }
    }

    /// `nslookup ARGS…` (BusyBox's): (success, output).
    pub fn nslookup(&self, args: &[&str]) -> (bool, String) {
        let mut all = vec!["nslookup"];
        all.extend(args);
        self.run(&all)
    }
}

/// The addresses at the start of `getent` output lines.
pub fn first_column_ips(output: &str) -> BTreeSet<IpAddr> {
    output
        .lines()
        .filter_map(|line| line.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Polls `check` every half second until it succeeds; panics with its last
/// error after [`TIMEOUT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("{what}: not so after {TIMEOUT:?}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getent_lines_give_their_addresses() {
        let out = "10.244.0.12     STREAM db.ns.svc.cluster.local\n10.244.0.12     DGRAM  \n10.244.0.13     STREAM \nhttp-test: noise\n";
        let ips: Vec<String> = first_column_ips(out)
            .iter()
            .map(|ip| ip.to_string())
            .collect();
        assert_eq!(ips, ["10.244.0.12", "10.244.0.13"]);
    }
}
