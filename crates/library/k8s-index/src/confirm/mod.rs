//! Lookups that missed the index, confirmed with the API server, so that no
//! answer depends on whether a watch has caught up yet, at a cost that no
//! client can raise.
//!
//! An index is a watch's copy of the cluster: an object created a moment
//! ago may not be in it yet. A controller that answers "no such object"
//! from a lagging copy gives a proxy an answer it caches (linkerd2-proxy
//! does not retry `NotFound` from the outbound policy API, nor
//! `InvalidArgument` from `GetProfile`). So a lookup that misses is settled
//! in this order:
//!
//! 1. **By a fact, for free.** A name that is no DNS-1123 name can exist
//!    nowhere ([`names`]); the callers also settle addresses outside every
//!    ServiceCIDR ([`crate::service_cidrs`]) and outside the cluster
//!    networks. These answer [`Confirmation::Settled`] with no request.
//! 2. **By one request, within a budget.** Otherwise the API server is
//!    asked once, with a consistent read (no `resourceVersion`: served at
//!    the newest revision), whether the object exists. Each kind may cause
//!    at most [`CHECKS_PER_SECOND`] such requests a second per process
//!    ([`budget`]); a lookup that cannot have a slot within
//!    [`MAX_SLOT_WAIT`] still waits that long for its index to show the
//!    object (a burst of objects created a moment ago is answered so, with
//!    no request; at most [`MAX_SLOTLESS_WAITERS`] lookups wait so at
//!    once), then is refused ([`Confirmation::Busy`]): its caller answers
//!    `UNAVAILABLE` (a proxy retries it) rather than queue or answer from
//!    an index that may lag. Misses waiting for a slot at once share its
//!    request when one request answers them all ([`batch`]): identical
//!    ones, and names of one namespace (asked with one list of the
//!    namespace's metadata), so a flood of names costs a request per slot.
//! 3. **Then from the index.** The object does not exist: the miss stands
//!    ([`Confirmation::Absent`]). It does: the lookup waits until its index
//!    shows it, woken only by events for the objects the API server named
//!    ([`waiters`]), and answers from the index as usual
//!    ([`Confirmation::CaughtUp`]); the wait is bounded
//!    ([`Confirmation::Lagging`] after it), for an object the index
//!    deliberately leaves out (one that fails to decode) must not hold the
//!    request for ever. The API server cannot be asked: the index answers
//!    as it is ([`Confirmation::Unconfirmed`]), as it would without this
//!    check.
//!
//! Only misses pay: a lookup the index answers never reaches the API
//! server. Each outcome is counted in `index_miss_checks_total{kind,result}`
//! and each request in `index_miss_requests_total{kind}` (`kind` is the
//! caller's constant, never request text).

pub mod batch;
pub mod budget;
pub mod names;
mod waiters;

pub use waiters::KeyWaiters;

use std::{collections::HashMap, fmt::Debug, sync::Arc, time::Duration};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource, api::ListParams};
use parking_lot::Mutex;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};
use serde::de::DeserializeOwned;
use tokio::{sync::watch, time::Instant};

use crate::{IndexMetrics, ObjectKey, ServiceCidrs};
use batch::{BatchKey, Names, Request};
use budget::Budget;

/// Requests a second that misses of one kind may cause, per process: with
/// the one slot of burst, no window of a second or more holds more than
/// ten a second.
pub const CHECKS_PER_SECOND: f64 = 9.0;

/// Requests of one kind that may go at once after a quiet spell.
pub const CHECK_BURST: f64 = 1.0;

/// The longest a miss waits for a request slot, or without one for its
/// index, before it is refused: short enough that a miss with a slot is
/// answered, request included, or a refused one refused, within 200 ms.
pub const MAX_SLOT_WAIT: Duration = Duration::from_millis(150);

/// Lookups of a process that may wait for their index without a request
/// slot at once; more are refused at once.
pub const MAX_SLOTLESS_WAITERS: usize = 256;

/// How often a lookup without a slot looks at its index again.
const SLOTLESS_POLL: Duration = Duration::from_millis(20);

/// How long a request waits, in all, for the API server's answer and then
/// for its index to show what the API server has.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// What the API server is asked about a miss.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Query {
    /// The object `namespace/name`.
    Named { namespace: String, name: String },
    /// Objects of `namespace` (`None`: of any namespace) matching a field
    /// selector (such as `spec.clusterIP=10.0.0.12` for Services,
    /// `status.podIP=…` for pods, `metadata.name=…`) and, if given, the
    /// label selector the caller's watch uses, so that only what its index
    /// would hold counts.
    Selected {
        namespace: Option<String>,
        fields: String,
        labels: Option<String>,
    },
}

