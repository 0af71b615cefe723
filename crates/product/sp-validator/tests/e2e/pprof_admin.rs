//! `-enable-pprof` on the binary: with the chart's flag the admin port
//! serves a jemalloc heap profile and a CPU profile in gzipped pprof, and
//! refuses a bad `seconds`; without it (the chart's default,
//! `-enable-pprof=false`) the paths are 404, as the original's. Needs no
//! cluster: the admin server runs while the webhook waits for its
//! certificate.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use test_support::free_addr;

/// Kills the process when the test ends, even on panic.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(enable_pprof: &str) -> (Running, SocketAddr) {
    let admin = free_addr();
    let dir = tempfile::tempdir().expect("tempdir");
    let child = Command::new(env!("CARGO_BIN_EXE_sp-validator"))
        .args([
            "sp-validator",
            "-log-level=info",
            "-log-format=plain",
            enable_pprof,
            &format!("-addr={}", free_addr()),
            &format!("-metrics-addr={admin}"),
            &format!("--tls-cert={}", dir.path().join("absent.crt").display()),
            &format!("--tls-key={}", dir.path().join("absent.key").display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sp-validator");
    let running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(admin).is_err() {
        assert!(Instant::now() < deadline, "the admin server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    (running, admin)
}

/// Status code and body of `GET path`.
fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("response");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, response[split + 4..].to_vec())
}

const GZIP: &[u8] = &[0x1f, 0x8b];

#[test]
fn the_chart_s_enable_pprof_serves_profiles_and_its_default_does_not() {
    let (_process, admin) = start("-enable-pprof=true");
    let (status, body) = get(admin, "/debug/pprof/heap");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(body.starts_with(GZIP), "gzipped pprof");
    let (status, body) = get(admin, "/debug/pprof/profile?seconds=1");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(body.starts_with(GZIP), "gzipped pprof");
    let (status, _) = get(admin, "/debug/pprof/profile?seconds=0");
    assert_eq!(status, 400);
    let (status, _) = get(admin, "/metrics");
    assert_eq!(status, 200, "the other admin routes stay");

    let (_process, admin) = start("-enable-pprof=false");
    for path in ["/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile"] {
        assert_eq!(get(admin, path).0, 404, "{path}");
    }
}
