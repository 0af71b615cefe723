//! The real node's cluster DNS, as in every real cluster: CoreDNS (built
//! from its pinned Go module, see [`binaries::COREDNS`](crate::binaries::COREDNS)) runs as the Deployment
//! `coredns` behind the Service `kube-dns` (ClusterIP [`CLUSTER_DNS_IP`]) in
//! `kube-system`, with the RBAC of its `kubernetes` plugin; the kubelet's
//! `clusterDNS`/`clusterDomain` point pods at it, so they resolve Services,
//! headless Services' pods (`hostname.subdomain`) and SRV records of named
//! ports with the usual `<ns>.svc.cluster.local` search paths.
//!
//! The objects are `manifests/cluster-dns.yaml` (this crate). The server
//! answers only cluster.local and the reverse zones of the node's ranges;
//! its binary has no forward plugin, so no query leaves the machine.

use std::{
    net::{Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Service, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde::Deserialize as _;

use super::{
    KUBERNETES_SERVICE_IP, NodeError, RealNode,
    dns_wire::{self, NOERROR, QueryType},
    progress,
};
use crate::{
    binaries::{COREDNS, ToolBinary},
    images::{self, Docker, Image},
};

/// The `kube-dns` Service's ClusterIP (inside [`super::SERVICE_CIDR`]); the
/// kubelet's `clusterDNS`.
pub const CLUSTER_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 10);
/// The cluster domain (the kubelet's `clusterDomain`).
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// Where CoreDNS runs.
pub const DNS_NAMESPACE: &str = "kube-system";
/// The Service pods' resolv.conf names, as kubeadm calls it.
pub const DNS_SERVICE: &str = "kube-dns";
/// CoreDNS's Deployment.
pub const DNS_DEPLOYMENT: &str = "coredns";

/// The manifest, with `${IMAGE}` for the CoreDNS image.
const MANIFEST: &str = include_str!("../../manifests/cluster-dns.yaml");
/// The field manager of the server-side apply.
const FIELD_MANAGER: &str = "meridian-local-cluster";

/// The CoreDNS image for the node: the binary (built on first use), the
/// runtime base, and the image holding it.
pub(super) fn ensure_image(docker: &Docker) -> Result<Image, NodeError> {
    let coredns = ToolBinary::ensure(&COREDNS, &|line| progress(line))?;
    let base = images::ensure_base(docker, &|line| progress(line))?;
    Ok(images::ensure_coredns_image(
        docker,
        &base,
        &coredns.path,
        &|line| progress(line),
    )?)
}

/// The manifest's objects for `image`, as JSON values in order.
pub fn manifest_objects(image: &str) -> Result<Vec<serde_json::Value>, NodeError> {
    let text = MANIFEST.replace("${IMAGE}", image);
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| {
            serde_json::Value::deserialize(document).map_err(|e| NodeError::Manifest {
                detail: e.to_string(),
            })
        })
        .filter(|object| !matches!(object, Ok(serde_json::Value::Null)))
        .collect()
}

impl RealNode {
    /// Applies the cluster DNS objects (server-side) and waits until the
    /// CoreDNS pod is Ready and the `kube-dns` Service answers a query for
    /// the `kubernetes` Service from the host.
    pub(super) async fn start_cluster_dns(
        &mut self,
        client: &kube::Client,
        image: &str,
        timeout: Duration,
    ) -> Result<(), NodeError> {
        let started = Instant::now();
        progress(&format!(
            "cluster DNS: CoreDNS ({image}) as {DNS_NAMESPACE}/{DNS_DEPLOYMENT}, Service {DNS_SERVICE} {CLUSTER_DNS_IP}"
        ));
        for object in manifest_objects(image)? {
            apply(client, object).await?;
        }
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), DNS_NAMESPACE);
        self.wait_for("the CoreDNS pod to become Ready", timeout, || async {
            deployments
                .get_opt(DNS_DEPLOYMENT)
                .await
                .ok()
                .flatten()
                .and_then(|d| d.status)
                .and_then(|s| s.ready_replicas)
                .is_some_and(|ready| ready >= 1)
        })
        .await?;
        let pod_ready = started.elapsed();
        let server = SocketAddr::from((CLUSTER_DNS_IP, 53));
        let name = format!("kubernetes.default.svc.{CLUSTER_DOMAIN}");
        self.wait_for(&format!("{server} to answer {name}"), timeout, || async {
            dns_wire::query(server, &name, QueryType::A, Duration::from_millis(500))
                .await
                .is_ok_and(|answer| {
                    answer.rcode == NOERROR && answer.addresses == [KUBERNETES_SERVICE_IP]
                })
        })
        .await?;
        progress(&format!(
            "cluster DNS answers on {server} in {:.1}s (CoreDNS pod Ready after {:.1}s)",
            started.elapsed().as_secs_f64(),
            pod_ready.as_secs_f64()
        ));
        Ok(())
    }
}

