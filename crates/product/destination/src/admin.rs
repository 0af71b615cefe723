//! Introspection on its own listener (`--introspection-addr`, localhost by
//! default; read-only): what every open stream asked for and how far it has
//! got, what each target's shared state holds, and a consistency audit of
//! both against the index.
//!
//! - `GET /streams`: open `Get` and `GetProfile` streams, oldest first,
//!   paged (`after`=last id seen, `limit`, default 100, at most 1000) and
//!   filtered (`pod`, `namespace` (the client's), `node`, `target` (a
//!   substring of the request path), `kind` = `Get` | `GetProfile`).
//! - `GET /targets?service=<ns>/<name>[&port=<port>]`: each `Get` group of
//!   that Service (its filter key, version, subscribers and the endpoints
//!   its streams are sent) and each profile publisher of it.
//! - `GET /audit`: recomputes every group and profile from the index and
//!   compares it with what is published, and each stream's last sent
//!   version with its group's newest. Differences are listed with both
//!   sides, logged and counted (`audit_mismatches`); the same audit runs in
//!   the background every `--audit-interval-secs`. One audit runs at a
//!   time; callers within [`AUDIT_FRESH_FOR`] of the last one share its
//!   report.
//!
//! Everything reads shared state under the index's read lock or the stream
//! map's short lock; nothing waits on a stream.

use std::{sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};
use grpc_stream::registry::now_ms;
use meridian_runtime::coalesce::Coalesced;
use parking_lot::RwLock;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};
use serde::{Deserialize, Serialize};

use crate::{
    core::{FilterKey, ServiceId},
    grpc::streams::{Followed, ListedStream, StreamKind, StreamRegistry},
    index::{EndpointsIndex, ProfileKey, audit::IndexAudit},
    proto::view::{EndpointView, ProfileView, SnapshotView},
};

/// A stream counts as behind only once its group's newest version is this
/// old: a stream caught between a publish and its write is not behind.
const BEHIND_GRACE_MS: u64 = 1_000;

/// How long an audit's report is shared with later callers.
pub const AUDIT_FRESH_FOR: Duration = Duration::from_secs(1);

/// Page size of `/streams` when `limit` is not given, and its maximum.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1_000;

/// The introspection routes' shared state.
#[derive(Clone)]
pub struct Introspection {
    index: Arc<RwLock<EndpointsIndex>>,
    streams: Arc<StreamRegistry>,
    metrics: AuditMetrics,
    /// The last audit (or why it failed), shared by concurrent callers.
    audits: Arc<Coalesced<Result<AuditReport, String>>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MismatchLabels {
    /// `group`, `profile` or `stream_behind`.
    kind: &'static str,
}

/// The audit's counters.
#[derive(Clone, Debug, Default)]
pub struct AuditMetrics {
    runs: Counter,
    mismatches: Family<MismatchLabels, Counter>,
}

impl AuditMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "audit_runs",
            "Consistency audits of the published state against the index",
            m.runs.clone(),
        );
        registry.register(
            "audit_mismatches",
            "Differences found by the consistency audit, by kind (group, profile, stream_behind)",
            m.mismatches.clone(),
        );
        m
    }
}

impl Introspection {
    pub fn new(
        index: Arc<RwLock<EndpointsIndex>>,
        streams: Arc<StreamRegistry>,
        metrics: AuditMetrics,
    ) -> Self {
        Self {
            index,
            streams,
            metrics,
            audits: Arc::new(Coalesced::new(AUDIT_FRESH_FOR)),
        }
    }

    /// The routes of the introspection listener.
    pub fn routes(self) -> Router {
        Router::new()
            .route("/streams", get(streams))
            .route("/targets", get(targets))
            .route("/audit", get(audit))
            .with_state(self)
    }

    /// An audit's report: the last one if it is fresh, else a new run (off
    /// the async threads: it holds the index's read lock), one at a time.
    pub async fn shared_audit(&self) -> Arc<Result<AuditReport, String>> {
        self.audits
            .get(|| {
                let this = self.clone();
                async move {
                    tokio::task::spawn_blocking(move || this.run_audit())
                        .await
                        .map_err(|error| error.to_string())
                }
            })
            .await
    }

