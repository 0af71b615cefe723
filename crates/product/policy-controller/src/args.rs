//! Command-line flags of `policy-controller`. Names and defaults follow
//! Linkerd's policy controller, so its manifests port unchanged; address
//! flags take `:PORT`, `HOST:PORT` or `[IPV6]:PORT`.

use std::net::SocketAddr;

use clap::Parser;
use ipnet::IpNet;
use meridian_runtime::{KubeClientArgs, LogArgs, parse_listen_addr};

use crate::core::{ClusterInfo, DefaultPolicy};

#[derive(Clone, Debug, Parser)]
#[command(
    name = "policy-controller",
    version,
    about = "Serves inbound policy (who may talk to which workload port) to meshed proxies"
)]
pub struct Args {
    #[command(flatten)]
    pub log: LogArgs,

    #[command(flatten)]
    pub kube: KubeClientArgs,

    #[command(flatten)]
    pub grpc_limits: grpc_stream::server::ServerLimits,

    /// Admin server address (/live, /ready, /metrics).
    #[arg(long, env = "POLICY_ADMIN_ADDR", default_value = "0.0.0.0:8080", value_parser = parse_listen_addr)]
    pub admin_addr: SocketAddr,

    /// Policy gRPC API address (plaintext h2c, as proxies expect).
    #[arg(long, env = "POLICY_GRPC_ADDR", default_value = "0.0.0.0:8090", value_parser = parse_listen_addr)]
    pub grpc_addr: SocketAddr,

    /// Introspection address (/streams, /audit): read-only JSON about every
    /// open stream, kept off the admin port that Prometheus and proxies
    /// reach. Localhost by default: reach it with `kubectl port-forward`.
    #[arg(long, env = "POLICY_INTROSPECTION_ADDR", default_value = "127.0.0.1:9980", value_parser = parse_listen_addr)]
    pub introspection_addr: SocketAddr,

    /// Address of the destination's workload-ports feed
    /// (`meridian.policy.v1.WorkloadPorts`, plaintext h2c). The destination
    /// container of the same pod reads it (its `--policy-addr`); it is
    /// served here only, never on `--grpc-addr`, and on localhost by
    /// default.
    #[arg(long, env = "POLICY_WORKLOAD_PORTS_ADDR", default_value = "127.0.0.1:8091", value_parser = parse_listen_addr)]
    pub workload_ports_addr: SocketAddr,

    /// Admission webhook address (HTTPS).
    #[arg(long, env = "POLICY_SERVER_ADDR", default_value = "0.0.0.0:9443", value_parser = parse_listen_addr)]
    pub server_addr: SocketAddr,

    /// PEM private key of the admission webhook.
    #[arg(long, default_value = "/var/run/linkerd/tls/tls.key")]
    pub server_tls_key: std::path::PathBuf,

    /// PEM certificate chain of the admission webhook.
    #[arg(long, default_value = "/var/run/linkerd/tls/tls.crt")]
    pub server_tls_certs: std::path::PathBuf,

    /// Do not serve the admission webhook.
    #[arg(long)]
    pub admission_controller_disabled: bool,

    /// Do not write the status of routes, rate limit policies and
    /// EgressNetworks, nor take the status writer's Lease: this controller
    /// writes nothing to the cluster. A Meridian flag, for a shadow
    /// deployment that answers beside the serving control plane without
    /// acting on the cluster (`deploy/shadow`); the serving replicas keep
    /// writing.
    #[arg(long)]
    pub status_writer_disabled: bool,

    /// Networks of the cluster's pods and nodes (comma-separated CIDRs).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16"
    )]
    pub cluster_networks: Vec<IpNet>,

    /// Trust domain of mesh identities.
    #[arg(long, default_value = "cluster.local")]
    pub identity_domain: String,

    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,

    /// Policy for ports no Server selects (overridden per pod or external
    /// workload by the `config.linkerd.io/default-inbound-policy`
    /// annotation).
    #[arg(long, default_value = "all-unauthenticated")]
    pub default_policy: DefaultPolicy,

    /// Name of the Deployment that owns the status-writer Lease.
    #[arg(long, default_value = "linkerd-destination")]
    pub policy_deployment_name: String,

    /// Namespace of the control plane.
    #[arg(long, default_value = "linkerd")]
    pub control_plane_namespace: String,

    /// Networks allowed to reach HTTP probe paths (none: probes are not specially authorized).
    #[arg(long, value_delimiter = ',')]
    pub probe_networks: Vec<IpNet>,

    /// Ports treated as opaque for outbound Services without an annotation.
    #[arg(long, default_value = "25,587,3306,4444,5432,6379,9300,11211")]
    pub default_opaque_ports: String,

    /// Timeout of one status patch, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub patch_timeout_ms: u64,

    /// How often the consistency audit compares what every open stream was
    /// last sent with the index (seconds; 0 turns the background audit off,
    /// `/audit` on the introspection listener still runs it on demand).
    #[arg(long, default_value_t = 60)]
    pub audit_interval_secs: u64,

    /// Let `l5d-*` request headers through (they are stripped by default).
    #[arg(long)]
    pub allow_l5d_request_headers: bool,

    /// Namespace of global EgressNetworks.
    #[arg(long, default_value = "linkerd-egress")]
    pub global_egress_network_namespace: String,
}

