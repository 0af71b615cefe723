//! The machine's floor for one fan-out: one `write(2)` of a small message
//! to each of N loopback TCP connections, from one blocking thread on the
//! server's CPU, read on the client's CPU. No async runtime on the writing
//! side, no HTTP/2, no framing: what one update to N proxy connections
//! cannot cost less than here, whatever a server does above the socket.
//! Printed beside the trivial server's baseline, so that a "CPU per
//! endpoint change" can be read against both.

use std::{
    io::Write,
    net::{TcpListener, TcpStream},
    time::Duration,
};

use tokio::io::AsyncReadExt;

/// The size of the message written to every connection (about one
/// endpoint change of a `Get` stream, like the trivial server's).
const MESSAGE_BYTES: usize = 128;

/// Nanoseconds the calling thread has run (`/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    let ns = stat.split_whitespace().next().unwrap_or_default();
    Ok(ns.parse()?)
}

/// Moves the calling thread (only) to `cpu`, through `taskset`.
fn pin_thread(cpu: usize) -> anyhow::Result<()> {
    let link = std::fs::read_link("/proc/thread-self")?;
    let tid = link
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .to_string();
    let status = std::process::Command::new("taskset")
        .args(["-p", "-c", &cpu.to_string(), &tid])
        .stdout(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "taskset of thread {tid}: {status}");
    Ok(())
}

/// Reads every connection (on this process's CPU, the client's) until
/// `expected` bytes arrived in all.
async fn drain(clients: Vec<TcpStream>, expected: usize) -> anyhow::Result<()> {
    let mut readers = tokio::task::JoinSet::new();
    let per_client = expected / clients.len().max(1);
    for client in clients {
        client.set_nonblocking(true)?;
        let mut client = tokio::net::TcpStream::from_std(client)?;
        readers.spawn(async move {
            let mut buf = vec![0u8; per_client];
            client.read_exact(&mut buf).await.map(|_| ())
        });
    }
    while let Some(read) = readers.join_next().await {
        read??;
    }
    Ok(())
}

/// One write to each of `connections` loopback connections, `rounds`
/// times 50 ms apart; prints the writing thread's CPU per round.
pub async fn print(connections: usize, rounds: usize) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let mut clients = Vec::with_capacity(connections);
    let mut servers = Vec::with_capacity(connections);
    for _ in 0..connections {
        clients.push(TcpStream::connect(addr)?);
        let (server, _) = listener.accept()?;
        server.set_nodelay(true)?;
        servers.push(server);
    }
    let reader = tokio::spawn(drain(clients, connections * rounds * MESSAGE_BYTES));
    let server_cpu = crate::common::pinned_cpus().map(|(server, _)| server);
    let writer = tokio::task::spawn_blocking(move || -> anyhow::Result<u64> {
        if let Some(cpu) = server_cpu {
            pin_thread(cpu)?;
        }
        std::thread::sleep(Duration::from_millis(100));
        let message = [0u8; MESSAGE_BYTES];
        let start = thread_cpu_ns()?;
        for _ in 0..rounds {
            for server in &mut servers {
                server.write_all(&message)?;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let used = thread_cpu_ns()? - start;
        // The blocking pool may reuse this thread: back to the client's CPU.
        if let Some((_, client)) = crate::common::pinned_cpus() {
            pin_thread(client)?;
        }
        Ok(used)
    });
    let used = writer.await??;
    tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .map_err(|_| anyhow::anyhow!("the floor's reader did not get every byte in 30 s"))???;
    let ms = used as f64 / 1e6;
    println!(
        "  floor, one write(2) of {MESSAGE_BYTES} bytes to each of {connections} loopback connections from one thread (no runtime, no HTTP/2): {:.1} ms CPU per round ({:.2} µs per write), {rounds} rounds",
        ms / rounds.max(1) as f64,
        ms * 1000.0 / (rounds * connections).max(1) as f64,
    );
    Ok(())
}