    /// One audit: compares, counts and logs.
    pub fn run_audit(&self) -> AuditReport {
        // The stream list is copied before the index's lock is taken, so
        // the lock is held for the comparison alone.
        let streams = self.streams.all();
        let (index_audit, behind) = {
            let index = self.index.read();
            let audit = index.audit();
            let behind = streams_behind(&index, &streams, now_ms());
            (audit, behind)
        };
        let report = AuditReport::new(&index_audit, behind, self.streams.len());
        self.metrics.runs.inc();
        let count = |kind: &'static str, n: usize| {
            self.metrics
                .mismatches
                .get_or_create(&MismatchLabels { kind })
                .inc_by(n as u64);
        };
        count("group", report.group_mismatches.len());
        count("profile", report.profile_mismatches.len());
        count("stream_behind", report.streams_behind.len());
        for m in &report.group_mismatches {
            tracing::warn!(
                target_service = %m.target, port = m.port, node = %m.node, hostname = %m.hostname,
                version = m.published_version, only_published = ?m.only_published,
                only_in_index = ?m.only_in_index, changed = ?m.changed,
                "audit: a group's published endpoints differ from the index"
            );
        }
        for m in &report.profile_mismatches {
            tracing::warn!(key = %m.key, version = m.published_version,
                "audit: a published profile differs from the index");
        }
        for s in &report.streams_behind {
            tracing::info!(
                stream = s.id, path = %s.path, pod = %s.pod, sent = ?s.sent_version,
                newest = s.newest_version, behind_ms = s.behind_ms,
                "audit: a stream is behind its group (a slow or stalled client)"
            );
        }
        report
    }
}

/// The streams whose last sent version is older than their group's newest
/// one, published at least [`BEHIND_GRACE_MS`] before `now_ms`.
fn streams_behind(
    index: &EndpointsIndex,
    streams: &[Arc<ListedStream>],
    now_ms: u64,
) -> Vec<StreamBehind> {
    streams
        .iter()
        .filter_map(|entry| {
            let (newest, published_ms) = match &entry.followed {
                Followed::Group { service, port, key } => {
                    let state = index.group_state(service, *port, key)?;
                    (state.version, Some(state.published_ms))
                }
                Followed::Profile(key) => (index.profile_state(key)?.version, None),
                // Linked clusters' groups are not in the local index.
                Followed::RemoteGroup(_) | Followed::Federated { .. } => return None,
            };
            let progress = entry.progress.view();
            if progress.sent_version.is_some_and(|v| v >= newest) {
                return None;
            }
            // Profiles carry no publish time: their streams count as behind
            // once their last write is older than the grace.
            let since = published_ms
                .or(progress.writes.last_write_ms)
                .unwrap_or(entry.opened_at_ms);
            let behind_ms = now_ms.saturating_sub(since);
            (behind_ms >= BEHIND_GRACE_MS).then(|| StreamBehind {
                id: entry.id,
                path: entry.path.to_string(),
                pod: client_pod(entry),
                sent_version: progress.sent_version,
                newest_version: newest,
                behind_ms,
            })
        })
        .collect()
}

fn client_pod(entry: &ListedStream) -> String {
    match (entry.token.ns.as_str(), entry.token.pod.as_str()) {
        ("", "") => String::new(),
        (ns, pod) => format!("{ns}/{pod}"),
    }
}

/// `/audit`'s answer.
#[derive(Debug, Serialize)]
pub struct AuditReport {
    pub consistent: bool,
    pub groups: usize,
    pub profiles: usize,
    pub streams: usize,
    pub group_mismatches: Vec<GroupMismatchView>,
    pub profile_mismatches: Vec<ProfileMismatchView>,
    pub streams_behind: Vec<StreamBehind>,
}

/// A group whose published endpoints differ from the index, by address.
#[derive(Debug, Serialize)]
pub struct GroupMismatchView {
    pub target: String,
    pub port: u16,
    pub node: String,
    pub hostname: String,
    pub published_version: u64,
    /// Addresses the streams are sent that the index no longer has.
    pub only_published: Vec<String>,
    /// Addresses the index has that the streams are not sent.
    pub only_in_index: Vec<String>,
    /// Addresses on both sides whose translation differs.
    pub changed: Vec<String>,
    pub published: SnapshotView,
    pub in_index: SnapshotView,
}

