//! The cluster-wide settings the flags give the inbound side: networks,
//! probe networks, the control plane's namespace and identity domain, the
//! default policy and the detect timeout.

use std::time::Duration;

use ipnet::IpNet;

use super::{DETECT_TIMEOUT, DefaultPolicy, IdentityMatch};

/// Cluster-wide settings from flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// `--cluster-networks`.
    pub networks: Vec<IpNet>,
    /// `--probe-networks` (empty: probe routes are not authorized).
    pub probe_networks: Vec<IpNet>,
    /// `--control-plane-namespace`.
    pub control_plane_ns: String,
    /// `--identity-domain`.
    pub identity_domain: String,
    /// `--default-policy`.
    pub default_policy: DefaultPolicy,
    /// Protocol detection timeout of `Detect` servers.
    pub detect_timeout: Duration,
}

impl ClusterInfo {
    /// The mesh identity of a service account.
    pub fn service_account_identity(&self, name: &str, namespace: &str) -> IdentityMatch {
        IdentityMatch::service_account(
            name,
            namespace,
            &self.control_plane_ns,
            &self.identity_domain,
        )
    }
}

impl Default for ClusterInfo {
    /// The flags' defaults.
    fn default() -> Self {
        let nets = [
            "10.0.0.0/8",
            "100.64.0.0/10",
            "172.16.0.0/12",
            "192.168.0.0/16",
        ];
        Self {
            networks: nets.iter().filter_map(|n| n.parse().ok()).collect(),
            probe_networks: Vec::new(),
            control_plane_ns: "linkerd".to_string(),
            identity_domain: "cluster.local".to_string(),
            default_policy: DefaultPolicy::AllUnauthenticated,
            detect_timeout: DETECT_TIMEOUT,
        }
    }
}
