//! The files a real node is started with: kubeconfigs, the CNI network,
//! containerd's and the kubelet's configuration (pure text, tested here
//! without a node).

use super::*;

pub(super) fn write_file(path: &Path, contents: &str) -> Result<(), NodeError> {
    fs::write(path, contents).map_err(io_err(format!("writing {}", path.display())))
}

pub(super) fn cert_kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: meridian-local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: user\n  user:\n    client-certificate: {cert}\n    client-key: {key}\ncontexts:\n- name: meridian-local\n  context:\n    cluster: meridian-local\n    user: user\ncurrent-context: meridian-local\n",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    )
}

pub(super) fn cni_config(dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "meridian",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{
                        "subnet": POD_CIDR,
                        "gateway": BRIDGE_IP.to_string(),
                        "rangeStart": "10.244.0.10",
                    }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": dir.join("cni/ipam"),
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    })
    .to_string()
}

pub(super) fn containerd_config_toml(dir: &Path, pause: &str) -> String {
    let c = dir.join("containerd");
    format!(
        r#"# containerd of the Meridian local real node (written by local-cluster).
version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/{pause}"
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which this sandbox lacks:
  # containers get no lower score than containerd.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false{binary}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
"#,
        root = c.join("root").display(),
        state = c.join("state").display(),
        sock = c.join("containerd.sock").display(),
        cni_bin = CNI_BIN_DIR,
        cni_conf = dir.join("cni/net.d").display(),
        opt = c.join("opt").display(),
        // $MERIDIAN_RUNC picks another runc (e.g. a wrapper that logs).
        binary = std::env::var("MERIDIAN_RUNC")
            .map(|runc| format!("\n        BinaryName = \"{runc}\""))
            .unwrap_or_default(),
    )
}

pub(super) fn kubelet_config(
    dir: &Path,
    containerd: &Path,
    port: u16,
    healthz_port: u16,
) -> String {
    let pki = dir.join("pki");
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only; Kubernetes 1.35+ refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://{containerd}
address: {BRIDGE_IP}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
tlsCertFile: {pki}/kubelet.crt
tlsPrivateKeyFile: {pki}/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {pki}/ca.crt
authorization:
  mode: Webhook
clusterDomain: {domain}
clusterDNS:
- {dns}
resolvConf: {dir}/resolv.conf
podLogsDir: {dir}/pod-logs
volumePluginDir: {dir}/kubelet/volume-plugins
staticPodPath: ""
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
protectKernelDefaults: false
maxPods: 110
nodeStatusReportFrequency: 10s
shutdownGracePeriod: 0s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
"#,
        containerd = containerd.display(),
        pki = pki.display(),
        dir = dir.display(),
        domain = super::dns::CLUSTER_DOMAIN,
        dns = super::dns::CLUSTER_DNS_IP,
    )
}
