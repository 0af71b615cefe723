//! `meridian-bench trivial-server` and `trivial-https`: the cheapest
//! servers the benchmarks' clients can talk to, to measure the clients
//! alone (the streaming client here, the sp-validator's HTTPS client at the
//! end).
//!
//! Every server-streaming call is answered with one small message at once,
//! then one more each time a `Fire` call names the same method and request
//! (all of a group's streams share one pre-encoded frame, as Meridian's
//! do). It runs as its own process, pinned like the server under test, so
//! the benchmark can print the client's own cost and latency beside the
//! real server's.

use std::{collections::HashMap, convert::Infallible, net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::Mutex;
use tokio::sync::watch;

/// The method that fires a group: header [`TARGET_HEADER`] names the
/// group's method, the body is the group's request frame.
pub const FIRE_PATH: &str = "/meridian.bench.Trivial/Fire";
pub const TARGET_HEADER: &str = "x-bench-target-path";

/// The size of every message the trivial server sends (about one endpoint
/// change of a `Get` stream).
const MESSAGE_BYTES: usize = 128;

#[derive(clap::Args)]
pub struct Args {
    /// Where to listen (loopback).
    #[arg(long)]
    addr: SocketAddr,
}

type Groups = Arc<Mutex<HashMap<(String, Bytes), watch::Sender<u64>>>>;

pub async fn serve(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.addr.ip().is_loopback(), "loopback only");
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let groups: Groups = Arc::default();
    let mut message = vec![0u8; MESSAGE_BYTES];
    message[1..5].copy_from_slice(&((MESSAGE_BYTES - 5) as u32).to_be_bytes());
    let message = Bytes::from(message);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let groups = groups.clone();
        let message = message.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                handle(request, groups.clone(), message.clone())
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                // Like Meridian's servers (hyper's default is 200).
                .max_concurrent_streams(None)
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn grpc_response(body: Body) -> http::Response<Body> {
    let mut response = http::Response::new(body);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

async fn handle(
    request: http::Request<Incoming>,
    groups: Groups,
    message: Bytes,
) -> Result<http::Response<Body>, Infallible> {
    let path = request.uri().path().to_string();
    let target = request
        .headers()
        .get(TARGET_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if path == FIRE_PATH {
        if let Some(tx) = groups
            .lock()
            .map_err(|_| ())
            .ok()
            .and_then(|g| g.get(&(target.unwrap_or_default(), body)).cloned())
        {
            tx.send_modify(|v| *v += 1);
        }
        let mut response = grpc_response(BoxBody::new(http_body_util::Empty::new()));
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("0"));
        return Ok(response);
    }
    let rx = {
        let Ok(mut groups) = groups.lock() else {
            return Ok(grpc_response(BoxBody::new(http_body_util::Empty::new())));
        };
        groups
            .entry((path, body))
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    };
    let frames = futures::stream::unfold((rx, true), move |(mut rx, first)| {
        let message = message.clone();
        async move {
            if !first {
                rx.changed().await.ok()?;
            }
            Some((Ok::<_, Infallible>(Frame::data(message)), (rx, false)))
        }
    });
    Ok(grpc_response(BoxBody::new(StreamBody::new(frames))))
}

/// Starts the trivial server as a child process (pinned like the server
/// under test); returns it and its address once it accepts connections.
pub async fn start(
    work_dir: &std::path::Path,
) -> anyhow::Result<(local_cluster::ManagedProcess, u32, SocketAddr)> {
    let addr = crate::common::free_addr()?;
    let exe = std::env::current_exe()?;
    let args = vec!["trivial-server".to_string(), format!("--addr={addr}")];
    spawn_and_wait("trivial-server", &exe, args, work_dir, addr).await
}

async fn spawn_and_wait(
    name: &str,
    exe: &std::path::Path,
    args: Vec<String>,
    work_dir: &std::path::Path,
    addr: SocketAddr,
) -> anyhow::Result<(local_cluster::ManagedProcess, u32, SocketAddr)> {
    std::fs::create_dir_all(work_dir)?;
    let (program, args) = crate::common::server_command(exe, args);
    let process = local_cluster::ManagedProcess::spawn(
        name,
        &program,
        &args,
        &work_dir.join(format!("{name}.log")),
        local_cluster::Lifetime::Tied,
    )?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "{name} did not start");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = process
        .pid()
        .ok_or_else(|| anyhow::anyhow!("{name} has no pid"))?;
    Ok((process, pid, addr))
}

/// Fires the group of streams that called `path` with `frame`.
pub async fn fire(
    conn: &crate::proxy_client::Conn,
    path: &str,
    frame: Bytes,
) -> anyhow::Result<()> {
    let mut conn = conn.clone();
    conn.ready().await?;
    let mut request = crate::proxy_client::request(FIRE_PATH, frame);
    request
        .headers_mut()
        .insert(TARGET_HEADER, http::HeaderValue::from_str(path)?);
    let response = conn.send_request(request).await?;
    let _ = response.into_body().collect().await;
    Ok(())
}

/// `meridian-bench trivial-https`: an HTTPS server (TLS 1.3, HTTP/1.1)
/// that reads every request and answers one fixed AdmissionReview, to
/// measure the sp-validator benchmark's client alone.
#[derive(clap::Args)]
pub struct HttpsArgs {
    /// Where to listen (loopback).
    #[arg(long)]
    addr: SocketAddr,
    /// PEM certificate chain.
    #[arg(long)]
    tls_cert: std::path::PathBuf,
    /// PEM private key.
    #[arg(long)]
    tls_key: std::path::PathBuf,
}

const FIXED_REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"uid","allowed":true}}"#;

pub async fn serve_https(args: HttpsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.addr.ip().is_loopback(), "loopback only");
    let certs = rustls_pemfile::certs(&mut std::fs::read(&args.tls_cert)?.as_slice())
        .collect::<Result<Vec<_>, _>>()?;
    let key = rustls_pemfile::private_key(&mut std::fs::read(&args.tls_key)?.as_slice())?
        .ok_or_else(|| anyhow::anyhow!("no private key"))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service =
                hyper::service::service_fn(|request: http::Request<Incoming>| async move {
                    let _ = request.into_body().collect().await;
                    let mut response = http::Response::new(http_body_util::Full::new(
                        Bytes::from_static(FIXED_REVIEW.as_bytes()),
                    ));
                    response.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    Ok::<_, Infallible>(response)
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// Starts the trivial HTTPS server as a child process (pinned like the
/// server under test); returns it and its address once it accepts.
pub async fn start_https(
    work_dir: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<(local_cluster::ManagedProcess, u32, SocketAddr)> {
    let addr = crate::common::free_addr()?;
    let exe = std::env::current_exe()?;
    let args = vec![
        "trivial-https".to_string(),
        format!("--addr={addr}"),
        format!("--tls-cert={}", cert.display()),
        format!("--tls-key={}", key.display()),
    ];
    spawn_and_wait("trivial-https", &exe, args, work_dir, addr).await
}
