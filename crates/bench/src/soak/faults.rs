//! The servers under test as restartable processes on fixed addresses, and
//! the faults the soak injects: kube-apiserver stopped and started; etcd
//! compacted and the apiserver restarted (so watches resume from a
//! compacted revision, get `410 Gone` and relist); the destination killed
//! (SIGKILL) and restarted on the same address; the policy controller
//! stopped for a while and restarted.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, bail};
use local_cluster::{Cluster, Lifetime, ManagedProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{common::wait_ready, stats::rss_bytes};

/// The kinds of fault, injected in this order, round robin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    ApiserverRestart,
    CompactionRelist,
    DestinationKill,
    PolicyControllerDown,
}

pub const FAULTS: [Fault; 4] = [
    Fault::ApiserverRestart,
    Fault::CompactionRelist,
    Fault::DestinationKill,
    Fault::PolicyControllerDown,
];

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::ApiserverRestart => "kube-apiserver stop/start",
            Fault::CompactionRelist => "etcd compaction + apiserver restart (410 Gone, relist)",
            Fault::DestinationKill => "destination SIGKILL + restart",
            Fault::PolicyControllerDown => "policy controller down, then restarted",
        })
    }
}

/// A server under test: always started with the same flags and addresses.
pub struct Server {
    pub name: String,
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    process: Option<ManagedProcess>,
    /// Restarts (not counting the first start).
    pub restarts: u32,
    /// RSS right after the soak's streams were opened.
    pub rss_start: Option<u64>,
}

impl Server {
    /// `bin --kubeconfig … --<grpc_flag>=<grpc> --admin-addr=<admin> extra…`.
    pub fn new(
        cluster: &Cluster,
        bin: &Path,
        grpc_flag: &str,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let name = bin
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "server".into());
        let grpc = crate::common::free_addr()?;
        let admin = crate::common::free_addr()?;
        let mut args = vec![
            format!("--kubeconfig={}", cluster.kubeconfig_path().display()),
            format!("--{grpc_flag}={grpc}"),
            format!("--admin-addr={admin}"),
            "--log-level=warn".to_string(),
        ];
        args.extend(extra.iter().cloned());
        Ok(Self {
            log: cluster.work_dir().join(format!("{name}.log")),
            name,
            bin: bin.to_path_buf(),
            args,
            grpc,
            admin,
            process: None,
            restarts: 0,
            rss_start: None,
        })
    }

    /// Starts the process and waits for `/ready`.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if self.process.is_some() {
            bail!("{} is already running", self.name);
        }
        let process =
            ManagedProcess::spawn(&self.name, &self.bin, &self.args, &self.log, Lifetime::Tied)
                .with_context(|| format!("starting {}", self.name))?;
        self.process = Some(process);
        wait_ready(&self.name, self.admin).await
    }

    /// Starts it again after a stop or a kill.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.restarts += 1;
        self.start().await
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop(Duration::from_secs(10));
        }
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

    /// The sum of a Prometheus counter family on `/metrics` (0 if absent).
    pub async fn metric_sum(&self, family: &str) -> f64 {
        let Ok((200, body)) = local_cluster::probe::http_get(self.admin, "/metrics").await else {
            return 0.0;
        };
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                l.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Compacts etcd at its current revision through its v3 JSON gateway.
/// Returns the revision.
pub async fn compact_etcd(etcd_url: &str) -> anyhow::Result<i64> {
    let addr = etcd_url
        .strip_prefix("http://")
        .context("etcd's URL is not http://")?;
    // Any key will do: the header carries the store's revision.
    let range = post(addr, "/v3/kv/range", r#"{"key":"AA=="}"#).await?;
    let value: serde_json::Value =
        serde_json::from_str(&range).with_context(|| format!("etcd range answer {range:?}"))?;
    let revision: i64 = value["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .or_else(|| value["header"]["revision"].as_i64())
        .with_context(|| format!("no revision in etcd's answer {range:?}"))?;
    let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
    post(addr, "/v3/kv/compaction", &body).await?;
    Ok(revision)
}

/// A minimal HTTP/1.1 POST (etcd's gateway on loopback); returns the body.
async fn post(addr: &str, path: &str, body: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to etcd at {addr}"))?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .context("etcd did not answer within 10s")??;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP answer from etcd: {text:?}"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("etcd {path}: {head}");
    }
    // The gateway may answer chunked; the JSON object is what we need.
    let body = match (rest.find('{'), rest.rfind('}')) {
        (Some(a), Some(b)) if a <= b => rest[a..=b].to_string(),
        _ => rest.to_string(),
    };
    Ok(body)
}
