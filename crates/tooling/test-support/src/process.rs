//! Meridian binaries under test, run as real processes: started with a
//! kubeconfig for the shared cluster, awaited on their admin `/ready`, and
//! killed when the handle drops (also when the test panics). The
//! destination and the policy controller get their localhost listeners
//! (introspection, and the policy controller's workload-ports feed) on free
//! ports unless the arguments name them, so that processes of parallel
//! tests never race for the fixed defaults.

pub use local_cluster::probe::http_get;
use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A free address on 127.0.0.1 for a process a test starts, outside the
/// ephemeral range so no outgoing connection takes it first (see
/// [`local_cluster::ports`]).
pub fn free_addr() -> SocketAddr {
    let port = local_cluster::free_port().expect("finding a free port");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Runs `program args…` until it exits, for a process meant to end
/// quickly (e.g. on a kubeconfig that does not exist): its (stdout,
/// stderr). Panics if it still runs after 30 s (it is killed first).
pub fn run_until_exit(program: &Path, args: &[String]) -> (String, String) {
    let child = Command::new(program)
        .args(args)
        .env_remove("MERIDIAN_LOG")
        .env_remove("MERIDIAN_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(out)) => (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Ok(Err(e)) => panic!("waiting for {}: {e}", program.display()),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid]).status();
            panic!("{} still runs after 30 s", program.display());
        }
    }
}

/// Forwards every TCP connection made to `listen` to `upstream` (e.g. an
/// API server appearing on the address a process was told to use), until
/// the returned task is aborted.
pub async fn forward(listen: SocketAddr, upstream: SocketAddr) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .unwrap_or_else(|e| panic!("binding {listen}: {e}"));
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

/// A running binary under test.
pub struct ServerProcess {
    name: String,
    child: Option<Child>,
    /// Its admin server (for `/ready` and `/metrics`).
    pub admin_addr: SocketAddr,
    /// Its introspection listener (`/streams`, `/targets`, `/audit`), for
    /// the destination and the policy controller.
    pub introspection_addr: Option<SocketAddr>,
    /// The policy controller's workload-ports feed (the destination's
    /// `--policy-addr`).
    pub workload_ports_addr: Option<SocketAddr>,
}

/// The value of `--flag=value` or `--flag value` in `args`.
fn flag_value(args: &[String], flag: &str) -> Option<SocketAddr> {
    let prefix = format!("--{flag}=");
    args.iter().enumerate().find_map(|(i, arg)| {
        if let Some(value) = arg.strip_prefix(&prefix) {
            value.parse().ok()
        } else if arg == &format!("--{flag}") {
            args.get(i + 1)?.parse().ok()
        } else {
            None
        }
    })
}

/// `flag`'s address in `args`, else a free loopback one appended to them.
fn listener_flag(args: &mut Vec<String>, flag: &str) -> SocketAddr {
    flag_value(args, flag).unwrap_or_else(|| {
        let addr = free_addr();
        args.push(format!("--{flag}={addr}"));
        addr
    })
}

impl ServerProcess {
    /// Starts `program args…` (logs go to the test's output) and waits up to
    /// 60 s for `http://admin_addr/ready` to answer 200.
    pub async fn start(program: &Path, args: &[String], admin_addr: SocketAddr) -> Self {
        let mut process = Self::spawn(program, args, admin_addr);
        process.wait_ready().await;
        process
    }

    /// Starts `program args…` without waiting for it to be ready (for tests
    /// of a process that must not be ready yet).
    pub fn spawn(program: &Path, args: &[String], admin_addr: SocketAddr) -> Self {
        Self::spawn_logging(program, args, admin_addr, None)
    }

    /// [`Self::start`] with extra environment variables (e.g. `HOSTNAME`,
    /// which a pod's containers get and a test process may not).
    pub async fn start_with_env(
        program: &Path,
        args: &[String],
        admin_addr: SocketAddr,
        envs: &[(&str, &str)],
    ) -> Self {
        let mut process = Self::spawn_inner(program, args, admin_addr, None, envs);
        process.wait_ready().await;
        process
    }

