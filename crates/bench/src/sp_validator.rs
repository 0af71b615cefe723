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
    std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
    let addr = free_addr()?;
    let admin = free_addr()?;
    let mut server = ManagedProcess::spawn(
        "sp-validator",
        &args.sp_validator_bin,
        &[
            format!("--addr={addr}"),
            format!("--admin-addr={admin}"),
            format!("--tls-cert={}", dir.join("tls.crt").display()),
            format!("--tls-key={}", dir.join("tls.key").display()),
            "--log-level=warn".into(),
        ],
        &dir.join("sp-validator.log"),
        Lifetime::Tied,
    )?;
    wait_ready("sp-validator", admin).await?;

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
    let per_client = args.reviews.div_ceil(args.concurrency.max(1));
    let started = Instant::now();
    let mut clients = Vec::with_capacity(args.concurrency);
    for c in 0..args.concurrency {
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
            for i in 0..per_client {
                let request = http::Request::post("/")
                    .header(http::header::HOST, "localhost")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(review(c * per_client + i)))?;
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
    server.stop(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "sp-validator bench: {} AdmissionReviews over TLS 1.3, concurrency {} ({} denied)",
        latencies.len(),
        args.concurrency,
        denied
    );
    println!(
        "  {:.0} reviews/s; latency p50 {}, p99 {}, max {} (target p99 ≤ 2 ms)",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(percentile(&latencies, 100.0)),
    );
    Ok(())
}