#[derive(Debug, Serialize)]
pub struct ProfileMismatchView {
    pub key: String,
    pub published_version: u64,
    pub published: ProfileView,
}

#[derive(Debug, Serialize)]
pub struct StreamBehind {
    pub id: u64,
    pub path: String,
    /// `<namespace>/<pod>` of the client, if its token said.
    pub pod: String,
    pub sent_version: Option<u64>,
    pub newest_version: u64,
    /// How long the newest version has been waiting for this stream.
    pub behind_ms: u64,
}

impl AuditReport {
    fn new(audit: &IndexAudit, streams_behind: Vec<StreamBehind>, streams: usize) -> Self {
        let group_mismatches: Vec<_> = audit
            .group_mismatches
            .iter()
            .map(|m| {
                let published = SnapshotView::of(&m.published.snapshot);
                let in_index = SnapshotView::of(&m.truth);
                let (only_published, only_in_index, changed) =
                    compare(&published.endpoints, &in_index.endpoints);
                GroupMismatchView {
                    target: service_name(&m.service),
                    port: m.port,
                    node: m.key.node_name.clone(),
                    hostname: m.key.hostname.clone(),
                    published_version: m.published.version,
                    only_published,
                    only_in_index,
                    changed,
                    published,
                    in_index,
                }
            })
            .collect();
        let profile_mismatches: Vec<_> = audit
            .profile_mismatches
            .iter()
            .map(|m| ProfileMismatchView {
                key: profile_key(&m.key),
                published_version: m.published.version,
                published: ProfileView::of(&m.published),
            })
            .collect();
        Self {
            consistent: group_mismatches.is_empty()
                && profile_mismatches.is_empty()
                && streams_behind.is_empty(),
            groups: audit.groups,
            profiles: audit.profiles,
            streams,
            group_mismatches,
            profile_mismatches,
            streams_behind,
        }
    }
}

/// Addresses only in `a`, only in `b`, and in both but different.
fn compare(a: &[EndpointView], b: &[EndpointView]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let by_addr = |v: &[EndpointView]| -> std::collections::BTreeMap<String, EndpointView> {
        v.iter().map(|e| (e.addr.clone(), e.clone())).collect()
    };
    let (a, b) = (by_addr(a), by_addr(b));
    let only_a = a.keys().filter(|k| !b.contains_key(*k)).cloned().collect();
    let only_b = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    let changed = a
        .iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| k.clone())
        .collect();
    (only_a, only_b, changed)
}

fn profile_key(key: &ProfileKey) -> String {
    match key {
        ProfileKey::Service { target, client_ns } => match client_ns {
            Some(ns) => format!("{}:{} (client namespace {ns})", target.fqn, target.port),
            None => format!("{}:{}", target.fqn, target.port),
        },
        ProfileKey::Endpoint(addr) => addr.to_string(),
    }
}

/// `/streams`' query.
#[derive(Debug, Default, Deserialize)]
struct StreamsQuery {
    after: Option<u64>,
    limit: Option<usize>,
    pod: Option<String>,
    namespace: Option<String>,
    node: Option<String>,
    target: Option<String>,
    kind: Option<String>,
}

/// One stream as `/streams` shows it.
#[derive(Debug, Serialize)]
struct StreamView {
    id: u64,
    kind: StreamKind,
    path: String,
    /// The client's address.
    peer: Option<String>,
    client_namespace: String,
    client_pod: String,
    client_node: String,
    /// What it follows: `Service ns/name:port` plus the filter group, or a profile.
    follows: String,
    opened_at_ms: u64,
    /// The version of the shared state it last sent, and the newest one.
    sent_version: Option<u64>,
    newest_version: Option<u64>,
    last_write_ms: Option<u64>,
    updates: u64,
    coalesced_updates: u64,
}

