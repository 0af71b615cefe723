//! The faults the soak injects, each kind in turn: kube-apiserver stopped
//! and started; etcd compacted and the apiserver restarted (so watches
//! resume from a compacted revision, get `410 Gone` and relist); one
//! replica's destination killed (SIGKILL) and restarted on the same
//! address; one replica's policy controller stopped for a while and
//! restarted; and, with several replicas, a whole replica SIGKILLed under
//! load (its clients move to the others), every replica restarted one
//! after another (a rolling update), and the holders of the two writers'
//! Leases SIGKILLed (the other replicas take over). How each is injected
//! is [`super::inject`].

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The kinds of fault, injected in this order, round robin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    ApiserverRestart,
    CompactionRelist,
    DestinationKill,
    PolicyControllerDown,
    ReplicaKill,
    RollingRestart,
    LeaseHoldersKill,
}

/// Every kind, in order.
pub const FAULTS: [Fault; 7] = [
    Fault::ApiserverRestart,
    Fault::CompactionRelist,
    Fault::DestinationKill,
    Fault::PolicyControllerDown,
    Fault::ReplicaKill,
    Fault::RollingRestart,
    Fault::LeaseHoldersKill,
];

/// The kinds a run with `replicas` replicas injects (the last three need
/// another replica to move to).
pub fn kinds(replicas: usize) -> &'static [Fault] {
    if replicas > 1 { &FAULTS } else { &FAULTS[..4] }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::ApiserverRestart => "kube-apiserver stop/start",
            Fault::CompactionRelist => "etcd compaction + apiserver restart (410 Gone, relist)",
            Fault::DestinationKill => "destination SIGKILL + restart",
            Fault::PolicyControllerDown => "policy controller down, then restarted",
            Fault::ReplicaKill => "replica SIGKILLed under load, clients move, then back",
            Fault::RollingRestart => "rolling restart of every replica",
            Fault::LeaseHoldersKill => "both writers' Lease holders SIGKILLed, others take over",
        })
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
