//! A real node beside the local control plane: containerd (Debian's
//! package) with the CNI bridge, host-local, portmap and loopback plugins,
//! the kubelet and kube-proxy (iptables mode) of the pinned Kubernetes
//! version, the locally built pause image, and the cluster DNS (CoreDNS as
//! `kube-system/kube-dns`, see [`dns`]).
//!
//! Network layout (one real node per host at a time):
//! - bridge `meridian0` with `10.244.0.1/24`, made before kube-apiserver
//!   starts: the apiserver binds and advertises that address, so pods reach
//!   it through the `kubernetes` Service, and it is the node's InternalIP;
//! - pods get addresses from `10.244.0.0/24` on that bridge; Services get
//!   ClusterIPs from the cluster's `10.0.0.0/24`, routed by kube-proxy's
//!   rules, from pods and from the host (the apiserver calls webhooks
//!   through Services);
//! - a `MERIDIAN-ISOLATION` chain in mangle `FORWARD` drops anything forwarded
//!   between the bridge and any other interface: pod traffic never leaves
//!   the host, and no masquerading is set up.
//!
//! Everything the node leaves on the host is written to a record under
//! `/run/meridian/` before it is made, so [`cleanup_host`] can undo it after
//! a normal stop, a `cargo xtask cluster down`, or a killed test run (the
//! next start cleans a stale record first): processes (including container
//! processes and containerd shims), mounts under the work directory, the
//! bridge, iptables chains (kube-proxy's, the kubelet's, CNI's, ours) and
//! the sysctls the kubelet changes.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;

mod cleanup;
mod configs;
pub mod dns;
pub mod dns_wire;

use cleanup::cleanup;
pub use cleanup::cleanup_host;
use configs::{cert_kubeconfig, cni_config, containerd_config_toml, kubelet_config, write_file};

use crate::{
    binaries::KubeBinaries,
    certs::{CertError, LocalCa},
    process::{self, Lifetime, ManagedProcess},
};

/// The node's name (its Node object).
pub const NODE_NAME: &str = "meridian-node";
/// The bridge the pods are attached to.
pub const BRIDGE: &str = "meridian0";
/// The bridge's address: the node's InternalIP and the apiserver's address.
pub const BRIDGE_IP: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 1);
/// Pod addresses (CNI host-local range, kube-proxy's cluster CIDR).
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The cluster's Service range (kube-apiserver `--service-cluster-ip-range`).
pub const SERVICE_CIDR: &str = "10.0.0.0/24";
/// The `kubernetes` Service's ClusterIP (first address of the range).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Where the CNI plugins of Debian's `containernetworking-plugins` are.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

const RECORD_DIR: &str = "/run/meridian";
const RECORD_FILE: &str = "/run/meridian/real-node.json";
const ISOLATION_CHAIN: &str = "MERIDIAN-ISOLATION";
/// Sysctls the kubelet sets (container_manager_linux.go) and the two the
/// node needs; restored on cleanup.
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/bridge/bridge-nf-call-iptables",
];

