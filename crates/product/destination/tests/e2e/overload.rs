//! Overload and bad peers, end to end against the `destination`
//! process: streams past `--grpc-max-concurrent-streams` are refused with
//! `REFUSED_STREAM` while every other stream and client is served; streams
//! past `--grpc-max-open-streams`, over any connections, are refused with
//! `RESOURCE_EXHAUSTED` and counted; garbage
//! and half-open connections on the gRPC and admin ports are closed,
//! counted and logged once; an API server that denies a list, or cannot be
//! reached at start, is named in `/ready` until it is fixed, and the
//! process then becomes ready by itself. Functional checks only: the
//! figures (latencies, memory) are `cargo xtask bench overload`'s.

use std::{collections::BTreeSet, net::SocketAddr, path::Path, time::Duration};

use linkerd2_proxy_api::destination::{GetDestination, Update, update};
use prost::Message;
use test_support::{
    ServerProcess, TestEnv, eventually, free_addr,
    raw_h2::{self, Event, RawH2},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::mpsc,
};

use crate::common::{authority, client, http_service};

const PROGRAM: &str = env!("CARGO_BIN_EXE_destination");
const GET: &str = "/io.linkerd.proxy.destination.Destination/Get";
const TIMEOUT: Duration = Duration::from_secs(30);