#[derive(Debug, Serialize)]
struct StreamsPage {
    /// Open streams in all (before filtering).
    open: usize,
    streams: Vec<StreamView>,
    /// Pass as `after` for the next page; absent on the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

async fn streams(State(state): State<Introspection>, Query(q): Query<StreamsQuery>) -> Response {
    let kind = match q.kind.as_deref() {
        None => None,
        Some("Get") => Some(StreamKind::Get),
        Some("GetProfile") => Some(StreamKind::GetProfile),
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("unknown kind {other:?}: Get or GetProfile\n"),
            )
                .into_response();
        }
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let matches =
        |value: &str, wanted: &Option<String>| wanted.as_deref().is_none_or(|w| w == value);
    let page = state.streams.list(q.after.unwrap_or(0), limit + 1, |e| {
        kind.is_none_or(|k| k == e.kind)
            && matches(&e.token.pod, &q.pod)
            && matches(&e.token.ns, &q.namespace)
            && matches(&e.token.node_name, &q.node)
            && q.target.as_deref().is_none_or(|t| e.path.contains(t))
    });
    let next_after = (page.len() > limit).then(|| page[limit - 1].id);
    let index = state.index.read();
    let streams = page
        .iter()
        .take(limit)
        .map(|e| {
            let progress = e.progress.view();
            let newest_version = match &e.followed {
                Followed::Group { service, port, key } => {
                    index.group_state(service, *port, key).map(|s| s.version)
                }
                Followed::Profile(key) => index.profile_state(key).map(|s| s.version),
                Followed::RemoteGroup(_) | Followed::Federated { .. } => None,
            };
            StreamView {
                id: e.id,
                kind: e.kind,
                path: e.path.to_string(),
                peer: e.peer.map(|p| p.to_string()),
                client_namespace: e.token.ns.clone(),
                client_pod: e.token.pod.clone(),
                client_node: e.token.node_name.clone(),
                follows: follows(&e.followed),
                opened_at_ms: e.opened_at_ms,
                sent_version: progress.sent_version,
                newest_version,
                last_write_ms: progress.writes.last_write_ms,
                updates: progress.writes.updates,
                coalesced_updates: progress.writes.coalesced,
            }
        })
        .collect();
    drop(index);
    Json(StreamsPage {
        open: state.streams.len(),
        streams,
        next_after,
    })
    .into_response()
}

fn follows(followed: &Followed) -> String {
    match followed {
        Followed::Group { service, port, key } => {
            format!("Service {}:{port}{}", service_name(service), group(key))
        }
        Followed::RemoteGroup(remote) => format!(
            "Service {}:{} in cluster {}{}",
            service_name(&remote.service),
            remote.port,
            remote.cluster,
            group(&remote.key)
        ),
        Followed::Federated { service, port } => {
            format!("federated Service {}:{port}", service_name(service))
        }
        Followed::Profile(key) => format!("profile {}", profile_key(key)),
    }
}

