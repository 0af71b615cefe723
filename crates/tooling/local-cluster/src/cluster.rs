//! Starting and stopping etcd, kube-apiserver and kube-controller-manager on
//! free loopback ports, with a kubeconfig for clients and `kubectl`; and, in
//! real-node mode, kube-scheduler and a real node (see [`crate::real_node`]).

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use base64::Engine as _;

use crate::{
    binaries::{BuildError, KubeBinaries},
    certs::{self, CertError, LocalCa},
    process::{self, Lifetime, ManagedProcess},
    real_node::{self, NodeError, RealNode},
};

/// Errors while starting or talking to the local control plane.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{process} exited early ({status}); last log lines from {log}:\n{tail}")]
    Exited {
        process: String,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{process} was not ready after {secs}s; last log lines from {log}:\n{tail}")]
    NotReady {
        process: String,
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error("kubeconfig error: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("Kubernetes client error: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("invalid cluster state file {path}: {source}")]
    State {
        path: PathBuf,
        source: serde_json::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let context = context.into();
    move |source| ClusterError::Io { context, source }
}

/// How to start a cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Where certificates, etcd data, logs and the kubeconfig go.
    pub work_dir: PathBuf,
    /// Tied to this thread (tests, `xtask up`) or detached (`xtask cluster up`).
    pub lifetime: Lifetime,
    /// How long to wait for each component to become ready.
    pub start_timeout: Duration,
    /// Run a real node (containerd, kubelet, kube-proxy) and kube-scheduler,
    /// with the ServiceAccount machinery on and the apiserver reachable
    /// from pods. Off by default: fake Node, pods made Ready by tests.
    pub real_node: bool,
    /// Docker images to load into the real node's containerd at start.
    pub node_images: Vec<String>,
    /// kube-apiserver feature gates to set (e.g. `WatchList=false`, as in
    /// Kubernetes 1.31 and 1.33 by default); none by default.
    pub apiserver_feature_gates: Vec<String>,
}

impl ClusterOptions {
    pub fn new(work_dir: impl Into<PathBuf>, lifetime: Lifetime) -> Self {
        Self {
            work_dir: work_dir.into(),
            lifetime,
            start_timeout: Duration::from_secs(120),
            real_node: false,
            node_images: Vec::new(),
            apiserver_feature_gates: Vec::new(),
        }
    }
}

/// What a detached cluster leaves behind so that `down` and `env` can find it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ClusterState {
    pub work_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub apiserver_url: String,
    pub kubernetes_version: String,
    /// (name, pid) of each running component.
    pub pids: Vec<(String, u32)>,
    /// Whether a real node runs (its host changes are undone by `down`).
    #[serde(default)]
    pub real_node: bool,
    /// The process that owns a tied cluster (`cluster up --real-node`):
    /// `down` asks it to stop, and it cleans up.
    #[serde(default)]
    pub owner_pid: Option<u32>,
}

impl ClusterState {
    pub const FILE: &'static str = "cluster.json";

    pub fn load(work_dir: &Path) -> Result<Option<Self>, ClusterError> {
        let path = work_dir.join(Self::FILE);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| ClusterError::State { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(format!("reading {}", path.display()))(e)),
        }
    }

    /// Writes `cluster.json` into the work dir.
    pub fn save(&self) -> Result<(), ClusterError> {
        let path = self.work_dir.join(Self::FILE);
        let text = serde_json::to_string_pretty(self).map_err(|source| ClusterError::State {
            path: path.clone(),
            source,
        })?;
        fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))
    }

    /// Stops every recorded process (SIGTERM, then SIGKILL) in reverse start order.
    pub fn stop_all(&self) {
        for (_, pid) in self.pids.iter().rev() {
            process::terminate(*pid, Duration::from_secs(10));
        }
    }
}

/// A running local control plane.
pub struct Cluster {
    // Drop order: the node first, then scheduler, controller manager,
    // apiserver, etcd.
    node: Option<RealNode>,
    scheduler: Option<ManagedProcess>,
    options: ClusterOptions,
    binaries: KubeBinaries,
    etcd_port: u16,
    apiserver_port: u16,
    /// The address the apiserver binds: 127.0.0.1, or the node's bridge.
    host: IpAddr,
    ca: LocalCa,
    ca_pem: String,
    token: String,
    kubeconfig: PathBuf,
    kcm: Option<ManagedProcess>,
    apiserver: Option<ManagedProcess>,
    etcd: Option<ManagedProcess>,
}

