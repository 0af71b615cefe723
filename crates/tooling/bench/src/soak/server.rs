//! One server process under test (a destination or a policy controller of
//! one replica), always started with the same flags, addresses and
//! `HOSTNAME` (the replica's pod name, its Lease claimant), its log
//! appended to one file across restarts. Records when it was last killed
//! or stopped, so that the Lease check can close a leadership the process
//! never logged the end of.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use anyhow::{Context, bail};
use local_cluster::{Cluster, Lifetime, ManagedProcess};

use crate::{common::wait_ready, stats::rss_bytes};

/// A server under test.
pub struct Server {
    /// `destination-0`, `policy-controller-1`, ...
    pub name: String,
    bin: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    pub log: PathBuf,
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    process: Option<ManagedProcess>,
    /// Restarts (not counting the first start).
    pub restarts: u32,
    /// RSS right after the soak's streams were opened.
    pub rss_start: Option<u64>,
    /// When the process was SIGKILLed (it logs nothing more).
    pub killed_at: Vec<SystemTime>,
}

impl Server {
    /// `bin --kubeconfig … --<grpc_flag>=<grpc> --admin-addr=<admin>
    /// --log-level=<log_level> --log-format=json extra…
    /// [--introspection-addr=… --workload-ports-addr=…]` with `HOSTNAME` set to `hostname`, logging
    /// to `<name>.log`; every address on loopback address `ip` (its
    /// replica's, as a pod's IP).
    pub fn new(
        cluster: &Cluster,
        bin: &Path,
        (name, hostname, ip): (&str, &str, Ipv4Addr),
        grpc_flag: &str,
        log_level: &str,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let grpc = crate::common::free_addr_on(ip)?;
        let admin = crate::common::free_addr_on(ip)?;
        let mut args = vec![
            format!("--kubeconfig={}", cluster.kubeconfig_path().display()),
            format!("--{grpc_flag}={grpc}"),
            format!("--admin-addr={admin}"),
            format!("--log-level={log_level}"),
            "--log-format=json".to_string(),
        ];
        args.extend(extra.iter().cloned());
        // Its localhost listeners on its replica's address too: the fixed
        // defaults would be shared by every replica.
        let help = crate::common::supported_flags(bin);
        for flag in ["--introspection-addr", "--workload-ports-addr"] {
            if help.contains(flag) && !extra.iter().any(|a| a.starts_with(flag)) {
                args.push(format!("{flag}={}", crate::common::free_addr_on(ip)?));
            }
        }
        Ok(Self {
            log: cluster.work_dir().join(format!("{name}.log")),
            name: name.to_string(),
            bin: bin.to_path_buf(),
            args,
            env: vec![("HOSTNAME".to_string(), hostname.to_string())],
            grpc,
            admin,
            process: None,
            restarts: 0,
            rss_start: None,
            killed_at: Vec::new(),
        })
    }

    /// Starts the process and waits for `/ready`.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if self.process.is_some() {
            bail!("{} is already running", self.name);
        }
        let process = ManagedProcess::spawn_with_env(
            &self.name,
            &self.bin,
            &self.args,
            &self.env,
            &self.log,
            Lifetime::Tied,
        )
        .with_context(|| format!("starting {}", self.name))?;
        self.process = Some(process);
        // Not ready yet, or gone: a process that exited is named at once,
        // with why, rather than waited on.
        let name = self.name.clone();
        tokio::select! {
            ready = wait_ready(&name, self.admin) => ready,
            exited = self.wait_exit() => {
                self.process = None;
                bail!("not ready: {exited}")
            }
        }
    }

    /// Resolves once the process has exited, saying why (see [`Self::exited`]).
    async fn wait_exit(&mut self) -> String {
        loop {
            if let Some(exited) = self.exited() {
                return exited;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Starts it again after a stop or a kill.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.restarts += 1;
        self.start().await
    }

    /// Whether the process is running (started and not stopped or killed).
    pub fn running(&self) -> bool {
        self.process.is_some()
    }

    /// SIGKILL, as a crash or an OOM kill would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
            self.killed_at.push(SystemTime::now());
        }
    }

    /// SIGTERM (a graceful shutdown, as the kubelet stops a container),
    /// then SIGKILL after `grace`; waits without blocking the runtime.
    pub async fn stop(&mut self, grace: Duration) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        if let Some(pid) = process.pid() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
            let deadline = tokio::time::Instant::now() + grace;
            while process.exit_status().is_none() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if process.exit_status().is_none() {
                self.killed_at.push(SystemTime::now());
            }
        }
        // Reaps it (SIGKILL first if it is still running).
        process.kill();
    }

    /// The process id, if running.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref()?.pid()
    }

    /// Resident memory now, if running.
    pub fn rss(&self) -> Option<u64> {
        rss_bytes(self.process.as_ref()?.pid()?)
    }

    /// Whether the process exited on its own.
    pub fn exited(&mut self) -> Option<String> {
        let process = self.process.as_mut()?;
        let status = process.exit_status()?;
        Some(format!(
            "{} exited ({status}); last log lines:\n{}",
            self.name,
            process.log_tail(20)
        ))
    }

    /// The sum of a Prometheus family on `/metrics` (`None` if it cannot
    /// be read).
    pub async fn metric(&self, family: &str) -> Option<f64> {
        let Ok((200, body)) = local_cluster::probe::http_get(self.admin, "/metrics").await else {
            return None;
        };
        Some(metric_sum(&body, family))
    }

    /// [`Self::metric`], 0 when unreadable.
    pub async fn metric_sum(&self, family: &str) -> f64 {
        self.metric(family).await.unwrap_or_default()
    }
}

/// The sum of the samples of `family` in a Prometheus text exposition.
pub fn metric_sum(body: &str, family: &str) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_summed_by_exact_name() {
        let body = "# HELP x\nwrites_total{op=\"create\"} 2\nwrites_total{op=\"delete\"} 1\nwrites_total_other 7\nleader 1\n";
        assert_eq!(metric_sum(body, "writes_total"), 3.0);
        assert_eq!(metric_sum(body, "leader"), 1.0);
        assert_eq!(metric_sum(body, "absent"), 0.0);
    }
}