fn group(key: &FilterKey) -> String {
    let mut parts = Vec::new();
    if !key.node_name.is_empty() {
        parts.push(format!("node {}", key.node_name));
    }
    if !key.hostname.is_empty() {
        parts.push(format!("hostname {}", key.hostname));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

#[derive(Debug, Deserialize)]
struct TargetsQuery {
    service: Option<String>,
    port: Option<u16>,
}

#[derive(Debug, Serialize)]
struct GroupView {
    port: u16,
    node: String,
    hostname: String,
    version: u64,
    published_ms: u64,
    subscribers: usize,
    snapshot: SnapshotView,
}

#[derive(Debug, Serialize)]
struct ProfilePublisherView {
    key: String,
    profile: ProfileView,
}

#[derive(Debug, Serialize)]
struct TargetView {
    service: String,
    exists: bool,
    groups: Vec<GroupView>,
    profiles: Vec<ProfilePublisherView>,
}

async fn targets(State(state): State<Introspection>, Query(q): Query<TargetsQuery>) -> Response {
    let Some(service) = q.service.as_deref().and_then(parse_service) else {
        return (
            StatusCode::BAD_REQUEST,
            "give service=<namespace>/<name> (and optionally port=<port>)\n",
        )
            .into_response();
    };
    let index = state.index.read();
    let groups = index
        .endpoint_publishers()
        .group_states(&service)
        .into_iter()
        .filter(|(port, _, _, _)| q.port.is_none_or(|p| p == *port))
        .map(|(port, key, state, subscribers)| GroupView {
            port,
            node: key.node_name,
            hostname: key.hostname,
            version: state.version,
            published_ms: state.published_ms,
            subscribers,
            snapshot: SnapshotView::of(&state.snapshot),
        })
        .collect();
    let profiles = index
        .profile_states(&service)
        .into_iter()
        .filter(|(key, _)| match key {
            ProfileKey::Service { target, .. } => q.port.is_none_or(|p| p == target.port),
            ProfileKey::Endpoint(_) => false,
        })
        .map(|(key, state)| ProfilePublisherView {
            key: profile_key(&key),
            profile: ProfileView::of(&state),
        })
        .collect();
    let view = TargetView {
        service: service_name(&service),
        exists: index.service(&service).is_some(),
        groups,
        profiles,
    };
    drop(index);
    Json(view).into_response()
}

/// `<namespace>/<name>`, as `/targets?service=` takes it.
fn service_name(id: &ServiceId) -> String {
    format!("{}/{}", id.namespace, id.name)
}

fn parse_service(s: &str) -> Option<ServiceId> {
    let (namespace, name) = s.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty()).then(|| ServiceId {
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

async fn audit(State(state): State<Introspection>) -> Response {
    match state.shared_audit().await.as_ref() {
        Ok(report) => Json(report).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the audit failed: {error}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use http::Request;
    use k8s_index::Index as _;
    use tower::ServiceExt as _;

    use super::*;
    use crate::{
        core::context_token::ContextToken,
        grpc::streams::StreamEntry,
        index::tests::{get::web_slice, index, pod, service, svc_id},
    };

    fn web_stream(pod: &str, node: &str) -> StreamEntry {
        StreamEntry::new(
            StreamKind::Get,
            "web.ns.svc.cluster.local:80",
            Some("10.1.0.9:40000".parse().expect("addr")),
            crate::grpc::streams::Tokens::default().share(ContextToken {
                ns: "client".into(),
                pod: pod.into(),
                node_name: node.into(),
            }),
            Followed::Group {
                service: svc_id("web"),
                port: 80,
                key: FilterKey::default(),
            },
        )
    }

    fn fixture() -> (Arc<RwLock<EndpointsIndex>>, Arc<StreamRegistry>) {
        let mut idx = index();
        idx.apply(service("web", "10.96.0.1"));
        idx.apply(pod("web-0", "10.0.0.1"));
        idx.apply(web_slice(&[("web-0", "10.0.0.1", true)]));
        (Arc::new(RwLock::new(idx)), StreamRegistry::new())
    }

    #[test]
    fn a_stream_is_behind_only_after_the_grace() {
        let (index, registry) = fixture();
        let _rx = index
            .write()
            .subscribe(&svc_id("web"), 80, FilterKey::default())
            .expect("subscribed");
        let stream = registry.register(web_stream("a", ""));
        stream.listed().progress.sent(0, false);
        let now = now_ms();
        assert!(streams_behind(&index.read(), &registry.all(), now).is_empty());

        index.write().apply(web_slice(&[]));
        let published = index
            .read()
            .group_state(&svc_id("web"), 80, &FilterKey::default())
            .expect("group")
            .published_ms;
        // Caught between the publish and its write: not behind yet.
        assert!(streams_behind(&index.read(), &registry.all(), published + 10).is_empty());
        let behind = streams_behind(&index.read(), &registry.all(), published + 5_000);
        let [b] = &behind[..] else {
            panic!("one stream behind expected: {behind:?}");
        };
        assert_eq!((b.sent_version, b.newest_version), (Some(0), 1));
        assert_eq!(b.pod, "client/a");
        assert_eq!(b.behind_ms, 5_000);

        stream.listed().progress.sent(1, false);
        assert!(streams_behind(&index.read(), &registry.all(), published + 5_000).is_empty());
    }

    async fn get_json(router: Router, uri: &str) -> (StatusCode, serde_json::Value) {
        let response = router
            .oneshot(
                Request::get(uri)
                    .body(axum::body::Body::empty())
                    .expect("request"),
            )
            .await
            .expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, value)
    }

    #[tokio::test]
    async fn streams_are_listed_filtered_and_paged() {
        let (index, registry) = fixture();
        let _rx = index
            .write()
            .subscribe(&svc_id("web"), 80, FilterKey::default())
            .expect("subscribed");
        let streams: Vec<_> = ["a", "b", "a"]
            .iter()
            .map(|pod| registry.register(web_stream(pod, "node-1")))
            .collect();
        streams[0].listed().progress.sent(0, false);
        let routes = Introspection::new(index, registry, AuditMetrics::default()).routes();

        let (status, page) = get_json(routes.clone(), "/streams?pod=a").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(page["open"], 3);
        let listed = page["streams"].as_array().expect("streams");
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0]["client_pod"], "a");
        assert_eq!(listed[0]["client_namespace"], "client");
        assert_eq!(listed[0]["peer"], "10.1.0.9:40000");
        assert_eq!(listed[0]["follows"], "Service ns/web:80");
        assert_eq!(listed[0]["sent_version"], 0);
        assert_eq!(listed[0]["newest_version"], 0);
        assert_eq!(listed[1]["sent_version"], serde_json::Value::Null);

        let (_, first) = get_json(routes.clone(), "/streams?limit=2").await;
        assert_eq!(first["streams"].as_array().map(Vec::len), Some(2));
        let after = first["next_after"].as_u64().expect("a next page");
        let (_, second) =
            get_json(routes.clone(), &format!("/streams?limit=2&after={after}")).await;
        assert_eq!(second["streams"].as_array().map(Vec::len), Some(1));
        assert!(second.get("next_after").is_none());

        let (status, _) = get_json(routes.clone(), "/streams?kind=Watch").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn targets_show_what_each_group_is_sent() {
        let (index, registry) = fixture();
        let _rx = index
            .write()
            .subscribe(&svc_id("web"), 80, FilterKey::default())
            .expect("subscribed");
        let routes = Introspection::new(index, registry, AuditMetrics::default()).routes();
        let (status, target) = get_json(routes.clone(), "/targets?service=ns/web").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(target["exists"], true);
        let groups = target["groups"].as_array().expect("groups");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0]["subscribers"], 1);
        assert_eq!(
            groups[0]["snapshot"]["endpoints"][0]["addr"],
            "10.0.0.1:8080"
        );
        assert_eq!(
            groups[0]["snapshot"]["endpoints"][0]["labels"]["pod"],
            "web-0"
        );
        let (status, _) = get_json(routes, "/targets?service=web").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn the_audit_reports_both_sides_and_counts() {
        let (index, registry) = fixture();
        let _rx = index
            .write()
            .subscribe(&svc_id("web"), 80, FilterKey::default())
            .expect("subscribed");
        let metrics = AuditMetrics::default();
        let introspection = Introspection::new(index.clone(), registry, metrics.clone());
        let (_, clean) = get_json(introspection.clone().routes(), "/audit").await;
        assert_eq!(clean["consistent"], true);
        assert_eq!(clean["groups"], 1);

        // A lost publish: stored, never sent.
        let _ = index.write().cluster_for_tests().apply_slice(
            "ns".into(),
            "web-abc".into(),
            crate::k8s::slices::slice_facts(&web_slice(&[])),
        );
        let report = introspection.run_audit();
        assert!(!report.consistent);
        let [m] = &report.group_mismatches[..] else {
            panic!("one mismatch expected: {report:?}");
        };
        assert_eq!(m.target, "ns/web");
        assert_eq!(m.only_published, ["10.0.0.1:8080"]);
        assert!(m.only_in_index.is_empty());
        assert_eq!(metrics.runs.get(), 2);
        assert_eq!(
            metrics
                .mismatches
                .get_or_create(&MismatchLabels { kind: "group" })
                .get(),
            1
        );
    }
    #[tokio::test]
    async fn concurrent_audit_callers_share_one_run() {
        let (index, registry) = fixture();
        let metrics = AuditMetrics::default();
        let routes = Introspection::new(index, registry, metrics.clone()).routes();
        let callers: Vec<_> = (0..8)
            .map(|_| tokio::spawn(get_json(routes.clone(), "/audit")))
            .collect();
        for caller in callers {
            let (status, report) = caller.await.expect("task");
            assert_eq!(
                (status, &report["consistent"]),
                (StatusCode::OK, &true.into())
            );
        }
        assert_eq!(metrics.runs.get(), 1);
    }
}