impl Cluster {
    /// Builds the binaries if needed, then starts etcd, kube-apiserver and
    /// kube-controller-manager and waits until the apiserver is ready.
    pub async fn start(options: ClusterOptions) -> Result<Self, ClusterError> {
        let binaries = tokio::task::spawn_blocking(|| {
            KubeBinaries::ensure(&|line| eprintln!("[local-cluster] {line}"))
        })
        .await
        .map_err(|e| io_err("joining the build task")(std::io::Error::other(e)))??;
        Self::start_with(options, binaries).await
    }

    /// Starts the control plane from already-built binaries.
    pub async fn start_with(
        options: ClusterOptions,
        binaries: KubeBinaries,
    ) -> Result<Self, ClusterError> {
        let host_record = if options.real_node {
            fs::create_dir_all(&options.work_dir)
                .map_err(io_err(format!("creating {}", options.work_dir.display())))?;
            Some(real_node::prepare_host(&options.work_dir, &binaries)?)
        } else {
            None
        };
        let prepared = host_record.is_some();
        let result = Self::start_inner(options, binaries, host_record).await;
        if prepared && result.is_err() {
            // Undo the bridge, rules and sysctls of a node that never came up.
            let _ = real_node::cleanup_host(true);
        }
        result
    }

    async fn start_inner(
        options: ClusterOptions,
        binaries: KubeBinaries,
        host_record: Option<real_node::HostRecord>,
    ) -> Result<Self, ClusterError> {
        let dir = &options.work_dir;
        for sub in ["pki", "etcd", "logs", "apiserver-certs"] {
            fs::create_dir_all(dir.join(sub))
                .map_err(io_err(format!("creating {}", dir.join(sub).display())))?;
        }
        let host = if options.real_node {
            IpAddr::V4(real_node::BRIDGE_IP)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        let ca = LocalCa::new("meridian-local-ca")?;
        let serving = if options.real_node {
            ca.issue_serving_cert_for(
                &[
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                    "localhost",
                ],
                &[
                    host,
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V4(real_node::KUBERNETES_SERVICE_IP),
                ],
            )?
        } else {
            ca.issue_serving_cert(&["kubernetes", "kubernetes.default.svc"])?
        };
        let (sa_key, sa_pub) = certs::key_pair_pem()?;
        let token = random_token()?;
        let write = |name: &str, contents: &str| {
            let path = dir.join("pki").join(name);
            fs::write(&path, contents).map_err(io_err(format!("writing {}", path.display())))
        };
        write("ca.crt", ca.cert_pem())?;
        write("apiserver.crt", &serving.cert_pem)?;
        write("apiserver.key", &serving.key_pem)?;
        write("sa.key", &sa_key)?;
        write("sa.pub", &sa_pub)?;
        write(
            "tokens.csv",
            &format!("{token},admin,admin-uid,system:masters\n"),
        )?;
        if options.real_node {
            let client =
                ca.issue_client_cert("kube-apiserver-kubelet-client", &["system:masters"])?;
            write("apiserver-kubelet-client.crt", &client.cert_pem)?;
            write("apiserver-kubelet-client.key", &client.key_pem)?;
        }

        let etcd_port = free_port()?;
        let apiserver_port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        let mut cluster = Cluster {
            node: None,
            scheduler: None,
            options,
            binaries,
            etcd_port,
            apiserver_port,
            host,
            ca_pem: ca.cert_pem().to_string(),
            ca,
            token,
            kubeconfig,
            kcm: None,
            apiserver: None,
            etcd: None,
        };
        fs::write(&cluster.kubeconfig, cluster.kubeconfig_yaml(apiserver_port))
            .map_err(io_err(format!("writing {}", cluster.kubeconfig.display())))?;
        cluster.start_etcd().await?;
        cluster.start_apiserver().await?;
        cluster.start_controller_manager().await?;
        if let Some(record) = host_record {
            cluster.start_scheduler().await?;
            let client = cluster.client()?;
            let inputs = real_node::NodeInputs {
                work_dir: &cluster.options.work_dir,
                binaries: &cluster.binaries,
                ca: &cluster.ca,
                apiserver_url: cluster.apiserver_url(),
                lifetime: cluster.options.lifetime,
                timeout: cluster.options.start_timeout,
                images: cluster.options.node_images.clone(),
            };
            let node = RealNode::start(record, inputs, &client).await?;
            cluster.node = Some(node);
        }
        if cluster.options.lifetime == Lifetime::Detached {
            cluster.state().save()?;
        }
        Ok(cluster)
    }

    async fn start_etcd(&mut self) -> Result<(), ClusterError> {
        let peer_port = free_port()?;
        let dir = &self.options.work_dir;
        let client_url = format!("http://127.0.0.1:{}", self.etcd_port);
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let args = vec![
            "--name=meridian".to_string(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=meridian={peer_url}"),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ];
        let mut etcd = self.spawn("etcd", &self.binaries.etcd(), &args)?;
        let deadline = Instant::now() + self.options.start_timeout;
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.etcd_port)).is_ok() {
                break;
            }
            check_alive(&mut etcd)?;
            if Instant::now() > deadline {
                return Err(not_ready(&etcd, self.options.start_timeout));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.etcd = Some(etcd);
        Ok(())
    }

    /// Starts kube-apiserver (again, after [`Cluster::stop_apiserver`]) on the
    /// same port with the same etcd, and waits for `/readyz`.
    pub async fn start_apiserver(&mut self) -> Result<(), ClusterError> {
        let apiserver = self.spawn_apiserver("kube-apiserver", self.apiserver_port)?;
        let apiserver = self
            .wait_apiserver_ready(apiserver, self.apiserver_port)
            .await?;
        self.apiserver = Some(apiserver);
        Ok(())
    }

    /// Starts a second kube-apiserver on another port, backed by the same
    /// etcd (as in an HA control plane). Returns it with a client config;
    /// dropping the handle stops it.
    pub async fn start_additional_apiserver(
        &self,
    ) -> Result<(ManagedProcess, kube::Config), ClusterError> {
        let port = free_port()?;
        let name = format!("kube-apiserver-{port}");
        let apiserver = self.spawn_apiserver(&name, port)?;
        let apiserver = self.wait_apiserver_ready(apiserver, port).await?;
        Ok((apiserver, self.kube_config_for_port(port)?))
    }

    fn spawn_apiserver(&self, name: &str, port: u16) -> Result<ManagedProcess, ClusterError> {
        let dir = &self.options.work_dir;
        let pki = dir.join("pki");
        let p = |name: &str| pki.join(name).display().to_string();
        let host = self.host;
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_port),
            format!("--secure-port={port}"),
            format!("--bind-address={host}"),
            format!("--advertise-address={host}"),
            format!("--cert-dir={}", dir.join("apiserver-certs").display()),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--token-auth-file={}", p("tokens.csv")),
            format!("--service-cluster-ip-range={}", real_node::SERVICE_CIDR),
            "--allow-privileged=true".to_string(),
            format!(
                "--service-account-issuer=https://{host}:{}/",
                self.apiserver_port
            ),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--v=1".to_string(),
        ];
        if self.options.real_node {
            // Real nodes: kubelets and kube-proxy authenticate with client
            // certificates, the Node authorizer scopes kubelets, the
            // ServiceAccount admission plugin gives pods their tokens, and
            // the lease endpoint reconciler publishes this apiserver as the
            // `kubernetes` Service's endpoint.
            args.extend([
                "--authorization-mode=Node,RBAC".to_string(),
                format!("--client-ca-file={}", p("ca.crt")),
                format!(
                    "--kubelet-client-certificate={}",
                    p("apiserver-kubelet-client.crt")
                ),
                format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
                format!("--kubelet-certificate-authority={}", p("ca.crt")),
                "--kubelet-preferred-address-types=InternalIP,Hostname".to_string(),
                "--endpoint-reconciler-type=lease".to_string(),
            ]);
        } else {
            args.extend([
                "--authorization-mode=RBAC".to_string(),
                "--disable-admission-plugins=ServiceAccount".to_string(),
                "--endpoint-reconciler-type=none".to_string(),
            ]);
        }
        if !self.options.apiserver_feature_gates.is_empty() {
            let gates = self.options.apiserver_feature_gates.join(",");
            args.push(format!("--feature-gates={gates}"));
        }
        self.spawn(name, &self.binaries.kube_apiserver(), &args)
    }