/// The outcome of a check: what the index's answer is worth (for logs and
/// metrics), or that there is no answer yet ([`Confirmation::Busy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// A fact settles it without asking (a name no object can have).
    Settled,
    /// The API server has no such object either: the miss is the truth.
    Absent,
    /// The API server has it; the index showed it by the time the answer
    /// came back, or after waiting for its watch.
    CaughtUp,
    /// The API server has it, and the index did not show it within the
    /// bound (the index leaves such objects out, or its watch is stuck).
    Lagging,
    /// The API server could not be asked (the reason); the index's answer
    /// stands.
    Unconfirmed(String),
    /// The kind's request budget is spent for now: the caller answers
    /// `UNAVAILABLE` (retried by a proxy), not from the index.
    Busy,
}

impl Confirmation {
    fn label(&self) -> &'static str {
        match self {
            Self::Settled => "settled",
            Self::Absent => "absent",
            Self::CaughtUp => "caught_up",
            Self::Lagging => "lagging",
            Self::Unconfirmed(_) => "unconfirmed",
            Self::Busy => "busy",
        }
    }

    /// Whether the caller may answer from its index ([`Self::Busy`] is the
    /// one that may not).
    pub fn answerable(&self) -> bool {
        *self != Self::Busy
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    kind: &'static str,
    result: &'static str,
}

/// What a request answered: the keys of the objects it found (empty:
/// absent), or why it could not be made.
type Answer = Result<Vec<ObjectKey>, String>;

/// A request's answer, shared by the misses that joined it.
type Pending = watch::Receiver<Option<Answer>>;

/// A request holding a slot, not sent yet: misses of its batch join it.
struct Waiting {
    answer: Pending,
    /// The names it asks for so far (its batch's misses add theirs).
    names: Names,
}

