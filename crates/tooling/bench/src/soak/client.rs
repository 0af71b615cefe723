//! The soak's clients: `Get` and `GetProfile` streams that behave as proxies
//! do (reconnect with a small backoff when a stream ends or fails, to the
//! replica the [`Directory`] picks, as a proxy's balancer over the headless
//! Service's addresses does, and start over from the full state a new
//! stream sends), some of them slow readers and some stalled on command. What a stream holds is built only from what
//! it was sent: `Add` adds addresses, `Remove` removes them, `NoEndpoints`
//! clears them; a profile stream holds the last profile, a `WatchPort`
//! stream (on the policy controller) the last inbound server.

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use super::replicas::{Api, Directory};

use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update, destination_client::DestinationClient, update,
};
use linkerd2_proxy_api::inbound::{
    PortSpec, Server as InboundServer, inbound_server_policies_client::InboundServerPoliciesClient,
    proxy_protocol,
};
use tokio::sync::watch;

use super::{
    NS,
    rng::Rng,
    truth::{InboundView, ProfileView},
};

/// What a stream asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// `Get svc.soak.svc.cluster.local:port` from a client on `node`.
    Get {
        service: String,
        port: u16,
        node: String,
    },
    /// `GetProfile svc.soak.svc.cluster.local:port`.
    Profile { service: String, port: u16 },
    /// `InboundServerPolicies.WatchPort` of `pod:port` (policy controller).
    Inbound { pod: String, port: u16 },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Get {
                service,
                port,
                node,
            } => write!(f, "Get {service}:{port} (node {node:?})"),
            Target::Profile { service, port } => write!(f, "GetProfile {service}:{port}"),
            Target::Inbound { pod, port } => write!(f, "WatchPort {pod}:{port}"),
        }
    }
}

/// How a stream reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// Reads as fast as messages come.
    Normal,
    /// Sleeps between messages.
    Slow(Duration),
    /// Stops reading while the soak's stall switch is on.
    Stallable,
}

/// What one stream holds, as its messages built it.
#[derive(Clone, Debug, Default)]
pub struct Holding {
    /// A stream is open (its response headers arrived).
    pub connected: bool,
    /// The replica serving the open stream (or last tried).
    pub replica: Option<usize>,
    /// `Get`: the addresses held.
    pub addrs: BTreeSet<SocketAddr>,
    /// `GetProfile`: the last profile received.
    pub profile: Option<ProfileView>,
    /// `WatchPort`: the last inbound server received.
    pub inbound: Option<InboundView>,
    /// Messages received in total.
    pub messages: u64,
    /// Streams opened (1 + reconnects).
    pub opened: u64,
    /// `Remove`s of an address not held, and undecodable addresses: a
    /// well-behaved server sends neither.
    pub anomalies: u64,
    /// The last error that ended a stream (or failed to open one).
    pub last_error: Option<String>,
    /// The last attempt to open was refused `NotFound` (a `Get` of a
    /// Service that does not exist).
    pub not_found: bool,
}

/// A running client stream and its holding.
pub struct Stream {
    pub target: Target,
    pub reader: Reader,
    holding: Arc<Mutex<Holding>>,
}

impl Stream {
    /// The holding (the lock is held briefly by the stream's task).
    pub fn holding(&self) -> MutexGuard<'_, Holding> {
        lock(&self.holding)
    }
}