    /// Stops kube-apiserver (SIGTERM) while etcd and the controller manager
    /// keep running: clients see the API go away, as in a control-plane outage.
    pub fn stop_apiserver(&mut self) {
        if let Some(mut apiserver) = self.apiserver.take() {
            apiserver.stop(Duration::from_secs(10));
        }
    }

    async fn wait_apiserver_ready(
        &self,
        mut apiserver: ManagedProcess,
        port: u16,
    ) -> Result<ManagedProcess, ClusterError> {
        let client = kube::Client::try_from(self.kube_config_for_port(port)?)?;
        let deadline = Instant::now() + self.options.start_timeout;
        loop {
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| io_err("building /readyz request")(std::io::Error::other(e)))?;
            if let Ok(body) = client.request_text(request).await
                && body.trim() == "ok"
            {
                return Ok(apiserver);
            }
            check_alive(&mut apiserver)?;
            if Instant::now() > deadline {
                return Err(not_ready(&apiserver, self.options.start_timeout));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn start_controller_manager(&mut self) -> Result<(), ClusterError> {
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".to_string(),
            "--secure-port=0".to_string(),
            "--use-service-account-credentials=false".to_string(),
            "--v=1".to_string(),
        ];
        if self.options.real_node {
            // Every default controller (Deployments, ReplicaSets, node
            // lifecycle, ServiceAccounts and their tokens, the
            // kube-root-ca.crt publisher, …).
            let pki = self.options.work_dir.join("pki");
            args.extend([
                "--controllers=*".to_string(),
                format!("--root-ca-file={}", pki.join("ca.crt").display()),
                format!(
                    "--service-account-private-key-file={}",
                    pki.join("sa.key").display()
                ),
                format!("--cluster-cidr={}", real_node::POD_CIDR),
            ]);
        } else {
            args.push("--controllers=endpointslice-controller,garbage-collector-controller,namespace-controller".to_string());
        }
        let mut kcm = self.spawn(
            "kube-controller-manager",
            &self.binaries.kube_controller_manager(),
            &args,
        )?;
        // It has no health endpoint with --secure-port=0; give it a moment to
        // fail fast on bad flags.
        tokio::time::sleep(Duration::from_millis(500)).await;
        check_alive(&mut kcm)?;
        self.kcm = Some(kcm);
        Ok(())
    }

    async fn start_scheduler(&mut self) -> Result<(), ClusterError> {
        let args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".to_string(),
            "--secure-port=0".to_string(),
            "--v=1".to_string(),
        ];
        let mut scheduler = self.spawn("kube-scheduler", &self.binaries.kube_scheduler(), &args)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        check_alive(&mut scheduler)?;
        self.scheduler = Some(scheduler);
        Ok(())
    }

