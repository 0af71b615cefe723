//! The cluster's Service ranges (`networking.k8s.io/v1` ServiceCIDRs): a
//! fact that settles, without asking the API server, that an address is no
//! Service's ClusterIP.
//!
//! Every ClusterIP is allocated from a ServiceCIDR, and the API server keeps
//! a ServiceCIDR until no Service holds an address of it. So an address
//! outside every ServiceCIDR the watch has listed can be no ClusterIP: a
//! lookup for it (a pod's IP, an address outside the cluster) is answered
//! from the index with no request ([`ServiceCidrs::may_be_cluster_ip`]).
//!
//! Where the kind cannot be read (clusters before Kubernetes 1.33 do not
//! serve it; Linkerd's chart does not grant it), the fact is unknown and
//! every address may be a ClusterIP: such lookups are checked with the API
//! server as before, within the miss budget ([`crate::confirm`]). The kind
//! is probed again every [`REPROBE`], so granting the RBAC later takes
//! effect without a restart.

use std::{net::IpAddr, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use ipnet::IpNet;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::{Api, Client, api::ListParams};
use parking_lot::RwLock;

use crate::{Index, IndexMetrics, ObjectKey, WatchTask, resources};

/// How often a cluster that does not serve ServiceCIDRs (or denies them)
/// is asked again.
pub const REPROBE: Duration = Duration::from_secs(300);

/// The ranges, shared between the watch and every lookup. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ServiceCidrs {
    ranges: Arc<RwLock<Ranges>>,
}

/// What is known of the cluster's Service ranges.
#[derive(Debug, Default)]
struct Ranges {
    /// The ranges of each ServiceCIDR, by name (a ServiceCIDR may carry an
    /// IPv4 and an IPv6 range).
    by_name: Vec<(String, Vec<IpNet>)>,
    /// `true` once the watch has listed every ServiceCIDR: before, during
    /// an outage's re-list is fine (the last list stands), but before the
    /// first list nothing is settled.
    listed: bool,
}

impl ServiceCidrs {
    /// Ranges known to be exactly `nets` (tests, and clusters told by flag).
    pub fn fixed(nets: Vec<IpNet>) -> Self {
        let ranges = Ranges {
            by_name: vec![(String::new(), nets)],
            listed: true,
        };
        Self {
            ranges: Arc::new(RwLock::new(ranges)),
        }
    }

    /// Whether `ip` may be some Service's ClusterIP: `false` only once every
    /// ServiceCIDR is known and none contains it.
    pub fn may_be_cluster_ip(&self, ip: IpAddr) -> bool {
        let ranges = self.ranges.read();
        !ranges.listed
            || ranges
                .by_name
                .iter()
                .flat_map(|(_, nets)| nets)
                .any(|net| net.contains(&ip))
    }

    /// Whether the ranges are known (the kind was listed).
    pub fn known(&self) -> bool {
        self.ranges.read().listed
    }

    /// Follows the cluster's ServiceCIDRs with `client` (counted under the
    /// kind `servicecidrs` in `metrics`). The future runs for ever; it never
    /// holds readiness back.
    pub fn follow(&self, client: Client, metrics: &IndexMetrics) -> BoxFuture<'static, ()> {
        let this = self.clone();
        let metrics = metrics.clone();
        Box::pin(async move {
            let api = Api::<ServiceCIDR>::all(client);
            loop {
                match api.list_metadata(&ListParams::default().limit(1)).await {
                    Ok(_) => break,
                    Err(error) => {
                        tracing::info!(
                            error = %crate::watch::describe(&kube::runtime::watcher::Error::InitialListFailed(error)),
                            "ServiceCIDRs cannot be read: addresses outside the Service ranges are checked with the API server like any miss (asked again in {REPROBE:?})"
                        );
                        tokio::time::sleep(REPROBE).await;
                    }
                }
            }
            let index = Arc::new(RwLock::new(this));
            let task = WatchTask::new(
                "servicecidrs",
                api,
                resources::watch_config(),
                index,
                &metrics,
            );
            task.future.await;
        })
    }

    fn publish(&self, name: String, nets: Option<Vec<IpNet>>) {
        let mut ranges = self.ranges.write();
        ranges.by_name.retain(|(known, _)| *known != name);
        if let Some(nets) = nets {
            ranges.by_name.push((name, nets));
        }
    }
}

/// The ranges a ServiceCIDR declares (unparsable ones are skipped: the API
/// server validates them, so none are expected).
fn nets_of(cidr: &ServiceCIDR) -> Vec<IpNet> {
    cidr.spec
        .as_ref()
        .and_then(|spec| spec.cidrs.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|cidr| cidr.parse().ok())
        .collect()
}

impl Index<ServiceCIDR> for ServiceCidrs {
    fn apply(&mut self, obj: ServiceCIDR) {
        if let Some(name) = obj.metadata.name.clone() {
            self.publish(name, Some(nets_of(&obj)));
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        self.publish(key.name, None);
    }

    fn reset(&mut self, objects: Vec<ServiceCIDR>, _removed: Vec<ObjectKey>) {
        let by_name = objects
            .iter()
            .filter_map(|obj| Some((obj.metadata.name.clone()?, nets_of(obj))))
            .collect();
        let mut ranges = self.ranges.write();
        ranges.by_name = by_name;
        ranges.listed = true;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::networking::v1::ServiceCIDRSpec;

    use super::*;

    fn cidr(name: &str, nets: &[&str]) -> ServiceCIDR {
        let mut obj = ServiceCIDR {
            spec: Some(ServiceCIDRSpec {
                cidrs: Some(nets.iter().map(|n| n.to_string()).collect()),
            }),
            ..Default::default()
        };
        obj.metadata.name = Some(name.into());
        obj
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn nothing_is_settled_before_the_first_list() {
        let mut cidrs = ServiceCidrs::default();
        assert!(cidrs.may_be_cluster_ip(ip("192.0.2.1")));
        // An event before the list settles nothing either.
        cidrs.apply(cidr("kubernetes", &["10.96.0.0/16"]));
        assert!(cidrs.may_be_cluster_ip(ip("192.0.2.1")));
        cidrs.reset(vec![cidr("kubernetes", &["10.96.0.0/16"])], vec![]);
        assert!(!cidrs.may_be_cluster_ip(ip("192.0.2.1")));
        assert!(cidrs.may_be_cluster_ip(ip("10.96.3.4")));
    }

    #[test]
    fn added_and_deleted_ranges_follow_their_objects() {
        let mut cidrs = ServiceCidrs::default();
        cidrs.reset(
            vec![cidr("kubernetes", &["10.96.0.0/16", "fd00:10::/108"])],
            vec![],
        );
        assert!(cidrs.may_be_cluster_ip(ip("fd00:10::5")));
        assert!(!cidrs.may_be_cluster_ip(ip("10.97.0.1")));
        cidrs.apply(cidr("extra", &["10.97.0.0/24"]));
        assert!(cidrs.may_be_cluster_ip(ip("10.97.0.1")));
        cidrs.delete(ObjectKey::new(None, "extra"));
        assert!(!cidrs.may_be_cluster_ip(ip("10.97.0.1")));
        assert!(cidrs.may_be_cluster_ip(ip("10.96.0.1")));
    }
}