/// The requests of every kind waiting to be sent, by batch.
type WaitingRequests = Mutex<HashMap<(&'static str, BatchKey), Waiting>>;

/// Confirms index misses with the API server (see the module doc). Cheap to
/// clone; clones share the budgets, the pending requests and the metrics.
#[derive(Clone)]
pub struct MissConfirmer {
    client: Client,
    /// The watches' waiters, by kind ([`IndexMetrics::waiters`]).
    index_metrics: IndexMetrics,
    /// One request budget per kind, created at its first miss (the kinds
    /// are the callers' constants, a handful per process).
    budgets: Arc<Mutex<HashMap<&'static str, Budget>>>,
    /// Requests holding a slot but not yet sent, by kind and batch: a miss
    /// of the same batch joins instead of taking another slot. At most the
    /// budget's reservations (`rate × max wait + burst`) per kind, each
    /// with at most [`batch::MAX_BATCH_NAMES`] names.
    pending: Arc<WaitingRequests>,
    /// The bound of one check's wait for its index, API call included.
    wait: Duration,
    /// Lookups waiting for their index without a request slot
    /// ([`MAX_SLOTLESS_WAITERS`] at most).
    slotless: Arc<tokio::sync::Semaphore>,
    /// The cluster's Service ranges: an address outside them is no
    /// ClusterIP ([`Self::settled_not_cluster_ip`]). Unknown until given.
    service_cidrs: ServiceCidrs,
    checks: Family<CheckLabels, Counter>,
    requests: Family<KindLabel, Counter>,
}

impl MissConfirmer {
    /// Checks with `client`, waking on the events applied by the watches
    /// that report to `index_metrics`; counted under `registry` (may be a
    /// throwaway registry in tests).
    pub fn new(client: Client, index_metrics: &IndexMetrics, registry: &mut Registry) -> Self {
        let checks = Family::<CheckLabels, Counter>::default();
        registry.sub_registry_with_prefix("index").register(
            "miss_checks",
            "Lookups that missed the index, by kind and result: settled (by a fact, no request), absent, caught_up, lagging, unconfirmed (the API server could not be asked), busy (the kind's request budget was spent: answered UNAVAILABLE)",
            checks.clone(),
        );
        let requests = Family::<KindLabel, Counter>::default();
        registry.sub_registry_with_prefix("index").register(
            "miss_requests",
            "API requests that lookups which missed the index caused, by kind (a request answers every miss that joined it)",
            requests.clone(),
        );
        Self {
            client,
            index_metrics: index_metrics.clone(),
            budgets: Arc::default(),
            pending: Arc::default(),
            wait: DEFAULT_WAIT,
            slotless: Arc::new(tokio::sync::Semaphore::new(MAX_SLOTLESS_WAITERS)),
            service_cidrs: ServiceCidrs::default(),
            checks,
            requests,
        }
    }

    /// The same checks, with addresses outside `cidrs` settled as no
    /// ClusterIP.
    pub fn with_service_cidrs(mut self, cidrs: ServiceCidrs) -> Self {
        self.service_cidrs = cidrs;
        self
    }

    /// Whether the Service ranges settle that `ip` is no Service's
    /// ClusterIP (counted as a `settled` miss of `services`); `false` means
    /// it may be one, and the miss is checked as usual.
    pub fn settled_not_cluster_ip(&self, ip: std::net::IpAddr) -> bool {
        let settled = !self.service_cidrs.may_be_cluster_ip(ip);
        if settled {
            self.checks
                .get_or_create(&CheckLabels {
                    kind: "services",
                    result: Confirmation::Settled.label(),
                })
                .inc();
        }
        settled
    }

    /// The same checks with another bound (tests use a short one).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Checks a miss of a `K` with the API server, then waits (bounded)
    /// until `in_index` is true if the API server has one. `in_index` is
    /// the caller's lookup, repeated: it must take its index's lock itself,
    /// briefly, and hold nothing across calls. `kind` names `K`'s watch (as
    /// given to [`crate::WatchTask`], e.g. `services`): its events wake the
    /// wait, and it labels the metrics.
    pub async fn confirm<K>(
        &self,
        kind: &'static str,
        query: Query,
        in_index: impl Fn() -> bool,
    ) -> Confirmation
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let outcome = self.check::<K>(kind, &query, &in_index).await;
        match &outcome {
            Confirmation::Lagging => tracing::warn!(
                %kind, ?query,
                "the API server has an object the index has not shown within {:?}; answering from the index",
                self.wait
            ),
            Confirmation::Unconfirmed(error) => tracing::debug!(
                %kind, ?query, %error,
                "could not check a lookup that missed with the API server; answering from the index"
            ),
            Confirmation::CaughtUp => {
                tracing::debug!(%kind, ?query, "the index caught up with the API server")
            }
            Confirmation::Busy => tracing::debug!(
                %kind, ?query,
                "the request budget of lookups that missed is spent; answering UNAVAILABLE"
            ),
            Confirmation::Settled | Confirmation::Absent => {}
        }
        self.checks
            .get_or_create(&CheckLabels {
                kind,
                result: outcome.label(),
            })
            .inc();
        outcome
    }

    async fn check<K>(
        &self,
        kind: &'static str,
        query: &Query,
        in_index: &impl Fn() -> bool,
    ) -> Confirmation
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        if !names::could_exist(query) {
            return Confirmation::Settled;
        }
        let deadline = Instant::now() + self.wait;
        let answer = match self.slot(kind, query) {
            Slot::Refused => return self.without_slot(in_index).await,
            Slot::Joined(mut pending) => {
                match tokio::time::timeout_at(deadline, pending.wait_for(Option::is_some)).await {
                    Ok(Ok(answer)) => answer.clone().unwrap_or_else(|| Err("no answer".into())),
                    Ok(Err(_)) => Err("the request it joined was dropped".into()),
                    Err(_) => Err(format!("no answer within {:?}", self.wait)),
                }
            }
            Slot::Own { at, answer } => {
                // Unregisters the slot if this lookup is dropped (its client
                // went) before sending, so no later miss joins a request
                // that will never be made.
                let unsent = Unsent {
                    pending: &self.pending,
                    key: Some((kind, BatchKey::of(query))),
                };
                tokio::time::sleep_until(at).await;
                // Sent from here on: later misses take a slot of their own.
                let request = unsent.send().request(query);
                self.requests.get_or_create(&KindLabel { kind }).inc();
                let asked = tokio::time::timeout_at(deadline, ask::<K>(&self.client, &request))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.wait)));
                answer.send_replace(Some(asked.clone()));
                asked
            }
        };
        let keys = match answer {
            Err(error) => return Confirmation::Unconfirmed(error),
            Ok(keys) => batch::own(query, &keys),
        };
        if keys.is_empty() {
            return Confirmation::Absent;
        }
        let waiting = self.index_metrics.waiters(kind).wait_for(keys);
        match tokio::time::timeout_at(deadline, waiting.until(in_index)).await {
            Ok(()) => Confirmation::CaughtUp,
            Err(_) => Confirmation::Lagging,
        }
    }

    /// A miss that had no request slot: answered from its index if the
    /// index shows the object within [`MAX_SLOT_WAIT`] (looked at every
    /// [`SLOTLESS_POLL`], not woken by events), else refused.
    async fn without_slot(&self, in_index: &impl Fn() -> bool) -> Confirmation {
        let Ok(_waiting) = self.slotless.try_acquire() else {
            return Confirmation::Busy;
        };
        let deadline = Instant::now() + MAX_SLOT_WAIT;
        loop {
            if in_index() {
                return Confirmation::CaughtUp;
            }
            if Instant::now() >= deadline {
                return Confirmation::Busy;
            }
            tokio::time::sleep(SLOTLESS_POLL.min(deadline - Instant::now())).await;
        }
    }

    /// A slot for `query`'s request: joined to one of its batch waiting for
    /// its slot, reserved in the kind's budget, or refused.
    fn slot(&self, kind: &'static str, query: &Query) -> Slot {
        let mut pending = self.pending.lock();
        let key = (kind, BatchKey::of(query));
        if let Some(waiting) = pending.get_mut(&key) {
            return if waiting.names.join(query) {
                Slot::Joined(waiting.answer.clone())
            } else {
                Slot::Refused
            };
        }
        let now = Instant::now();
        let at = self
            .budgets
            .lock()
            .entry(kind)
            .or_insert_with(|| Budget::new(CHECKS_PER_SECOND, CHECK_BURST, MAX_SLOT_WAIT, now))
            .reserve(now);
        let Ok(at) = at else {
            return Slot::Refused;
        };
        let (answer, receiver) = watch::channel(None);
        let mut names = Names::default();
        names.join(query);
        pending.insert(
            key,
            Waiting {
                answer: receiver,
                names,
            },
        );
        Slot::Own { at, answer }
    }

    /// Requests holding a slot that are not sent yet (tests).
    pub fn pending(&self) -> usize {
        self.pending.lock().len()
    }

    /// Requests that misses of `kind` caused so far (tests and benchmarks).
    pub fn requests(&self, kind: &'static str) -> u64 {
        self.requests.get_or_create(&KindLabel { kind }).get()
    }
}