    /// The real node, in real-node mode.
    pub fn real_node(&self) -> Option<&RealNode> {
        self.node.as_ref()
    }

    /// Stops the real node (if any) and undoes its changes to the host, then
    /// the control plane. Dropping a tied cluster does the same.
    pub fn shutdown(mut self) {
        if let Some(mut node) = self.node.take() {
            node.shutdown();
        }
    }

    fn spawn(
        &self,
        name: &str,
        program: &Path,
        args: &[String],
    ) -> Result<ManagedProcess, ClusterError> {
        let log = self
            .options
            .work_dir
            .join("logs")
            .join(format!("{name}.log"));
        ManagedProcess::spawn(name, program, args, &log, self.options.lifetime)
            .map_err(io_err(format!("starting {name}")))
    }

    /// Path of the kubeconfig (admin credentials).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The apiserver URL (on 127.0.0.1, or on the node's bridge address in
    /// real-node mode).
    pub fn apiserver_url(&self) -> String {
        format!("https://{}:{}", self.host, self.apiserver_port)
    }

    /// etcd's client URL (plain HTTP on 127.0.0.1; its v3 JSON gateway
    /// answers `POST /v3/kv/...`), e.g. to force a compaction.
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// The kube-apiserver's serving CA (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The pinned Kubernetes version (what `/version` reports).
    pub fn kubernetes_version(&self) -> &str {
        &self.binaries.pins.kubernetes
    }

    /// The binaries this cluster runs (and the matching kubectl).
    pub fn binaries(&self) -> &KubeBinaries {
        &self.binaries
    }

    /// Where logs, certificates and data live.
    pub fn work_dir(&self) -> &Path {
        &self.options.work_dir
    }