fn args(kubeconfig: &Path, addr: SocketAddr, admin: SocketAddr, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--addr={addr}"),
        format!("--admin-addr={admin}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn get_body(path: &str) -> Vec<u8> {
    let request = GetDestination {
        scheme: "k8s".into(),
        path: path.into(),
        context_token: String::new(),
    };
    raw_h2::grpc_message(&request.encode_to_vec())
}

/// The first update of a fresh `Get` on a fresh connection.
async fn first_update(addr: SocketAddr, path: &str) -> Update {
    let mut client = client(addr).await;
    let request = GetDestination {
        scheme: "k8s".into(),
        path: path.into(),
        context_token: String::new(),
    };
    let mut stream = tokio::time::timeout(TIMEOUT, client.get(request))
        .await
        .expect("Get answered in time")
        .expect("Get accepted")
        .into_inner();
    tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("an update in time")
        .expect("stream healthy")
        .expect("stream open")
}

async fn next_event(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(TIMEOUT, events.recv())
        .await
        .expect("the server answered in time")
        .expect("connection reader alive")
}

#[tokio::test]
async fn streams_past_the_limit_are_refused_and_everyone_else_is_served() {
    let env = TestEnv::new("overload-streams").await;
    env.cluster().ensure_crds();
    http_service(&env, "web").await;
    let (addr, admin) = (free_addr(), free_addr());
    let line = args(
        env.cluster().kubeconfig(),
        addr,
        admin,
        &["--grpc-max-concurrent-streams=8"],
    );
    let _dst = ServerProcess::start(PROGRAM.as_ref(), &line, admin).await;

    let (mut abuser, mut events) = RawH2::connect(addr).await.expect("connect");
    let settings = loop {
        if let Event::Settings(settings) = next_event(&mut events).await {
            break settings;
        }
    };
    assert_eq!(
        raw_h2::setting(&settings, raw_h2::SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(8),
        "the limit is advertised: {settings:?}"
    );

    // Ten streams on one connection, ignoring the advertised limit.
    let path = authority(&env, "web", 80);
    let body = get_body(&path);
    let mut opened = Vec::new();
    for _ in 0..10 {
        let id = abuser
            .open_grpc(&addr.to_string(), GET, &body)
            .await
            .expect("write");
        opened.push(id);
    }
    // A refused stream gets RST_STREAM(REFUSED_STREAM); the request DATA
    // we sent on it after its HEADERS then gets STREAM_CLOSED.
    let (mut answered, mut with_data, mut refused) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    while answered.len() + refused.len() < opened.len() || with_data.len() < answered.len() {
        match next_event(&mut events).await {
            Event::Headers { stream, end_stream } => {
                assert!(!end_stream, "stream {stream} ended instead of streaming");
                answered.insert(stream);
            }
            Event::Data { stream, .. } => {
                with_data.insert(stream);
            }
            Event::Reset { stream, code } if code == raw_h2::REFUSED_STREAM => {
                refused.insert(stream);
            }
            Event::Reset { stream, code } => {
                assert_eq!(code, raw_h2::STREAM_CLOSED, "stream {stream}");
                assert!(!answered.contains(&stream), "stream {stream} was served");
            }
            Event::Settings(_) => {}
            other => panic!("the connection should stay up: {other:?}"),
        }
    }
    assert_eq!(
        answered,
        opened[..8].iter().copied().collect(),
        "the first 8 are served"
    );
    assert_eq!(
        with_data, answered,
        "each served stream got its first update"
    );
    assert_eq!(
        refused,
        opened[8..].iter().copied().collect(),
        "the rest are refused"
    );

    // Meanwhile another client is served, and the abuser's connection is
    // still up: one more stream is refused, not the connection closed.
    let update = first_update(addr, &path).await;
    assert!(
        matches!(update.update, Some(update::Update::NoEndpoints(_))),
        "{update:?}"
    );
    let extra = abuser
        .open_grpc(&addr.to_string(), GET, &body)
        .await
        .expect("write");
    loop {
        match next_event(&mut events).await {
            Event::Reset { stream, code } if stream == extra && code == raw_h2::REFUSED_STREAM => {
                break;
            }
            Event::Reset { code, .. } if code == raw_h2::STREAM_CLOSED => {}
            Event::Settings(_) | Event::Data { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A bad peer and what it sends (then it holds the connection open).
struct BadPeer {
    what: &'static str,
    sends: &'static [u8],
    /// Whether the server closes it at once (else after its deadline).
    at_once: bool,
}

/// The start of a TLS ClientHello record.
const CLIENT_HELLO: &[u8] = b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x8f\x01\x02\x03";

const GRPC_PEERS: &[BadPeer] = &[
    BadPeer {
        what: "nothing",
        sends: b"",
        at_once: false,
    },
    BadPeer {
        what: "half a preface",
        sends: b"PRI * HTTP/2.0\r\n",
        at_once: false,
    },
    BadPeer {
        what: "random bytes",
        sends: b"\x00\xff\x13\x37\xde\xad\xbe\xef garbage\r\n\r\n",
        at_once: true,
    },
    BadPeer {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
        at_once: true,
    },
    BadPeer {
        what: "an HTTP/1 request",
        sends: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        at_once: true,
    },
];

const ADMIN_PEERS: &[BadPeer] = &[
    BadPeer {
        what: "nothing",
        sends: b"",
        at_once: false,
    },
    BadPeer {
        what: "half a request head",
        sends: b"GET /ready HTTP/1.1\r\nHo",
        at_once: false,
    },
    BadPeer {
        what: "random bytes",
        sends: b"\x00\xff\x13\x37\xde\xad\xbe\xef garbage\r\n\r\n",
        at_once: true,
    },
    BadPeer {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
        at_once: true,
    },
    BadPeer {
        what: "an HTTP/2 preface",
        sends: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        at_once: true,
    },
];

/// Connects `copies` bad peers of each kind to `addr`.
async fn connect_bad(
    addr: SocketAddr,
    peers: &'static [BadPeer],
    copies: usize,
) -> Vec<(&'static BadPeer, TcpStream)> {
    let mut open = Vec::new();
    for peer in peers {
        for _ in 0..copies {
            let mut tcp = TcpStream::connect(addr).await.expect("connect");
            tcp.write_all(peer.sends).await.expect("write");
            open.push((peer, tcp));
        }
    }
    open
}

/// Waits for the server to close `tcp` (EOF or a reset), reading and
/// dropping whatever it answers first (an HTTP/1 400).
async fn closed_by_server(tcp: &mut TcpStream, within: Duration) -> Result<(), String> {
    let mut sink = Vec::new();
    match tokio::time::timeout(within, tcp.read_to_end(&mut sink)).await {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("still open after {within:?}")),
    }
}

/// The value of the sample `name{labels}` in a Prometheus text body.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[tokio::test]
async fn streams_past_the_process_cap_are_refused_and_counted() {
    let env = TestEnv::new("overload-cap").await;
    env.cluster().ensure_crds();
    http_service(&env, "web").await;
    let (addr, admin) = (free_addr(), free_addr());
    let line = args(
        env.cluster().kubeconfig(),
        addr,
        admin,
        &["--grpc-max-open-streams=2"],
    );
    let dst = ServerProcess::start(PROGRAM.as_ref(), &line, admin).await;
    let path = authority(&env, "web", 80);
    let request = || GetDestination {
        scheme: "k8s".into(),
        path: path.clone(),
        context_token: String::new(),
    };
    // Each stream on a connection of its own.
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut stream = client(addr)
            .await
            .get(request())
            .await
            .expect("under the cap")
            .into_inner();
        let first = tokio::time::timeout(TIMEOUT, stream.message()).await;
        assert!(matches!(first, Ok(Ok(Some(_)))), "{first:?}");
        open.push(stream);
    }
    let refused = client(addr)
        .await
        .get(request())
        .await
        .expect_err("past the cap");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("--grpc-max-open-streams"),
        "{refused:?}"
    );
    let (_, metrics) = dst.admin_get("/metrics").await;
    assert_eq!(
        sample(&metrics, "grpc_open_streams"),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "grpc_open_streams_refused_total"),
        Some(1.0)
    );
    // A stream that ends gives its slot back.
    drop(open.pop());
    eventually("a slot to be given back", TIMEOUT, || async {
        let (_, metrics) = dst.admin_get("/metrics").await;
        let now = sample(&metrics, "grpc_open_streams");
        (now == Some(1.0))
            .then_some(())
            .ok_or(format!("{now:?} open"))
    })
    .await;
    let update = first_update(addr, &path).await;
    assert!(update.update.is_some());
}

#[tokio::test]
async fn garbage_and_half_open_connections_are_closed_counted_and_logged_once() {
    let env = TestEnv::new("overload-peers").await;
    env.cluster().ensure_crds();
    http_service(&env, "web").await;
    let (addr, admin) = (free_addr(), free_addr());
    let log = env
        .cluster()
        .work_dir()
        .join(format!("{}-destination.log", env.ns));
    let line = args(env.cluster().kubeconfig(), addr, admin, &[]);
    let mut dst = ServerProcess::spawn_logging(PROGRAM.as_ref(), &line, admin, Some(&log));
    dst.wait_ready().await;
    let path = authority(&env, "web", 80);

    const COPIES: usize = 4;
    let mut bad = connect_bad(addr, GRPC_PEERS, COPIES).await;
    bad.extend(connect_bad(admin, ADMIN_PEERS, COPIES).await);

    // While they are connected, everyone else is served.
    let (status, body) = dst.admin_get("/live").await;
    assert_eq!((status, body.as_str()), (200, "live\n"));
    let update = first_update(addr, &path).await;
    assert!(
        matches!(update.update, Some(update::Update::NoEndpoints(_))),
        "{update:?}"
    );

    // Garbage is closed at once; silence and half a preface or request
    // head after the 10 s deadlines, never held.
    for (peer, tcp) in bad.iter_mut().filter(|(p, _)| p.at_once) {
        closed_by_server(tcp, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", peer.what));
    }
    for (peer, tcp) in bad.iter_mut().filter(|(p, _)| !p.at_once) {
        closed_by_server(tcp, Duration::from_secs(25))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", peer.what));
    }
    drop(bad);

    // Every one counted, by listener and reason; no connection left open
    // but our one gRPC client's (gone) and this scrape's.
    let expected: &[(&str, &str, f64)] = &[
        ("grpc", "silent", 2.0),
        ("grpc", "garbage", 1.0),
        ("grpc", "tls_on_plaintext", 1.0),
        ("grpc", "http1_on_http2", 1.0),
        ("admin", "silent", 2.0),
        ("admin", "garbage", 3.0),
    ];
    let metrics = eventually("the connections to close", TIMEOUT, || async {
        let (_, metrics) = dst.admin_get("/metrics").await;
        let open = |listener: &str| {
            sample(
                &metrics,
                &format!("server_connections_open{{listener=\"{listener}\"}}"),
            )
        };
        match (open("grpc"), open("admin")) {
            (Some(grpc), Some(admin)) if grpc == 0.0 && admin == 1.0 => Ok(metrics),
            other => Err(format!("open (grpc, admin): {other:?}")),
        }
    })
    .await;
    for (listener, reason, per_copy) in expected {
        let series =
            format!("server_bad_connections_total{{listener=\"{listener}\",reason=\"{reason}\"}}");
        assert_eq!(
            sample(&metrics, &series),
            Some(per_copy * COPIES as f64),
            "{series} in\n{metrics}"
        );
    }

    // Logged once per listener (the rest are summarised later, at most a
    // line a minute), and the process is still serving.
    let text = std::fs::read_to_string(&log).expect("reading the log");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("closed a bad peer's connection"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per listener:\n{text}");
    assert!(lines.iter().any(|l| l.contains("grpc")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("admin")), "{lines:?}");
    assert!(dst.is_running());
    let update = first_update(addr, &path).await;
    assert!(update.update.is_some());
}

fn apply(env: &TestEnv, yaml: &str) {
    let (ok, out) = env.cluster().kubectl(&["apply", "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply: {out}\n{yaml}");
}

fn delete(env: &TestEnv, kind: &str, name: &str) {
    let _ = env
        .cluster()
        .kubectl(&["delete", kind, name, "--ignore-not-found"], None);
}

/// A ClusterRole `name` reading `resources` of `group`, bound to `account`.
fn grant(env: &TestEnv, name: &str, account: &str, group: &str, resources: &[&str]) {
    let resources = resources
        .iter()
        .map(|r| format!("\"{r}\""))
        .collect::<Vec<_>>()
        .join(", ");
    apply(
        env,
        &format!(
            r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {name}
rules:
  - apiGroups: ["{group}"]
    resources: [{resources}]
    verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {name}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {name}
subjects:
  - kind: ServiceAccount
    name: {account}
    namespace: {ns}
"#,
            ns = env.ns
        ),
    );
}

#[tokio::test]
async fn a_denied_list_is_named_in_ready_until_it_is_granted() {
    let env = TestEnv::new("overload-rbac").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    let account = "partial";
    let (ok, out) = cluster.kubectl(&["create", "serviceaccount", account, "-n", &env.ns], None);
    assert!(ok, "{out}");
    // Everything the destination reads but EndpointSlices.
    let base = format!("{}-partial", env.ns);
    let slices = format!("{}-slices", env.ns);
    let (apps, batch, linkerd, workloads) = (
        format!("{base}-apps"),
        format!("{base}-batch"),
        format!("{base}-sp"),
        format!("{base}-ew"),
    );
    grant(&env, &base, account, "", &["pods", "services", "nodes"]);
    grant(&env, &apps, account, "apps", &["replicasets"]);
    grant(&env, &batch, account, "batch", &["jobs"]);
    grant(&env, &linkerd, account, "linkerd.io", &["serviceprofiles"]);
    grant(
        &env,
        &workloads,
        account,
        "workload.linkerd.io",
        &["externalworkloads"],
    );
    let kubeconfig = cluster.service_account_kubeconfig(&env.ns, account);

    let (addr, admin) = (free_addr(), free_addr());
    let mut dst = ServerProcess::spawn(
        PROGRAM.as_ref(),
        &args(&kubeconfig, addr, admin, &[]),
        admin,
    );
    // The first request denied is the streamed list's watch (the test
    // API server has `WatchList` on; k8s_index::initial_list).
    let want = format!(
        "not ready: endpointslices cache\nwatch: 403 Forbidden: endpointslices.discovery.k8s.io is forbidden: \
         User \"system:serviceaccount:{}:{account}\" cannot watch resource \"endpointslices\" in API group \
         \"discovery.k8s.io\" at the cluster scope\n",
        env.ns
    );
    eventually("/ready to name the denied list", TIMEOUT, || async {
        match test_support::process::http_get(admin, "/ready").await {
            Ok((503, body)) if body == want => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // It stays up and keeps retrying (with backoff).
    let restarts = |metrics: &str| {
        sample(
            metrics,
            "index_watch_restarts_total{kind=\"endpointslices\"}",
        )
        .unwrap_or(0.0)
    };
    let (_, metrics) = dst.admin_get("/metrics").await;
    let before = restarts(&metrics);
    eventually("the list to be retried", TIMEOUT, || async {
        let (_, metrics) = dst.admin_get("/metrics").await;
        if restarts(&metrics) > before {
            Ok(())
        } else {
            Err(format!("restarts: {}", restarts(&metrics)))
        }
    })
    .await;
    assert!(dst.is_running());
    // gRPC answers Unavailable (not synced), not NotFound.
    let mut grpc = client(addr).await;
    let status = grpc
        .get(GetDestination {
            scheme: "k8s".into(),
            path: authority(&env, "web", 80),
            context_token: String::new(),
        })
        .await
        .expect_err("nothing is answered before the sync");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    // Granted: ready by itself, nothing left to say about EndpointSlices.
    grant(
        &env,
        &slices,
        account,
        "discovery.k8s.io",
        &["endpointslices"],
    );
    dst.wait_ready().await;
    let (status, body) = dst.admin_get("/ready").await;
    assert_eq!(status, 200);
    assert!(!body.contains("endpointslices"), "{body}");
    for name in [&base, &apps, &batch, &linkerd, &workloads, &slices] {
        delete(&env, "clusterrolebinding", name);
        delete(&env, "clusterrole", name);
    }
}

#[tokio::test]
async fn an_unreachable_api_server_is_named_in_ready_until_it_answers() {
    let env = TestEnv::new("overload-unreachable").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    // The kubeconfig, pointed at a loopback port where nothing listens yet.
    let (kubeconfig, closed) = cluster.unreachable_kubeconfig(&env.ns);

    let (addr, admin) = (free_addr(), free_addr());
    let mut dst = ServerProcess::spawn(
        PROGRAM.as_ref(),
        &args(&kubeconfig, addr, admin, &[]),
        admin,
    );
    let body = test_support::process::wait_api_server_unreachable(admin, TIMEOUT).await;
    assert!(
        body.starts_with("not ready: services cache, endpointslices cache, pods cache"),
        "{body}"
    );
    assert!(body.contains("Connection refused"), "{body}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(dst.is_running(), "it stays up");

    // The API server appears on that address (a loopback forwarder to the
    // real one): ready without a restart.
    let forwarder = test_support::process::forward(closed, cluster.apiserver_addr()).await;
    dst.wait_ready().await;
    // Watches that do not gate readiness (the linked clusters' Secrets)
    // stop being degraded at their next retry, at most 2 s later.
    test_support::eventually(
        "/ready to name no unreachable API server",
        TIMEOUT,
        || async {
            let (status, body) = dst.admin_get("/ready").await;
            if status == 200 && !body.contains("API server unreachable") {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        },
    )
    .await;
    drop(dst);
    forwarder.abort();
}