fn lock(holding: &Mutex<Holding>) -> MutexGuard<'_, Holding> {
    holding
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a stream's task (the `i`-th stream, on connection `i` of
/// whichever replica `directory` picks) and returns its handle.
pub fn spawn(
    directory: Arc<Directory>,
    i: usize,
    target: Target,
    reader: Reader,
    stall: watch::Receiver<bool>,
    seed: u64,
) -> Stream {
    let holding = Arc::new(Mutex::new(Holding::default()));
    let task_holding = holding.clone();
    let task_target = target.clone();
    let api = match target {
        Target::Inbound { .. } => Api::Policy,
        _ => Api::Destination,
    };
    tokio::spawn(async move {
        let mut rng = Rng::new(seed);
        let mut backoff = Duration::from_millis(100);
        let mut current = None;
        // Whether the last attempt reached its replica's server (an answer
        // or a status from it, not a refused connection).
        let mut answered = true;
        loop {
            let replica = directory.pick(current, answered, &mut rng);
            answered = true;
            current = Some(replica);
            lock(&task_holding).replica = Some(replica);
            let channel = directory.channel(replica, api, i);
            let mut client = DestinationClient::new(channel.clone());
            let mut inbound = InboundServerPoliciesClient::new(channel);
            let attached = Attached::new(&directory, replica);
            let received = match &task_target {
                Target::Get {
                    service,
                    port,
                    node,
                } => {
                    let request = GetDestination {
                        scheme: "k8s".into(),
                        path: format!("{service}.{NS}.svc.cluster.local:{port}"),
                        context_token: format!(r#"{{"ns":"{NS}","nodeName":"{node}"}}"#),
                    };
                    match client.get(request).await {
                        Ok(response) => {
                            let mut stream = response.into_inner();
                            start(&task_holding);
                            read(
                                &task_holding,
                                reader,
                                &stall,
                                &mut rng,
                                &mut stream,
                                apply_update,
                            )
                            .await
                        }
                        Err(status) => {
                            answered = from_server(&status);
                            failed(&task_holding, &status)
                        }
                    }
                }
                Target::Profile { service, port } => {
                    let request = GetDestination {
                        scheme: "k8s".into(),
                        path: format!("{service}.{NS}.svc.cluster.local:{port}"),
                        context_token: format!(r#"{{"ns":"{NS}","nodeName":""}}"#),
                    };
                    match client.get_profile(request).await {
                        Ok(response) => {
                            let mut stream = response.into_inner();
                            start(&task_holding);
                            read(
                                &task_holding,
                                reader,
                                &stall,
                                &mut rng,
                                &mut stream,
                                apply_profile,
                            )
                            .await
                        }
                        Err(status) => {
                            answered = from_server(&status);
                            failed(&task_holding, &status)
                        }
                    }
                }
                Target::Inbound { pod, port } => {
                    let request = PortSpec {
                        workload: format!(r#"{{"ns":"{NS}","pod":"{pod}"}}"#),
                        port: u32::from(*port),
                    };
                    match inbound.watch_port(request).await {
                        Ok(response) => {
                            let mut stream = response.into_inner();
                            start(&task_holding);
                            read(
                                &task_holding,
                                reader,
                                &stall,
                                &mut rng,
                                &mut stream,
                                apply_inbound,
                            )
                            .await
                        }
                        Err(status) => {
                            answered = from_server(&status);
                            failed(&task_holding, &status)
                        }
                    }
                }
            };
            drop(attached);
            lock(&task_holding).connected = false;
            // As proxies do: retry soon, back off while failing.
            if received > 0 {
                backoff = Duration::from_millis(100);
            }
            let jitter = Duration::from_millis(rng.below(100) as u64);
            tokio::time::sleep(backoff + jitter).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    });
    Stream {
        target,
        reader,
        holding,
    }
}

/// A stream counted on its replica while it lives (the balancer's load).
struct Attached<'a> {
    directory: &'a Directory,
    replica: usize,
}

impl<'a> Attached<'a> {
    fn new(directory: &'a Directory, replica: usize) -> Self {
        directory.attach(replica, true);
        Self { directory, replica }
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        self.directory.attach(self.replica, false);
    }
}

/// Whether `status` came from a server (it answered, if with an error)
/// rather than from the client's own transport (a refused connection):
/// statuses made from a transport error carry it as their source.
fn from_server(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_none()
}

/// A new stream is open: it starts from nothing (its first message is the
/// full state).
fn start(holding: &Mutex<Holding>) {
    let mut h = lock(holding);
    h.connected = true;
    h.not_found = false;
    h.addrs.clear();
    h.profile = None;
    h.inbound = None;
    h.opened += 1;
}

/// A stream failed to open, or ended with `status` (counted in
/// [`crate::ends`]).
fn failed(holding: &Mutex<Holding>, status: &tonic::Status) -> u64 {
    let mut h = lock(holding);
    h.last_error = Some(format!("{:?}: {}", status.code(), status.message()));
    // Refused for a Service that does not exist (the soak deletes some):
    // nothing is held, and the audit checks that the Service is absent.
    h.not_found = status.code() == tonic::Code::NotFound;
    let reason = crate::ends::describe_status(status);
    if h.not_found {
        crate::ends::stream_refused_as_expected(reason);
    } else {
        crate::ends::stream_ended(reason, None);
    }
    if h.not_found {
        h.addrs.clear();
    }
    0
}

/// Reads messages until the stream ends; returns how many arrived.
async fn read<M>(
    holding: &Mutex<Holding>,
    reader: Reader,
    stall: &watch::Receiver<bool>,
    rng: &mut Rng,
    stream: &mut tonic::Streaming<M>,
    apply: fn(&mut Holding, M),
) -> u64 {
    let mut received = 0;
    loop {
        match reader {
            Reader::Normal => {}
            Reader::Slow(pause) => {
                let extra = rng.below(pause.as_millis() as usize + 1) as u64;
                tokio::time::sleep(pause + Duration::from_millis(extra)).await;
            }
            Reader::Stallable => {
                let mut stall = stall.clone();
                let _ = stall.wait_for(|stalled| !*stalled).await;
            }
        }
        match stream.message().await {
            Ok(Some(message)) => {
                received += 1;
                let mut h = lock(holding);
                h.messages += 1;
                apply(&mut h, message);
            }
            Ok(None) => {
                crate::ends::stream_ended("ended by the server (OK)".into(), None);
                lock(holding).last_error = Some("stream ended (OK)".into());
                return received;
            }
            Err(status) => {
                failed(holding, &status);
                return received;
            }
        }
    }
}

/// Applies a `Get` update to what the stream holds.
pub fn apply_update(h: &mut Holding, update: Update) {
    match update.update {
        Some(update::Update::Add(set)) => {
            for wa in set.addrs {
                match wa.addr.map(SocketAddr::try_from) {
                    Some(Ok(addr)) => {
                        h.addrs.insert(addr);
                    }
                    _ => h.anomalies += 1,
                }
            }
        }
        Some(update::Update::Remove(set)) => {
            for addr in set.addrs {
                match SocketAddr::try_from(addr) {
                    Ok(addr) => {
                        if !h.addrs.remove(&addr) {
                            h.anomalies += 1;
                        }
                    }
                    Err(_) => h.anomalies += 1,
                }
            }
        }
        Some(update::Update::NoEndpoints(_)) => h.addrs.clear(),
        None => h.anomalies += 1,
    }
}

/// Keeps the last profile.
pub fn apply_profile(h: &mut Holding, profile: DestinationProfile) {
    h.profile = Some(ProfileView {
        routes: profile
            .routes
            .iter()
            .map(|r| r.metrics_labels.get("route").cloned().unwrap_or_default())
            .collect(),
        opaque: profile.opaque_protocol,
    });
}

/// Keeps the last inbound server.
pub fn apply_inbound(h: &mut Holding, server: InboundServer) {
    let label = |k: &str| server.labels.get(k).cloned().unwrap_or_default();
    let protocol = match server.protocol.and_then(|p| p.kind) {
        Some(proxy_protocol::Kind::Detect(_)) => "Detect",
        Some(proxy_protocol::Kind::Opaque(_)) => "Opaque",
        Some(proxy_protocol::Kind::Tls(_)) => "Tls",
        Some(proxy_protocol::Kind::Http1(_)) => "Http1",
        Some(proxy_protocol::Kind::Http2(_)) => "Http2",
        Some(proxy_protocol::Kind::Grpc(_)) => "Grpc",
        None => "none",
    };
    h.inbound = Some(InboundView {
        kind: label("kind"),
        name: label("name"),
        protocol: protocol.into(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkerd2_proxy_api::destination::{AddrSet, NoEndpoints, WeightedAddr, WeightedAddrSet};

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    fn add(list: &[&str]) -> Update {
        Update {
            update: Some(update::Update::Add(WeightedAddrSet {
                addrs: list
                    .iter()
                    .map(|a| WeightedAddr {
                        addr: Some(sa(a).into()),
                        weight: 10_000,
                        ..Default::default()
                    })
                    .collect(),
                metric_labels: Default::default(),
            })),
        }
    }

    fn remove(list: &[&str]) -> Update {
        Update {
            update: Some(update::Update::Remove(AddrSet {
                addrs: list.iter().map(|a| sa(a).into()).collect(),
            })),
        }
    }

    #[test]
    fn holdings_follow_add_remove_and_no_endpoints() {
        let mut h = Holding::default();
        apply_update(&mut h, add(&["10.0.0.1:80", "10.0.0.2:80"]));
        apply_update(&mut h, add(&["10.0.0.2:80"]));
        apply_update(&mut h, remove(&["10.0.0.1:80"]));
        assert_eq!(h.addrs, BTreeSet::from([sa("10.0.0.2:80")]));
        assert_eq!(h.anomalies, 0);
        apply_update(&mut h, remove(&["10.0.0.9:80"]));
        assert_eq!(h.anomalies, 1, "removing what is not held is an anomaly");
        apply_update(
            &mut h,
            Update {
                update: Some(update::Update::NoEndpoints(NoEndpoints { exists: true })),
            },
        );
        assert!(h.addrs.is_empty());
    }
}