/// A request slot not yet sent; dropping it unregisters the slot.
struct Unsent<'a> {
    pending: &'a WaitingRequests,
    /// `None` once sent.
    key: Option<(&'static str, BatchKey)>,
}

impl Unsent<'_> {
    /// Closes the batch to later misses and returns the names it asks for.
    fn send(mut self) -> Names {
        self.key
            .take()
            .and_then(|key| self.pending.lock().remove(&key))
            .map(|waiting| waiting.names)
            .unwrap_or_default()
    }
}

impl Drop for Unsent<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.pending.lock().remove(&key);
        }
    }
}

/// How a miss gets its answer from the API server.
enum Slot {
    /// It makes the request itself, at `at`, and shares the answer.
    Own {
        at: Instant,
        answer: watch::Sender<Option<Answer>>,
    },
    /// An identical miss makes it.
    Joined(Pending),
    /// No slot within the bound.
    Refused,
}

/// The keys of the objects answering `request` (metadata only; empty when
/// there are none).
async fn ask<K>(client: &Client, request: &Request) -> Answer
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let query = match request {
        Request::One(query) => query,
        Request::Listed { namespace, .. } => {
            // No limit, as below: served from the API server's watch cache.
            let listed = Api::<K>::namespaced(client.clone(), namespace)
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            return Ok(listed
                .items
                .iter()
                .filter_map(ObjectKey::of)
                .filter(|key| request.wants(key))
                .collect());
        }
    };
    match query {
        Query::Named { namespace, name } => {
            let api = Api::<K>::namespaced(client.clone(), namespace);
            let found = api
                .get_metadata_opt(name)
                .await
                .map_err(|e| e.to_string())?;
            Ok(found
                .map(|_| ObjectKey::new(Some(namespace), name))
                .into_iter()
                .collect())
        }
        Query::Selected {
            namespace,
            fields,
            labels,
        } => {
            let api = match namespace {
                Some(ns) => Api::<K>::namespaced(client.clone(), ns),
                None => Api::<K>::all(client.clone()),
            };
            // No limit: a consistent list without one is served from the
            // API server's watch cache; with one it may page through etcd.
            let mut params = ListParams::default().fields(fields);
            if let Some(labels) = labels {
                params = params.labels(labels);
            }
            let listed = api
                .list_metadata(&params)
                .await
                .map_err(|e| e.to_string())?;
            Ok(listed.items.iter().filter_map(ObjectKey::of).collect())
        }
    }
}