    /// [`Self::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        program: &Path,
        args: &[String],
        admin_addr: SocketAddr,
        envs: &[(&str, &str)],
    ) -> Self {
        Self::spawn_inner(program, args, admin_addr, None, envs)
    }

    /// Waits up to 60 s for `/live` to answer 200 (a process that serves
    /// its admin port but must not be ready); panics otherwise or if the
    /// process exits meanwhile.
    pub async fn wait_live(&mut self) {
        self.wait_ok("/live", "live").await;
    }

    /// [`Self::spawn`], its log lines (stdout and stderr, at `warn` unless
    /// `MERIDIAN_LOG` says otherwise) written to `log` if given, for tests
    /// that read them.
    pub fn spawn_logging(
        program: &Path,
        args: &[String],
        admin_addr: SocketAddr,
        log: Option<&Path>,
    ) -> Self {
        Self::spawn_inner(program, args, admin_addr, log, &[])
    }

    fn spawn_inner(
        program: &Path,
        args: &[String],
        admin_addr: SocketAddr,
        log: Option<&Path>,
        envs: &[(&str, &str)],
    ) -> Self {
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut args = args.to_vec();
        let introspection_addr = matches!(name.as_str(), "destination" | "policy-controller")
            .then(|| listener_flag(&mut args, "introspection-addr"));
        let workload_ports_addr =
            (name == "policy-controller").then(|| listener_flag(&mut args, "workload-ports-addr"));
        let mut command = Command::new(program);
        command
            .args(&args)
            // A pod's HOSTNAME turns on the destination's EndpointSlice
            // writer, which writes for every namespace: only the tests that
            // ask for it (one at a time) get one.
            .env_remove("HOSTNAME")
            .env(
                "MERIDIAN_LOG",
                std::env::var("MERIDIAN_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .envs(envs.iter().copied())
            .stdin(Stdio::null());
        if let Some(log) = log {
            let file = std::fs::File::create(log)
                .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
            let err = file.try_clone().expect("cloning the log file");
            command.stdout(file).stderr(err);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        Self {
            name,
            child: Some(child),
            admin_addr,
            introspection_addr,
            workload_ports_addr,
        }
    }

    /// Whether the process is still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Waits up to 60 s for `/ready` to answer 200; panics otherwise or if
    /// the process exits meanwhile.
    pub async fn wait_ready(&mut self) {
        self.wait_ok("/ready", "ready").await;
    }

    /// Waits up to 60 s for the admin server's `path` to answer 200.
    async fn wait_ok(&mut self, path: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("{} exited during start-up: {status}", self.name);
            }
            match http_get(self.admin_addr, path).await {
                Ok((200, _)) => return,
                Ok((status, body)) => last = format!("{status} {body}"),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{} not {what} after 60s: {last}", self.name);
    }

    /// GET a path of the admin server: (status, body).
    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        http_get(self.admin_addr, path)
            .await
            .unwrap_or_else(|e| panic!("GET {path} on {}: {e}", self.name))
    }

    /// GET a path of the introspection listener: (status, body).
    pub async fn introspection_get(&self, path: &str) -> (u16, String) {
        let addr = self
            .introspection_addr
            .unwrap_or_else(|| panic!("{} has no introspection listener", self.name));
        http_get(addr, path)
            .await
            .unwrap_or_else(|e| panic!("GET {path} on {}: {e}", self.name))
    }

    /// Asks the process to stop (SIGTERM, as the kubelet does) and waits up
    /// to `grace` for it to exit; returns whether it exited successfully.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let Ok(pid) = i32::try_from(child.id()) else {
            return false;
        };
        // The `kill` command: the workspace denies `unsafe`, which libc's kill needs.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the admin server at `admin` answers `/ready` with 503 and a
/// second line saying the API server is unreachable; returns the body.
pub async fn wait_api_server_unreachable(admin: SocketAddr, timeout: Duration) -> String {
    crate::eventually(
        "/ready to say the API server is unreachable",
        timeout,
        || async {
            match http_get(admin, "/ready").await {
                Ok((503, body))
                    if body
                        .lines()
                        .nth(1)
                        .is_some_and(|l| l.starts_with("API server unreachable: ")) =>
                {
                    Ok(body)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}