/// Errors while preparing, starting or cleaning up the real node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed: {output}")]
    Command { command: String, output: String },
    #[error(
        "the real node needs {what}; run `.ci/install-node-deps` (installs containerd, runc, the CNI plugins, iptables and Docker)"
    )]
    Missing { what: String },
    #[error("the real node needs root (it creates a bridge, iptables rules and mounts)")]
    NotRoot,
    #[error(
        "a real node is already running on this host (work dir {work_dir}); stop it first (`cargo xtask cluster down`)"
    )]
    AlreadyRunning { work_dir: PathBuf },
    #[error("{process} exited early ({status}); last log lines from {log}:\n{tail}")]
    Exited {
        process: String,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{what} after {secs}s; last log lines from {log}:\n{tail}")]
    Timeout {
        what: String,
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
    #[error("Kubernetes client error: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Build(#[from] crate::binaries::BuildError),
    #[error("the cluster DNS manifest: {detail}")]
    Manifest { detail: String },
    #[error("invalid record {path}: {source}")]
    Record {
        path: PathBuf,
        source: serde_json::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
    let context = context.into();
    move |source| NodeError::Io { context, source }
}

fn progress(line: &str) {
    eprintln!("[local-cluster] real node: {line}");
}

/// What the node changed on the host, so that it can be undone by anyone.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct HostRecord {
    pub work_dir: PathBuf,
    pub containerd_address: PathBuf,
    pub kube_proxy: PathBuf,
    /// (sysctl, value before the node started).
    pub sysctls: Vec<(String, String)>,
    /// (name, pid) of the node's own processes.
    pub pids: Vec<(String, u32)>,
}

impl HostRecord {
    fn load() -> Result<Option<Self>, NodeError> {
        match fs::read_to_string(RECORD_FILE) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| NodeError::Record {
                    path: RECORD_FILE.into(),
                    source,
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(format!("reading {RECORD_FILE}"))(e)),
        }
    }

    fn save(&self) -> Result<(), NodeError> {
        fs::create_dir_all(RECORD_DIR).map_err(io_err(format!("creating {RECORD_DIR}")))?;
        let text = serde_json::to_string_pretty(self).map_err(|source| NodeError::Record {
            path: RECORD_FILE.into(),
            source,
        })?;
        fs::write(RECORD_FILE, text).map_err(io_err(format!("writing {RECORD_FILE}")))
    }

    fn alive(&self) -> bool {
        self.pids
            .iter()
            .any(|(_, pid)| i32::try_from(*pid).is_ok_and(process::is_alive))
    }
}

