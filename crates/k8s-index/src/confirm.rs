//! Lookups that missed the index, confirmed with the API server, so that no
//! answer depends on whether a watch has caught up yet.
//!
//! An index is a watch's copy of the cluster: an object created a moment
//! ago may not be in it yet. A controller that answers "no such object"
//! from a lagging copy gives a proxy an answer it caches (linkerd2-proxy
//! does not retry `NotFound` from the outbound policy API, nor
//! `InvalidArgument` from `GetProfile`), so a request that misses asks the
//! API server once, with a consistent read (no `resourceVersion`: served
//! at the newest revision), whether the object exists:
//!
//! - it does not: the miss stands ([`Confirmation::Absent`]);
//! - it does: the caller waits until its index shows it (every applied
//!   event wakes it, [`crate::IndexMetrics::applied_events`]), then answers
//!   from the index as usual ([`Confirmation::CaughtUp`]); the wait is
//!   bounded ([`Confirmation::Lagging`] after it), for an object the index
//!   deliberately leaves out (one that fails to decode) must not hold the
//!   request for ever;
//! - the API server cannot be asked: the index answers as it is
//!   ([`Confirmation::Unconfirmed`]), as it would without this check.
//!
//! Only misses pay: a lookup the index answers never reaches the API
//! server. At most [`MAX_CONCURRENT`] checks run at once per process; the
//! others wait their turn within the same bound. Each outcome is counted in
//! `index_miss_checks_total{kind,result}`.

use std::{fmt::Debug, sync::Arc, time::Duration};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource, api::ListParams};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};
use serde::de::DeserializeOwned;
use tokio::sync::{Semaphore, watch};

use crate::IndexMetrics;

/// How many checks of one process may be under way at once.
pub const MAX_CONCURRENT: usize = 32;

/// How long a request waits, in all, for the API server's answer and then
/// for its index to show what the API server has.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// What the API server is asked about a miss.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The outcome of a check (the caller answers from its index in every case;
/// this says what that answer is worth, for logs and metrics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
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
}

impl Confirmation {
    fn label(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::CaughtUp => "caught_up",
            Self::Lagging => "lagging",
            Self::Unconfirmed(_) => "unconfirmed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    kind: &'static str,
    result: &'static str,
}

/// Confirms index misses with the API server (see the module doc). Cheap to
/// clone; clones share the concurrency bound and the metrics.
#[derive(Clone)]
pub struct MissConfirmer {
    client: Client,
    /// Changes whenever a watch of the process applied an event.
    applied: watch::Receiver<u64>,
    /// At most [`MAX_CONCURRENT`] checks at once.
    permits: Arc<Semaphore>,
    /// The bound of one check, API call and wait included.
    wait: Duration,
    checks: Family<CheckLabels, Counter>,
}

impl MissConfirmer {
    /// Checks with `client`, waking on the events applied by the watches
    /// that report to `index_metrics`; counted under `registry` (may be a
    /// throwaway registry in tests).
    pub fn new(client: Client, index_metrics: &IndexMetrics, registry: &mut Registry) -> Self {
        let checks = Family::<CheckLabels, Counter>::default();
        registry.sub_registry_with_prefix("index").register(
            "miss_checks",
            "Lookups that missed the index and were checked with the API server, by kind and result (absent, caught_up, lagging, unconfirmed)",
            checks.clone(),
        );
        Self {
            client,
            applied: index_metrics.applied_events(),
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT)),
            wait: DEFAULT_WAIT,
            checks,
        }
    }

    /// The same checks with another bound (tests use a short one).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Checks a miss of a `K` with the API server, then waits (bounded)
    /// until `in_index` is true if the API server has one. `in_index` is
    /// the caller's lookup, repeated: it must take its index's lock itself,
    /// briefly, and hold nothing across calls. `kind` names `K` in logs and
    /// metrics (e.g. `services`).
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
        let outcome = self.check::<K>(&query, &in_index).await;
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
            Confirmation::Absent => {}
        }
        self.checks
            .get_or_create(&CheckLabels {
                kind,
                result: outcome.label(),
            })
            .inc();
        outcome
    }

    async fn check<K>(&self, query: &Query, in_index: &impl Fn() -> bool) -> Confirmation
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let deadline = tokio::time::Instant::now() + self.wait;
        let asked = tokio::time::timeout_at(deadline, async {
            let _permit = self.permits.acquire().await;
            exists::<K>(&self.client, query).await
        })
        .await;
        match asked {
            Err(_) => {
                return Confirmation::Unconfirmed(format!("no answer within {:?}", self.wait));
            }
            Ok(Err(error)) => return Confirmation::Unconfirmed(error.to_string()),
            Ok(Ok(false)) => return Confirmation::Absent,
            Ok(Ok(true)) => {}
        }
        let mut applied = self.applied.clone();
        let caught_up = tokio::time::timeout_at(deadline, async {
            loop {
                // Marks the current value seen before looking, so an event
                // applied after the look wakes the wait below.
                applied.borrow_and_update();
                if in_index() {
                    return true;
                }
                if applied.changed().await.is_err() {
                    // No watch can apply anything any more.
                    return false;
                }
            }
        })
        .await;
        match caught_up {
            Ok(true) => Confirmation::CaughtUp,
            Ok(false) | Err(_) => Confirmation::Lagging,
        }
    }
}

/// Whether the API server has an object answering `query` (metadata only).
async fn exists<K>(client: &Client, query: &Query) -> Result<bool, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    match query {
        Query::Named { namespace, name } => {
            let api = Api::<K>::namespaced(client.clone(), namespace);
            Ok(api.get_metadata_opt(name).await?.is_some())
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
            Ok(!api.list_metadata(&params).await?.items.is_empty())
        }
    }
}