/// Server-side applies one object of the manifest with the API of its kind.
async fn apply(client: &kube::Client, object: serde_json::Value) -> Result<(), NodeError> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&object);
    let client = client.clone();
    match kind.as_str() {
        "ServiceAccount" => {
            let api: Api<ServiceAccount> = Api::namespaced(client, DNS_NAMESPACE);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        "ClusterRole" => {
            let api: Api<ClusterRole> = Api::all(client);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        "ClusterRoleBinding" => {
            let api: Api<ClusterRoleBinding> = Api::all(client);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        "ConfigMap" => {
            let api: Api<ConfigMap> = Api::namespaced(client, DNS_NAMESPACE);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        "Deployment" => {
            let api: Api<Deployment> = Api::namespaced(client, DNS_NAMESPACE);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        "Service" => {
            let api: Api<Service> = Api::namespaced(client, DNS_NAMESPACE);
            api.patch(&name, &params, &patch).await.map(drop)
        }
        other => {
            return Err(NodeError::Manifest {
                detail: format!("unexpected kind {other:?} ({name})"),
            });
        }
    }
    .map_err(NodeError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Vec<serde_json::Value> {
        manifest_objects("meridian/coredns:abc").expect("manifest")
    }

    #[test]
    fn the_manifest_holds_the_dns_objects_in_kube_system() {
        let all = objects();
        let kinds: Vec<&str> = all
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "ConfigMap",
                "Deployment",
                "Service"
            ]
        );
        for object in &all {
            if let Some(ns) = object["metadata"]["namespace"].as_str() {
                assert_eq!(ns, DNS_NAMESPACE, "{object}");
            }
        }
    }

    #[test]
    fn the_service_has_the_kubelets_cluster_dns_address_in_the_service_range() {
        let all = objects();
        let service = all
            .iter()
            .find(|o| o["kind"] == "Service")
            .expect("service");
        assert_eq!(service["metadata"]["name"], DNS_SERVICE);
        assert_eq!(service["spec"]["clusterIP"], CLUSTER_DNS_IP.to_string());
        let (net, bits) = super::super::SERVICE_CIDR.split_once('/').expect("cidr");
        let net: Ipv4Addr = net.parse().expect("address");
        let bits: u32 = bits.parse().expect("prefix");
        let mask = u32::MAX << (32 - bits);
        assert_eq!(u32::from(CLUSTER_DNS_IP) & mask, u32::from(net) & mask);
        let deployment = all
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "meridian/coredns:abc"
        );
    }

    #[test]
    fn the_corefile_serves_only_cluster_zones_and_forwards_nothing() {
        let all = objects();
        let corefile = all
            .iter()
            .find(|o| o["kind"] == "ConfigMap")
            .and_then(|o| o["data"]["Corefile"].as_str())
            .expect("Corefile")
            .to_string();
        let header = corefile.lines().next().unwrap_or_default();
        assert_eq!(
            header,
            "cluster.local:53 0.0.10.in-addr.arpa:53 0.244.10.in-addr.arpa:53 {"
        );
        for plugin in [
            "forward",
            "proxy",
            "grpc",
            "etcd",
            "file",
            "hosts",
            "fallthrough",
        ] {
            assert!(
                !corefile
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(plugin)),
                "{plugin} in\n{corefile}"
            );
        }
        // The binary cannot forward either: no such plugin is compiled in.
        let main =
            std::fs::read_to_string(crate::binaries::gotools_dir().join("corednsbin/main.go"))
                .expect("main.go");
        let plugins: Vec<&str> = main
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("_ \"github.com/coredns/coredns/plugin/")
            })
            .map(|l| l.trim_end_matches('"'))
            .collect();
        assert_eq!(
            plugins,
            [
                "cache",
                "errors",
                "health",
                "kubernetes",
                "loadbalance",
                "log",
                "metrics",
                "ready"
            ]
        );
    }
}