fn run(program: &str, args: &[&str]) -> Result<String, NodeError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(format!("running {program}")))?;
    if !out.status.success() {
        return Err(NodeError::Command {
            command: format!("{program} {}", args.join(" ")),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Checks that this host can run a real node (root, packages, no other node).
fn preflight() -> Result<(), NodeError> {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(NodeError::NotRoot);
    }
    for program in [
        "containerd",
        "ctr",
        "runc",
        "iptables",
        "iptables-save",
        "ip",
    ] {
        if find_program(program).is_none() {
            return Err(NodeError::Missing {
                what: format!("`{program}`"),
            });
        }
    }
    for plugin in ["bridge", "host-local", "portmap", "loopback"] {
        if !Path::new(CNI_BIN_DIR).join(plugin).is_file() {
            return Err(NodeError::Missing {
                what: format!("the CNI plugin {CNI_BIN_DIR}/{plugin}"),
            });
        }
    }
    Ok(())
}

/// Prepares the host before kube-apiserver starts: checks, cleans what a
/// dead node left, records the sysctls, makes the bridge and the isolation
/// rules.
pub fn prepare_host(work_dir: &Path, binaries: &KubeBinaries) -> Result<HostRecord, NodeError> {
    preflight()?;
    fs::create_dir_all(RECORD_DIR).map_err(io_err(format!("creating {RECORD_DIR}")))?;
    if let Some(old) = HostRecord::load()? {
        if old.alive() {
            return Err(NodeError::AlreadyRunning {
                work_dir: old.work_dir,
            });
        }
        progress(&format!(
            "cleaning up after a node that did not stop cleanly ({})",
            old.work_dir.display()
        ));
        cleanup(&old);
    }
    let record = HostRecord {
        work_dir: work_dir.to_path_buf(),
        containerd_address: containerd_address(work_dir),
        kube_proxy: binaries.kube_proxy(),
        sysctls: SYSCTLS
            .iter()
            .filter_map(|name| {
                fs::read_to_string(Path::new("/proc/sys").join(name))
                    .ok()
                    .map(|value| (name.to_string(), value.trim().to_string()))
            })
            .collect(),
        pids: Vec::new(),
    };
    record.save()?;
    progress(&format!("bridge {BRIDGE} {BRIDGE_IP}/24, isolation rules"));
    let _ = run("ip", &["link", "del", BRIDGE]);
    run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", &format!("{BRIDGE_IP}/24"), "dev", BRIDGE],
    )?;
    run("ip", &["link", "set", BRIDGE, "up"])?;
    write_sysctl("net/ipv4/ip_forward", "1")?;
    write_sysctl("net/bridge/bridge-nf-call-iptables", "1")?;
    for iptables in ["iptables", "ip6tables"] {
        let required = iptables == "iptables";
        let result = isolate_bridge(iptables);
        if required {
            result?;
        }
    }
    Ok(record)
}

/// The `MERIDIAN-ISOLATION` chain: traffic forwarded between pods on the
/// bridge is accepted, anything forwarded from or to another interface is
/// dropped. It lives in the `mangle` table's `FORWARD`, which is traversed
/// before `filter` and which kube-proxy never touches, so no ACCEPT of
/// kube-proxy's comes before it.
fn isolate_bridge(iptables: &str) -> Result<(), NodeError> {
    run(iptables, &["-w", "-t", "mangle", "-N", ISOLATION_CHAIN])?;
    for rule in [
        vec!["-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN"],
        vec!["-i", BRIDGE, "-j", "DROP"],
        vec!["-o", BRIDGE, "-j", "DROP"],
    ] {
        let mut args = vec!["-w", "-t", "mangle", "-A", ISOLATION_CHAIN];
        args.extend(rule);
        run(iptables, &args)?;
    }
    run(
        iptables,
        &[
            "-w",
            "-t",
            "mangle",
            "-I",
            "FORWARD",
            "1",
            "-j",
            ISOLATION_CHAIN,
        ],
    )
    .map(|_| ())
}

fn write_sysctl(name: &str, value: &str) -> Result<(), NodeError> {
    let path = Path::new("/proc/sys").join(name);
    fs::write(&path, value).map_err(io_err(format!("writing {}", path.display())))
}

/// What the node needs from the control plane to start.
pub struct NodeInputs<'a> {
    pub work_dir: &'a Path,
    pub binaries: &'a KubeBinaries,
    pub ca: &'a LocalCa,
    pub apiserver_url: String,
    pub lifetime: Lifetime,
    pub timeout: Duration,
    /// Docker images to load into containerd besides the pause image.
    pub images: Vec<String>,
}

/// The running node: containerd, kubelet, kube-proxy.
pub struct RealNode {
    record: HostRecord,
    lifetime: Lifetime,
    // Stopped in reverse: kube-proxy, kubelet, containerd.
    processes: Vec<ManagedProcess>,
    cleaned: bool,
}

impl RealNode {
    /// Starts containerd, loads the images, starts the kubelet and
    /// kube-proxy, and waits until the Node is Ready and kube-proxy has
    /// written its rules.
    pub async fn start(
        record: HostRecord,
        inputs: NodeInputs<'_>,
        client: &kube::Client,
    ) -> Result<Self, NodeError> {
        let fallback = record.clone();
        match Self::start_inner(record, inputs, client).await {
            Ok(node) => Ok(node),
            Err(error) => {
                // The half-started node (its processes are stopped when
                // dropped, tied or not) leaves nothing behind.
                let record = HostRecord::load().ok().flatten().unwrap_or(fallback);
                cleanup(&record);
                Err(error)
            }
        }
    }

