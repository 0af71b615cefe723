//! Part 3: bad and half-open peers held on every listening port.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum GoodCall {
    Get,
    WatchPort,
}

/// What a well-behaved client does on a port, timed.
#[derive(Clone)]
pub(super) enum Good {
    Grpc(SocketAddr, GoodCall),
    Http(SocketAddr),
    Review(SocketAddr, tokio_rustls::TlsConnector),
}

impl Good {
    async fn time(&self) -> anyhow::Result<Duration> {
        match self {
            Good::Grpc(addr, GoodCall::Get) => {
                fresh_first_message(*addr, GET, get_request(1)).await
            }
            Good::Grpc(addr, GoodCall::WatchPort) => {
                fresh_first_message(*addr, WATCH_PORT, watch_port_request()).await
            }
            Good::Http(addr) => {
                let t0 = Instant::now();
                let (status, _) = local_cluster::probe::http_get(*addr, "/live").await?;
                if status != 200 {
                    bail!("/live answered {status}");
                }
                Ok(t0.elapsed())
            }
            Good::Review(addr, tls) => review(*addr, tls).await,
        }
    }

    fn what(&self) -> &'static str {
        match self {
            Good::Grpc(_, GoodCall::Get) => "fresh Get",
            Good::Grpc(_, GoodCall::WatchPort) => "fresh WatchPort",
            Good::Http(_) => "GET /live",
            Good::Review(..) => "TLS + AdmissionReview",
        }
    }
}

/// A kind of bad peer: what it sends, then it holds the connection.
pub(super) struct Bad {
    what: &'static str,
    sends: &'static [u8],
}

pub(super) const CLIENT_HELLO: &[u8] =
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x8f\x01\x02\x03\x04";
pub(super) const RANDOM: &[u8] =
    b"\x00\xff\x13\x37\xde\xad\xbe\xef\x99\x12 garbage \x7f\x80\r\n\r\n";

pub(super) const BAD_GRPC: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a preface",
        sends: b"PRI * HTTP/2.0\r\n",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
    },
    Bad {
        what: "an HTTP/1 request",
        sends: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    },
];

pub(super) const BAD_HTTP: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a request head",
        sends: b"GET /ready HTTP/1.1\r\nHo",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
    },
    Bad {
        what: "an HTTP/2 preface",
        sends: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    },
];

pub(super) const BAD_TLS: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a ClientHello",
        sends: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a garbage ClientHello",
        sends:
            b"\x16\x03\x01\x00\x10\x01\x00\x00\x0c\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    },
    Bad {
        what: "plaintext HTTP",
        sends: b"POST / HTTP/1.1\r\nHost: x\r\n\r\n",
    },
];

pub(super) struct Port {
    name: &'static str,
    addr: SocketAddr,
    listener: &'static str,
    kinds: &'static [Bad],
    good: Good,
}

impl Port {
    pub(super) fn grpc(name: &'static str, addr: SocketAddr, good: Good) -> Self {
        Self {
            name,
            addr,
            listener: "grpc",
            kinds: BAD_GRPC,
            good,
        }
    }
    pub(super) fn admin(name: &'static str, addr: SocketAddr) -> Self {
        Self {
            name,
            addr,
            listener: "admin",
            kinds: BAD_HTTP,
            good: Good::Http(addr),
        }
    }
    pub(super) fn tls(
        name: &'static str,
        addr: SocketAddr,
        tls: &tokio_rustls::TlsConnector,
    ) -> Self {
        Self {
            name,
            addr,
            listener: "webhook",
            kinds: BAD_TLS,
            good: Good::Review(addr, tls.clone()),
        }
    }
}

/// One held bad connection: when the server closed it, since it was
/// connected and had sent its bytes (a burst of connects can wait on the
/// listen backlog: that is not the server's reaction time).
pub(super) async fn hold(
    addr: SocketAddr,
    sends: &'static [u8],
    limit: Duration,
) -> Option<Duration> {
    let mut tcp = TcpStream::connect(addr).await.ok()?;
    if !sends.is_empty() {
        tcp.write_all(sends).await.ok()?;
    }
    let t0 = Instant::now();
    let mut sink = Vec::new();
    match tokio::time::timeout(limit, tcp.read_to_end(&mut sink)).await {
        Ok(_) => Some(t0.elapsed()),
        Err(_) => None,
    }
}

pub(super) fn count_bad_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("closed a bad peer's connection"))
        .count()
}

