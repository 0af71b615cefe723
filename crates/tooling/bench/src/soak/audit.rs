//! The audit: list the API afresh, compute what every stream should hold
//! ([`super::truth`]), and compare it with what each stream holds, waiting
//! for quiet (every stream correct, and still correct a moment later) up to
//! a deadline. Streams still wrong at the deadline are stale.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    core::v1::{Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{Api, api::ListParams};

use super::{
    NS,
    client::{Stream, Target},
    ops::{servers, service_profiles},
    truth::{self, InboundView, PodFacts, PodKey, ProfileView},
};

/// The objects of the soak's namespace, listed once.
pub struct World {
    services: BTreeMap<String, Service>,
    slices: Vec<EndpointSlice>,
    pods: BTreeMap<PodKey, PodFacts>,
    /// ServiceProfile specs by name.
    profiles: BTreeMap<String, serde_json::Value>,
    /// Servers: (name, spec), by name.
    servers: Vec<(String, serde_json::Value)>,
    enable_ipv6: bool,
}

/// What a stream should hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    Addrs(BTreeSet<SocketAddr>),
    /// `Get` of a Service that does not exist: refused `NotFound` (as the
    /// original refuses it; the client retries), or, on a stream opened
    /// before the Service went, no addresses.
    NoService,
    Profile(ProfileView),
    /// `None`: the pod does not exist (the stream cannot be served).
    Inbound(Option<InboundView>),
}

impl World {
    /// Lists Services, EndpointSlices, Pods and ServiceProfiles.
    pub async fn list(client: &kube::Client, enable_ipv6: bool) -> anyhow::Result<Self> {
        let lp = ListParams::default();
        let services = Api::<Service>::namespaced(client.clone(), NS)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, s)))
            .collect();
        let slices = Api::<EndpointSlice>::namespaced(client.clone(), NS)
            .list(&lp)
            .await?
            .items;
        let pods = Api::<Pod>::namespaced(client.clone(), NS)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|p| {
                let key = (
                    p.metadata.namespace.clone().unwrap_or_else(|| NS.into()),
                    p.metadata.name.clone()?,
                );
                let spec = p.spec.as_ref();
                let node_name = spec.and_then(|s| s.node_name.clone()).unwrap_or_default();
                let named_ports = spec
                    .into_iter()
                    .flat_map(|s| &s.containers)
                    .flat_map(|c| c.ports.iter().flatten())
                    .filter_map(|p| Some((p.name.clone()?, p.container_port)))
                    .collect();
                let labels = p.metadata.labels.clone().unwrap_or_default();
                Some((
                    key,
                    PodFacts {
                        node_name,
                        labels,
                        named_ports,
                    },
                ))
            })
            .collect();
        let profiles = service_profiles(client)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|sp| {
                let name = sp.metadata.name.clone()?;
                Some((name, sp.data.get("spec").cloned().unwrap_or_default()))
            })
            .collect();
        let mut servers: Vec<(String, serde_json::Value)> = servers(client)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|srv| {
                let name = srv.metadata.name.clone()?;
                Some((name, srv.data.get("spec").cloned().unwrap_or_default()))
            })
            .collect();
        servers.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self {
            services,
            slices,
            pods,
            profiles,
            servers,
            enable_ipv6,
        })
    }

    /// What a stream of `target` should hold.
    pub fn expected(&self, target: &Target) -> Expected {
        match target {
            Target::Get {
                service,
                port,
                node,
            } if !self.services.contains_key(service) => Expected::NoService,
            Target::Get {
                service,
                port,
                node,
            } => {
                let slices: Vec<&EndpointSlice> = self
                    .slices
                    .iter()
                    .filter(|s| {
                        s.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("kubernetes.io/service-name"))
                            == Some(service)
                    })
                    .collect();
                Expected::Addrs(truth::get_endpoints(
                    NS,
                    service,
                    self.services.get(service),
                    &slices,
                    &self.pods,
                    *port,
                    node,
                    self.enable_ipv6,
                ))
            }
            Target::Profile { service, port } => {
                let name = format!("{service}.{NS}.svc.cluster.local");
                Expected::Profile(truth::profile(
                    self.services.get(service),
                    self.profiles.get(&name),
                    *port,
                ))
            }
            Target::Inbound { pod, port } => Expected::Inbound(
                self.pods
                    .get(&(NS.to_string(), pod.clone()))
                    .map(|facts| truth::inbound(facts, &self.servers, *port)),
            ),
        }
    }
}

/// One stream that does not hold the truth.
#[derive(Clone, Debug)]
pub struct Wrong {
    pub target: Target,
    pub connected: bool,
    /// The replica the stream is on (or last tried).
    pub replica: Option<usize>,
    pub held: String,
    pub expected: String,
    pub last_error: Option<String>,
}