impl Args {
    /// The cluster-wide settings of the inbound index.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            networks: self.cluster_networks.clone(),
            probe_networks: self.probe_networks.clone(),
            control_plane_ns: self.control_plane_namespace.clone(),
            identity_domain: self.identity_domain.clone(),
            default_policy: self.default_policy,
            detect_timeout: crate::core::DETECT_TIMEOUT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_policy_names_parse() {
        let args = Args::try_parse_from(["policy-controller"]).expect("defaults parse");
        assert_eq!(args.cluster_info(), ClusterInfo::default());
        let args = Args::try_parse_from([
            "policy-controller",
            "--default-policy=cluster-authenticated",
            "--probe-networks=0.0.0.0/0,::/0",
        ])
        .expect("parse");
        assert_eq!(args.default_policy, DefaultPolicy::ClusterAuthenticated);
        assert_eq!(args.probe_networks.len(), 2);
        assert!(Args::try_parse_from(["policy-controller", "--default-policy=nope"]).is_err());
    }

    /// The shadow's flags (`deploy/shadow`).
    #[test]
    fn the_shadow_writes_no_status() {
        let mut line = test_support::deploy::destination_pod_command("policy");
        assert!(
            !Args::try_parse_from(&line)
                .expect("parse")
                .status_writer_disabled
        );
        line.extend([
            "--admission-controller-disabled".into(),
            "--status-writer-disabled".into(),
        ]);
        let args = Args::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert!(args.status_writer_disabled && args.admission_controller_disabled);
    }

    #[test]
    fn deploy_args_parse() {
        let line = test_support::deploy::destination_pod_command("policy");
        assert_eq!(line[0], "/linkerd-policy-controller");
        let args = Args::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(args.admin_addr.port(), 9990);
        assert_eq!(args.probe_networks.len(), 2);
    }

    /// The `policy` container of the Linkerd 2.20 chart (`command:
    /// ["/linkerd-policy-controller"]`), with `disableIPv6` true (the
    /// default, `0.0.0.0`) and false (`[::]`), and `:PORT`.
    #[test]
    fn chart_args_parse() {
        for host in ["0.0.0.0", "[::]", ""] {
            let args = Args::try_parse_from([
                "/linkerd-policy-controller".to_string(),
                format!("--admin-addr={host}:9990"),
                "--control-plane-namespace=linkerd".into(),
                format!("--grpc-addr={host}:8090"),
                format!("--server-addr={host}:9443"),
                "--server-tls-key=/var/run/linkerd/tls/tls.key".into(),
                "--server-tls-certs=/var/run/linkerd/tls/tls.crt".into(),
                "--cluster-networks=10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8"
                    .into(),
                "--identity-domain=cluster.local".into(),
                "--cluster-domain=cluster.local".into(),
                "--default-policy=all-unauthenticated".into(),
                "--log-level=linkerd=info,warn".into(),
                "--log-format=plain".into(),
                "--default-opaque-ports=25,587,3306,4444,5432,6379,9300,11211".into(),
                "--global-egress-network-namespace=linkerd-egress".into(),
                "--probe-networks=0.0.0.0/0,::/0".into(),
            ])
            .unwrap_or_else(|e| panic!("{host}: {e}"));
            for (addr, port) in [
                (args.admin_addr, 9990),
                (args.grpc_addr, 8090),
                (args.server_addr, 9443),
            ] {
                assert_eq!(addr.port(), port);
                assert!(addr.ip().is_unspecified(), "{addr}");
            }
            for (addr, port) in [
                (args.introspection_addr, 9980),
                (args.workload_ports_addr, 8091),
            ] {
                assert_eq!(addr.port(), port);
                assert!(addr.ip().is_loopback(), "{addr}");
            }
            assert_eq!(args.cluster_networks.len(), 5);
            assert_eq!(args.probe_networks.len(), 2);
            assert_eq!(args.log.log_level, "linkerd=info,warn");
            assert_eq!(args.global_egress_network_namespace, "linkerd-egress");
            assert_eq!(args.control_plane_namespace, "linkerd");
        }
    }
}