pub(super) async fn bad_peers(args: &Args, server: &Proc, ports: &[Port]) -> anyhow::Result<()> {
    let (tasks_before, metrics_before) = metrics_of(server).await;
    let rss_before = rss_bytes(server.pid).context("RSS")?;
    let lines_before = count_bad_lines(&server.log);
    let open_name = format!("{}server_connections_open", server.prefix);
    let bad_name = format!("{}server_bad_connections_total", server.prefix);
    let limit = Duration::from_secs(30);

    let mut held = Vec::new();
    for port in ports {
        for (k, bad) in port.kinds.iter().enumerate() {
            for _ in 0..args.bad_per_kind {
                let addr = port.addr;
                let sends = bad.sends;
                held.push((port.name, k, tokio::spawn(hold(addr, sends, limit))));
            }
        }
    }
    // Let them connect, then measure the server while they are held.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (tasks_held, metrics_held) = metrics_of(server).await;
    let rss_held = rss_bytes(server.pid).context("RSS")?;
    let mut goods = Vec::new();
    for port in ports {
        let mut samples = Vec::new();
        for _ in 0..10 {
            samples.push(port.good.time().await?);
        }
        goods.push(format!(
            "{} {}",
            port.good.what(),
            ms(percentile(&samples, 50.0))
        ));
    }

    let mut closed: HashMap<(&str, usize), Vec<Duration>> = HashMap::new();
    let mut still_open: HashMap<(&str, usize), usize> = HashMap::new();
    for (port, kind, task) in held {
        match task.await.ok().flatten() {
            Some(after) => closed.entry((port, kind)).or_default().push(after),
            None => *still_open.entry((port, kind)).or_default() += 1,
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (tasks_after, metrics_after) = metrics_of(server).await;
    let rss_after = rss_bytes(server.pid).context("RSS")?;
    let lines = count_bad_lines(&server.log) - lines_before;

    println!("    {}:", server.name);
    println!(
        "      {:<14} {:<22} {:>9}  {:>24}",
        "port", "bad peer sends", "closed", "closed after p50 / max"
    );
    for port in ports {
        for (k, bad) in port.kinds.iter().enumerate() {
            let times = closed.get(&(port.name, k)).cloned().unwrap_or_default();
            let open = still_open.get(&(port.name, k)).copied().unwrap_or(0);
            println!(
                "      {:<14} {:<22} {:>9}  {:>24}",
                port.name,
                bad.what,
                format!("{}/{}", times.len(), times.len() + open),
                format!(
                    "{} / {}",
                    secs(percentile(&times, 50.0)),
                    secs(percentile(&times, 100.0))
                ),
            );
        }
    }
    let opens = |metrics: &str| {
        ports
            .iter()
            .map(|p| {
                let v = sample(
                    metrics,
                    &format!("{open_name}{{listener=\"{}\"}}", p.listener),
                );
                format!("{} {}", p.listener, fmt_opt(v))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let counted = ports
        .iter()
        .map(|p| {
            let label = format!("listener=\"{}\"", p.listener);
            let n = sum_of(&metrics_after, &bad_name, &label)
                - sum_of(&metrics_before, &bad_name, &label);
            format!("{} {n:.0}", p.listener)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("      while held: {}", goods.join(", "));
    println!(
        "      tasks alive {} → {} (held) → {} (after); RSS {:.1} → {:.1} → {:.1} MiB",
        fmt_opt(tasks_before),
        fmt_opt(tasks_held),
        fmt_opt(tasks_after),
        mib(rss_before),
        mib(rss_held),
        mib(rss_after)
    );
    println!(
        "      open connections: before {}; held {}; after {}",
        opens(&metrics_before),
        opens(&metrics_held),
        opens(&metrics_after)
    );
    println!("      counted in {bad_name}: {counted}; warning lines logged about them: {lines}");
    Ok(())
}

pub(super) fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        ms(d)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

// ---------------------------------------------------------------------------
// Webhook clients.

pub(crate) fn tls_connector(ca: &LocalCa) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls_pemfile::certs(&mut ca.cert_pem().as_bytes()) {
        roots.add(der?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// A fresh TLS connection and one AdmissionReview (a ConfigMap, which any
/// webhook answers).
pub(crate) async fn review(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let stream = tls.connect(name, tcp).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        }
    });
    let request = http::Request::post("/")
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    if status != http::StatusCode::OK {
        bail!("review answered {status}");
    }
    Ok(t0.elapsed())
}
