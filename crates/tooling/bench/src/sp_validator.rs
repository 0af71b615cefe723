//! `meridian-bench sp-validator`: AdmissionReviews over TLS against an
//! `sp-validator` process, at a fixed concurrency (one keep-alive HTTP/1.1
//! connection per concurrent client, as the apiserver's webhook client
//! keeps connections). Prints reviews per second and p50/p99 latency.
//! Nine in ten reviews carry a valid ServiceProfile, one in ten an invalid one.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use local_cluster::{Lifetime, LocalCa, ManagedProcess};
use tokio::net::TcpStream;

use crate::{
    common::{free_addr, wait_ready},
    stats::{ms, percentile},
};

#[derive(clap::Args)]
pub struct Args {
    /// Concurrent clients (connections).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Reviews in total.
    #[arg(long, default_value_t = 50_000)]
    reviews: usize,
    /// Do not pin the server and the client to different CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Also measure the client alone: the same reviews against a trivial
    /// HTTPS server that answers every request with a fixed response.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    baseline: bool,
    /// Record the server with `perf record` into this directory.
    #[arg(long)]
    perf_dir: Option<PathBuf>,
    /// The `sp-validator` binary to benchmark.
    #[arg(long)]
    sp_validator_bin: PathBuf,
}

fn review(i: usize) -> Bytes {
    let name = if i % 10 == 9 {
        "Not_A_Valid_Name"
    } else {
        "web.demo.svc.cluster.local"
    };
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{i}"),
            "kind": {"group": "linkerd.io", "version": "v1alpha2", "kind": "ServiceProfile"},
            "resource": {"group": "linkerd.io", "version": "v1alpha2", "resource": "serviceprofiles"},
            "namespace": "demo",
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {
                "apiVersion": "linkerd.io/v1alpha2",
                "kind": "ServiceProfile",
                "metadata": {"name": name, "namespace": "demo"},
                "spec": {
                    "routes": [
                        {"name": "GET /books", "condition": {"method": "GET", "pathRegex": "/books/[^/]*"},
                         "responseClasses": [{"condition": {"status": {"min": 500, "max": 599}}, "isFailure": true}],
                         "isRetryable": true, "timeout": "300ms"},
                        {"name": "POST /books", "condition": {"all": [{"method": "POST"}, {"pathRegex": "/books"}]}}
                    ],
                    "retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 10, "ttl": "10s"}
                }
            }
        }
    });
    Bytes::from(body.to_string())
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("meridian-bench-spv-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ca = LocalCa::new("bench-ca")?;
    let cert = ca.issue_serving_cert(&["linkerd-sp-validator.linkerd.svc"])?;
    let cert_path = dir.join("tls.crt");
    let key_path = dir.join("tls.key");
    std::fs::write(&cert_path, &cert.cert_pem)?;
    std::fs::write(&key_path, &cert.key_pem)?;
    crate::common::pin(!args.no_pin);
    let addr = free_addr()?;
    let admin = free_addr()?;
    let (program, server_args) = crate::common::server_command(
        &args.sp_validator_bin,
        vec![
            format!("--addr={addr}"),
            format!("--admin-addr={admin}"),
            format!("--tls-cert={}", cert_path.display()),
            format!("--tls-key={}", key_path.display()),
            "--log-level=warn".into(),
        ],
    );
    let mut server = ManagedProcess::spawn(
        "sp-validator",
        &program,
        &server_args,
        &dir.join("sp-validator.log"),
        Lifetime::Tied,
    )?;
    wait_ready("sp-validator", admin).await?;
    let pid = server
        .pid()
        .ok_or_else(|| anyhow::anyhow!("sp-validator has no pid"))?;

    let mut roots = rustls::RootCertStore::empty();
    for der in rustls_pemfile::certs(&mut ca.cert_pem().as_bytes()) {
        roots.add(der?)?;
    }
    let tls = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let connector = tokio_rustls::TlsConnector::from(tls);
    let perf = crate::common::PerfRecord::start(args.perf_dir.as_deref(), "sp-validator", pid);
    let load = run_load(addr, &connector, &args, pid).await?;
    perf.stop();
    server.stop(Duration::from_secs(5));
    println!(
        "sp-validator bench: {} AdmissionReviews over TLS 1.3, concurrency {} ({} denied)",
        load.latencies.len(),
        args.concurrency,
        load.denied
    );
    load.print("sp-validator", "(target p99 ≤ 2 ms)");

    if args.baseline {
        let (mut trivial, pid, addr) =
            crate::trivial::start_https(&dir, &cert_path, &key_path).await?;
        let load = run_load(addr, &connector, &args, pid).await?;
        trivial.stop(Duration::from_secs(2));
        load.print(
            "client alone",
            "(a trivial HTTPS server answering a fixed review)",
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// What one load run measured.
struct Load {
    latencies: Vec<Duration>,
    denied: usize,
    elapsed: Duration,
    server_cpu: f64,
    client_cpu: f64,
}

impl Load {
    fn print(&self, what: &str, note: &str) {
        let n = self.latencies.len().max(1) as f64;
        println!(
            "  {what}: {:.0} reviews/s; latency p50 {}, p99 {}, max {} {note}",
            self.latencies.len() as f64 / self.elapsed.as_secs_f64(),
            ms(percentile(&self.latencies, 50.0)),
            ms(percentile(&self.latencies, 99.0)),
            ms(percentile(&self.latencies, 100.0)),
        );
        println!(
            "    CPU per review: server {:.1} µs, client {:.1} µs",
            self.server_cpu * 1e6 / n,
            self.client_cpu * 1e6 / n
        );
    }
}

/// `args.reviews` reviews at `args.concurrency` against `addr`, one
/// keep-alive HTTP/1.1 connection per concurrent client.
async fn run_load(
    addr: std::net::SocketAddr,
    connector: &tokio_rustls::TlsConnector,
    args: &Args,
    pid: u32,
) -> anyhow::Result<Load> {
    let per_client = args.reviews.div_ceil(args.concurrency.max(1));
    // Encoded before the clock starts: the client's CPU is spent on TLS and
    // HTTP, not on building JSON.
    let bodies: Vec<Vec<Bytes>> = (0..args.concurrency)
        .map(|c| {
            (0..per_client)
                .map(|i| review(c * per_client + i))
                .collect()
        })
        .collect();
    let mark = crate::common::CpuMark::now(pid);
    let started = Instant::now();
    let mut clients = Vec::with_capacity(args.concurrency);
    for bodies in bodies {
        let connector = connector.clone();
        clients.push(tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let name = rustls::pki_types::ServerName::try_from("localhost")?;
            let stream = connector.connect(name, tcp).await?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut latencies = Vec::with_capacity(per_client);
            let mut denied = 0usize;
            for body in bodies {
                let request = http::Request::post("/")
                    .header(http::header::HOST, "localhost")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(body))?;
                let t0 = Instant::now();
                let response = sender.send_request(request).await?;
                let status = response.status();
                let body = response.into_body().collect().await?.to_bytes();
                latencies.push(t0.elapsed());
                if status != http::StatusCode::OK {
                    bail!("review answered {status}");
                }
                let denial = b"\"allowed\":false";
                if body.windows(denial.len()).any(|w| w == denial) {
                    denied += 1;
                }
            }
            anyhow::Ok((latencies, denied))
        }));
    }
    let mut latencies = Vec::with_capacity(args.reviews);
    let mut denied = 0;
    for client in clients {
        let (l, d) = client.await.context("client task")??;
        latencies.extend(l);
        denied += d;
    }
    let elapsed = started.elapsed();
    let (server_cpu, client_cpu, _) = mark.since();
    Ok(Load {
        latencies,
        denied,
        elapsed,
        server_cpu,
        client_cpu,
    })
}