    async fn start_inner(
        mut record: HostRecord,
        inputs: NodeInputs<'_>,
        client: &kube::Client,
    ) -> Result<Self, NodeError> {
        let mut node = RealNode {
            record: record.clone(),
            lifetime: inputs.lifetime,
            processes: Vec::new(),
            cleaned: false,
        };
        let dir = inputs.work_dir.join("node");
        for sub in [
            "containerd",
            "cni/net.d",
            "cni/ipam",
            "pki",
            "kubelet",
            "pod-logs",
        ] {
            fs::create_dir_all(dir.join(sub))
                .map_err(io_err(format!("creating {}", dir.join(sub).display())))?;
        }
        let docker = crate::images::Docker::locate();
        docker.check_daemon()?;
        let pause = crate::images::ensure_pause(&docker, &|line| progress(line))?;
        let coredns = dns::ensure_image(&docker)?;
        // Timed from containerd's start (the images are built or found).
        let started = Instant::now();

        // containerd
        write_file(
            &dir.join("cni/net.d/10-meridian.conflist"),
            &cni_config(&dir),
        )?;
        let containerd_config = dir.join("containerd/config.toml");
        write_file(
            &containerd_config,
            &containerd_config_toml(&dir, &pause.reference),
        )?;
        progress("starting containerd");
        let containerd = node.spawn(
            "containerd",
            &find_program("containerd").unwrap_or_else(|| "containerd".into()),
            &[format!("--config={}", containerd_config.display())],
            inputs.work_dir,
        )?;
        node.processes.push(containerd);
        node.save_pids(&mut record)?;
        let address = record.containerd_address.clone();
        node.wait_for("containerd's socket", inputs.timeout, || async {
            address.exists()
        })
        .await?;
        let mut references = vec![pause.reference.clone(), coredns.reference.clone()];
        references.extend(inputs.images.iter().cloned());
        progress(&format!(
            "loading {} into containerd",
            references.join(", ")
        ));
        let ctr = find_program("ctr").unwrap_or_else(|| "ctr".into());
        let refs: Vec<&str> = references.iter().map(String::as_str).collect();
        crate::images::import_into_containerd(
            &docker,
            &ctr,
            &address,
            &refs,
            &dir.join("containerd"),
        )?;

        // Credentials.
        let pki = dir.join("pki");
        let ca_path = pki.join("ca.crt");
        write_file(&ca_path, inputs.ca.cert_pem())?;
        let serving = inputs.ca.issue_serving_cert_for(
            &[NODE_NAME, "localhost"],
            &[IpAddr::V4(BRIDGE_IP), IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )?;
        write_file(&pki.join("kubelet.crt"), &serving.cert_pem)?;
        write_file(&pki.join("kubelet.key"), &serving.key_pem)?;
        for (name, user, group) in [
            (
                "kubelet-client",
                format!("system:node:{NODE_NAME}"),
                "system:nodes",
            ),
            ("kube-proxy", "system:kube-proxy".to_string(), ""),
        ] {
            let groups: Vec<&str> = [group].into_iter().filter(|g| !g.is_empty()).collect();
            let cert = inputs.ca.issue_client_cert(&user, &groups)?;
            let crt = pki.join(format!("{name}.crt"));
            let key = pki.join(format!("{name}.key"));
            write_file(&crt, &cert.cert_pem)?;
            write_file(&key, &cert.key_pem)?;
            write_file(
                &dir.join(format!("{name}.kubeconfig")),
                &cert_kubeconfig(&inputs.apiserver_url, &ca_path, &crt, &key),
            )?;
        }

        // kubelet
        let kubelet_port = free_port()?;
        let healthz_port = free_port()?;
        write_file(
            &dir.join("resolv.conf"),
            "# The node's resolv.conf for pods with dnsPolicy Default (CoreDNS): no\n# upstream server is reachable, lookups fail fast. Other pods get the\n# cluster DNS (clusterDNS).\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
        )?;
        write_file(
            &dir.join("kubelet.yaml"),
            &kubelet_config(&dir, &address, kubelet_port, healthz_port),
        )?;
        progress("starting kubelet");
        let kubelet = node.spawn(
            "kubelet",
            &inputs.binaries.kubelet(),
            &[
                format!("--config={}", dir.join("kubelet.yaml").display()),
                format!(
                    "--kubeconfig={}",
                    dir.join("kubelet-client.kubeconfig").display()
                ),
                format!("--root-dir={}", dir.join("kubelet").display()),
                format!("--cert-dir={}", dir.join("kubelet/pki").display()),
                format!("--node-ip={BRIDGE_IP}"),
                format!("--hostname-override={NODE_NAME}"),
                "--v=1".to_string(),
            ],
            inputs.work_dir,
        )?;
        node.processes.push(kubelet);
        node.save_pids(&mut record)?;

        // kube-proxy
        let proxy_healthz = free_port()?;
        let proxy_metrics = free_port()?;
        progress("starting kube-proxy (iptables)");
        let kube_proxy = node.spawn(
            "kube-proxy",
            &inputs.binaries.kube_proxy(),
            &[
                format!(
                    "--kubeconfig={}",
                    dir.join("kube-proxy.kubeconfig").display()
                ),
                "--proxy-mode=iptables".to_string(),
                format!("--cluster-cidr={POD_CIDR}"),
                format!("--hostname-override={NODE_NAME}"),
                format!("--healthz-bind-address=127.0.0.1:{proxy_healthz}"),
                format!("--metrics-bind-address=127.0.0.1:{proxy_metrics}"),
                format!("--nodeport-addresses={BRIDGE_IP}/32"),
                "--conntrack-max-per-core=0".to_string(),
                "--conntrack-tcp-timeout-established=0".to_string(),
                "--conntrack-tcp-timeout-close-wait=0".to_string(),
                "--v=1".to_string(),
            ],
            inputs.work_dir,
        )?;
        node.processes.push(kube_proxy);
        node.save_pids(&mut record)?;
        node.record = record;

        let nodes: kube::Api<Node> = kube::Api::all(client.clone());
        node.wait_for("the Node to become Ready", inputs.timeout, || async {
            nodes
                .get_opt(NODE_NAME)
                .await
                .ok()
                .flatten()
                .is_some_and(|node| is_ready(&node))
        })
        .await?;
        let healthz = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, proxy_healthz));
        node.wait_for("kube-proxy to sync its rules", inputs.timeout, || async {
            crate::probe::http_get(healthz, "/healthz")
                .await
                .is_ok_and(|(status, _)| status == 200)
        })
        .await?;
        progress(&format!(
            "node {NODE_NAME} Ready in {:.1}s (kubelet on {BRIDGE_IP}:{kubelet_port})",
            started.elapsed().as_secs_f64()
        ));
        node.start_cluster_dns(client, &coredns.reference, inputs.timeout)
            .await?;
        progress(&format!(
            "node {NODE_NAME} Ready with cluster DNS in {:.1}s",
            started.elapsed().as_secs_f64()
        ));
        Ok(node)
    }

    fn spawn(
        &self,
        name: &str,
        program: &Path,
        args: &[String],
        work_dir: &Path,
    ) -> Result<ManagedProcess, NodeError> {
        let log = work_dir.join("logs").join(format!("{name}.log"));
        ManagedProcess::spawn(name, program, args, &log, self.lifetime)
            .map_err(io_err(format!("starting {name}")))
    }

    fn save_pids(&self, record: &mut HostRecord) -> Result<(), NodeError> {
        record.pids = self.pids();
        record.save()
    }

    /// (name, pid) of containerd, kubelet and kube-proxy.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.processes
            .iter()
            .filter_map(|p| Some((p.name().to_string(), p.pid()?)))
            .collect()
    }

    /// Polls `ready` every 250 ms; fails early if a node process exits.
    async fn wait_for<F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut ready: F,
    ) -> Result<(), NodeError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if ready().await {
                return Ok(());
            }
            self.check_health()?;
            if Instant::now() > deadline {
                let last = self.processes.last();
                return Err(NodeError::Timeout {
                    what: format!("waited in vain for {what}"),
                    secs: timeout.as_secs(),
                    log: last.map(|p| p.log_path().to_path_buf()).unwrap_or_default(),
                    tail: last.map(|p| p.log_tail(30)).unwrap_or_default(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Any node process that has exited, with its log tail.
    pub fn check_health(&mut self) -> Result<(), NodeError> {
        for process in &mut self.processes {
            if let Some(status) = process.exit_status() {
                return Err(NodeError::Exited {
                    process: process.name().to_string(),
                    status,
                    log: process.log_path().to_path_buf(),
                    tail: process.log_tail(30),
                });
            }
        }
        Ok(())
    }

    /// Where the node's containerd listens (for `ctr --address`).
    pub fn containerd_address(&self) -> &Path {
        &self.record.containerd_address
    }

    /// Loads Docker images into the node's containerd.
    pub fn load_images(&self, references: &[&str]) -> Result<(), NodeError> {
        let ctr = find_program("ctr").unwrap_or_else(|| "ctr".into());
        let scratch = self.record.work_dir.join("node/containerd");
        crate::images::import_into_containerd(
            &crate::images::Docker::locate(),
            &ctr,
            &self.record.containerd_address,
            references,
            &scratch,
        )?;
        Ok(())
    }

    /// Stops the node and undoes everything it did to the host.
    pub fn shutdown(&mut self) {
        if self.cleaned {
            return;
        }
        self.cleaned = true;
        progress("stopping and cleaning up");
        for process in self.processes.iter_mut().rev() {
            process.stop(Duration::from_secs(10));
        }
        cleanup(&self.record);
    }

    /// Leaves the node running (detached mode); [`cleanup_host`] undoes it.
    pub fn detach(mut self) -> Vec<(String, u32)> {
        self.cleaned = true;
        let pids = self.pids();
        for process in std::mem::take(&mut self.processes) {
            process.release();
        }
        pids
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Tied {
            self.shutdown();
        }
    }
}

/// The containerd socket of a real node whose cluster work dir is `work_dir`.
pub fn containerd_address(work_dir: &Path) -> PathBuf {
    work_dir.join("node/containerd/containerd.sock")
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn free_port() -> Result<u16, NodeError> {
    crate::ports::free_port().map_err(io_err("finding a free port"))
}

#[cfg(test)]
mod tests {
    use super::cleanup::{parse_saved, unescape_mount_path};
    use super::*;

    #[test]
    fn saved_rules_jumping_to_node_chains_are_found() {
        let saved = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n:DOCKER - [0:0]\n-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n-A PREROUTING -j DOCKER\n-A KUBE-SERVICES -j RETURN\nCOMMIT\n";
        let (chains, jumps) = parse_saved(saved);
        assert_eq!(chains, ["KUBE-SERVICES", "CNI-HOSTPORT-DNAT"]);
        assert_eq!(
            jumps,
            [vec![
                "PREROUTING",
                "-m",
                "comment",
                "--comment",
                "kubernetes service portals",
                "-j",
                "KUBE-SERVICES"
            ]]
        );
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(
            unescape_mount_path("/tmp/a\\040b"),
            PathBuf::from("/tmp/a b")
        );
        assert_eq!(unescape_mount_path("/run/x"), PathBuf::from("/run/x"));
    }

    #[test]
    fn configs_name_the_work_dir() {
        let dir = Path::new("/tmp/w/node");
        let toml = containerd_config_toml(dir, "meridian/pause:abc");
        assert!(toml.contains("sandbox_image = \"docker.io/meridian/pause:abc\""));
        assert!(toml.contains("/tmp/w/node/containerd/containerd.sock"));
        let cni: serde_json::Value = serde_json::from_str(&cni_config(dir)).expect("json");
        assert_eq!(cni["plugins"][0]["bridge"], BRIDGE);
        let kubelet = kubelet_config(dir, Path::new("/s.sock"), 1, 2);
        assert!(kubelet.contains("failCgroupV1: false"));
        assert!(kubelet.contains("clusterDomain: cluster.local\nclusterDNS:\n- 10.0.0.10\n"));
    }
}