    /// A client configuration with admin credentials.
    pub fn kube_config(&self) -> Result<kube::Config, ClusterError> {
        self.kube_config_for_port(self.apiserver_port)
    }

    fn kube_config_for_port(&self, port: u16) -> Result<kube::Config, ClusterError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml(port))?;
        config_from_inline_kubeconfig(kubeconfig)
    }

    /// A client with admin credentials. Create one per tokio runtime.
    pub fn client(&self) -> Result<kube::Client, ClusterError> {
        Ok(kube::Client::try_from(self.kube_config()?)?)
    }

    /// A snapshot of what is running, for `xtask cluster down|env`.
    pub fn state(&self) -> ClusterState {
        let mut pids: Vec<(String, u32)> =
            [&self.etcd, &self.apiserver, &self.kcm, &self.scheduler]
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p.name().to_string(), p.pid()?)))
                .collect();
        if let Some(node) = &self.node {
            pids.extend(node.pids());
        }
        ClusterState {
            work_dir: self.options.work_dir.clone(),
            kubeconfig: self.kubeconfig.clone(),
            apiserver_url: self.apiserver_url(),
            kubernetes_version: self.binaries.pins.kubernetes.clone(),
            pids,
            real_node: self.node.is_some(),
            owner_pid: None,
        }
    }

    /// Leaves a detached cluster running and returns its state.
    pub fn detach(mut self) -> ClusterState {
        let state = self.state();
        if let Some(node) = self.node.take() {
            node.detach();
        }
        for process in [
            self.scheduler.take(),
            self.kcm.take(),
            self.apiserver.take(),
            self.etcd.take(),
        ]
        .into_iter()
        .flatten()
        {
            process.release();
        }
        state
    }

    /// Any component that has exited unexpectedly, with its log tail.
    pub fn check_health(&mut self) -> Result<(), ClusterError> {
        for process in [
            &mut self.etcd,
            &mut self.apiserver,
            &mut self.kcm,
            &mut self.scheduler,
        ]
        .into_iter()
        .flatten()
        {
            check_alive(process)?;
        }
        if let Some(node) = &mut self.node {
            node.check_health()?;
        }
        Ok(())
    }

    fn kubeconfig_yaml(&self, port: u16) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: meridian-local\n  cluster:\n    server: https://{host}:{port}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: meridian-local\n  context:\n    cluster: meridian-local\n    user: admin\ncurrent-context: meridian-local\n",
            token = self.token,
            host = self.host,
        )
    }
}

/// Builds a `kube::Config` from a kubeconfig without I/O: kube's async
/// constructor only reads files for file-based credentials, which ours lacks.
fn config_from_inline_kubeconfig(
    kubeconfig: kube::config::Kubeconfig,
) -> Result<kube::Config, ClusterError> {
    let options = kube::config::KubeConfigOptions::default();
    let future = kube::Config::from_custom_kubeconfig(kubeconfig, &options);
    // The future completes without awaiting anything for inline credentials;
    // poll it once on a no-op waker.
    let mut future = std::pin::pin!(future);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(result) => Ok(result?),
        std::task::Poll::Pending => Err(io_err("building kube config")(std::io::Error::other(
            "kubeconfig loading unexpectedly needs I/O",
        ))),
    }
}

fn check_alive(process: &mut ManagedProcess) -> Result<(), ClusterError> {
    match process.exit_status() {
        None => Ok(()),
        Some(status) => Err(ClusterError::Exited {
            process: process.name().to_string(),
            status,
            log: process.log_path().to_path_buf(),
            tail: process.log_tail(30),
        }),
    }
}

fn not_ready(process: &ManagedProcess, timeout: Duration) -> ClusterError {
    ClusterError::NotReady {
        process: process.name().to_string(),
        secs: timeout.as_secs(),
        log: process.log_path().to_path_buf(),
        tail: process.log_tail(30),
    }
}

/// A free port on 127.0.0.1 for a process of the control plane (see
/// [`crate::ports`]).
fn free_port() -> Result<u16, ClusterError> {
    crate::ports::free_port().map_err(io_err("finding a free port"))
}

fn random_token() -> Result<String, ClusterError> {
    let mut bytes = [0u8; 16];
    let mut urandom = fs::File::open("/dev/urandom").map_err(io_err("opening /dev/urandom"))?;
    std::io::Read::read_exact(&mut urandom, &mut bytes).map_err(io_err("reading /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