/// Streams whose holding differs from the truth right now (`skip` leaves
/// some out, e.g. streams of a server that is down on purpose).
pub fn wrong_streams(
    streams: &[Stream],
    world: &World,
    skip: &dyn Fn(&Target) -> bool,
) -> Vec<Wrong> {
    let mut cache: BTreeMap<&Target, Expected> = BTreeMap::new();
    let mut wrong = Vec::new();
    for stream in streams {
        if skip(&stream.target) {
            continue;
        }
        let expected = cache
            .entry(&stream.target)
            .or_insert_with(|| world.expected(&stream.target));
        let h = stream.holding();
        let ok = match expected {
            Expected::NoService => h.addrs.is_empty() && (h.connected || h.not_found),
            _ => h.connected,
        } && match expected {
            Expected::NoService => true,
            Expected::Addrs(addrs) => h.addrs == *addrs,
            Expected::Profile(view) => h.profile.as_ref() == Some(view),
            Expected::Inbound(view) => h.inbound.as_ref() == view.as_ref(),
        };
        if !ok {
            wrong.push(Wrong {
                target: stream.target.clone(),
                connected: h.connected,
                replica: h.replica,
                held: match expected {
                    Expected::Addrs(_) | Expected::NoService => format_addrs(&h.addrs),
                    Expected::Profile(_) => h
                        .profile
                        .as_ref()
                        .map_or_else(|| "no profile".into(), ToString::to_string),
                    Expected::Inbound(_) => h
                        .inbound
                        .as_ref()
                        .map_or_else(|| "no server".into(), ToString::to_string),
                },
                expected: match expected {
                    Expected::Addrs(addrs) => format_addrs(addrs),
                    Expected::NoService => "NotFound (no such Service)".into(),
                    Expected::Profile(view) => view.to_string(),
                    Expected::Inbound(view) => view
                        .as_ref()
                        .map_or_else(|| "no such pod".into(), ToString::to_string),
                },
                last_error: h.last_error.clone(),
            });
        }
    }
    wrong
}

fn format_addrs(addrs: &BTreeSet<SocketAddr>) -> String {
    let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    format!("[{}]", list.join(", "))
}

/// The outcome of one audit.
pub struct AuditResult {
    /// Streams audited.
    pub audited: usize,
    /// When every stream was correct (and stayed so); `None`: not within
    /// the deadline.
    pub correct_at: Option<Instant>,
    /// Streams wrong at the first check (what the fault left behind).
    pub wrong_at_first: Vec<Wrong>,
    /// Streams still wrong at the deadline.
    pub stale: Vec<Wrong>,
    /// Per replica (by index; `None`: not yet on any): streams audited on
    /// it at the end, and how many of them were stale.
    pub per_replica: BTreeMap<Option<usize>, (usize, usize)>,
}

/// Streams audited and stale, per replica, at the end of an audit.
fn per_replica(
    streams: &[Stream],
    stale: &[Wrong],
    skip: &dyn Fn(&Target) -> bool,
) -> BTreeMap<Option<usize>, (usize, usize)> {
    let mut counts: BTreeMap<Option<usize>, (usize, usize)> = BTreeMap::new();
    for stream in streams.iter().filter(|s| !skip(&s.target)) {
        counts.entry(stream.holding().replica).or_default().0 += 1;
    }
    for wrong in stale {
        counts.entry(wrong.replica).or_default().1 += 1;
    }
    counts
}

/// Lists the truth once (nothing writes during an audit), then waits until
/// every stream matches it and still does `settle` later, or `deadline`.
pub async fn wait_for_quiet(
    client: &kube::Client,
    streams: &[Stream],
    enable_ipv6: bool,
    deadline: Duration,
    skip: &dyn Fn(&Target) -> bool,
) -> anyhow::Result<AuditResult> {
    let start = Instant::now();
    let world = World::list(client, enable_ipv6).await?;
    let audited = streams.iter().filter(|s| !skip(&s.target)).count();
    let settle = Duration::from_secs(2);
    let mut correct_since: Option<Instant> = None;
    let mut wrong_at_first: Option<Vec<Wrong>> = None;
    loop {
        let wrong = wrong_streams(streams, &world, skip);
        let first = wrong_at_first.get_or_insert_with(|| wrong.clone());
        let now = Instant::now();
        if wrong.is_empty() {
            let since = *correct_since.get_or_insert(now);
            if now - since >= settle {
                return Ok(AuditResult {
                    audited,
                    correct_at: Some(since),
                    wrong_at_first: std::mem::take(first),
                    per_replica: per_replica(streams, &[], skip),
                    stale: Vec::new(),
                });
            }
        } else {
            correct_since = None;
            if now - start >= deadline {
                return Ok(AuditResult {
                    audited,
                    correct_at: None,
                    wrong_at_first: std::mem::take(first),
                    per_replica: per_replica(streams, &wrong, skip),
                    stale: wrong,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
