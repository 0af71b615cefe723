//! `meridian-bench trivial-server`: the cheapest server a streaming
//! benchmark's client can talk to, to measure the client alone.
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
    std::fs::create_dir_all(work_dir)?;
    let (program, args) = crate::common::server_command(&exe, args);
    let process = local_cluster::ManagedProcess::spawn(
        "trivial-server",
        &program,
        &args,
        &work_dir.join("trivial-server.log"),
        local_cluster::Lifetime::Tied,
    )?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the trivial server did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = process
        .pid()
        .ok_or_else(|| anyhow::anyhow!("trivial server has no pid"))?;
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
