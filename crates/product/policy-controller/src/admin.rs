//! Introspection on its own listener (`--introspection-addr`, localhost by
//! default; read-only): the open `WatchPort` and outbound `Watch` streams,
//! and a consistency audit of what each was last sent against what the
//! index gives its request now.
//!
//! - `GET /streams`: oldest first, paged (`after`=last id seen, `limit`,
//!   default 100, at most 1000) and filtered (`kind` = `WatchPort` |
//!   `Watch`, `workload` (a substring of the client's workload string, e.g.
//!   a pod or external workload name), `target` (a substring of the port / authority)).
//! - `GET /audit`: for every stream, encodes what the index gives its
//!   request now and compares it with the frame the stream was last sent;
//!   a stream that still differs a second later (after any update in flight
//!   was written) is listed, logged and counted (`audit_mismatches`). The
//!   same audit runs in the background every `--audit-interval-secs`. One
//!   audit runs at a time; callers within [`AUDIT_FRESH_FOR`] of the last
//!   one share its report.

use std::{sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};
use bytes::Bytes;
use meridian_runtime::coalesce::Coalesced;
use prometheus_client::{metrics::counter::Counter, registry::Registry};
use serde::{Deserialize, Serialize};

use crate::{
    core::{DiscoverInboundServer, DiscoverOutboundPolicy},
    grpc::{
        InboundPolicyServer,
        outbound::OutboundPolicyServer,
        streams::{ListedPolicyStream, PolicyRequest, PolicyStreams},
    },
};

/// How long a difference must last to count: an update being written when
/// the audit looks is not a difference.
pub const GRACE: Duration = Duration::from_secs(1);

/// How long an audit's report is shared with later callers.
pub const AUDIT_FRESH_FOR: Duration = Duration::from_secs(1);

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1_000;

/// The audit's counters.
#[derive(Clone, Debug, Default)]
pub struct AuditMetrics {
    runs: Counter,
    mismatches: Counter,
}

impl AuditMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "audit_runs",
            "Consistency audits of what streams were sent against the index",
            m.runs.clone(),
        );
        registry.register(
            "audit_mismatches",
            "Streams whose last message differed from what the index gives, found by the audit",
            m.mismatches.clone(),
        );
        m
    }
}

/// The introspection routes' shared state.
pub struct Introspection<D, O> {
    inbound: Arc<InboundPolicyServer<D>>,
    outbound: Arc<OutboundPolicyServer<O>>,
    streams: Arc<PolicyStreams>,
    metrics: AuditMetrics,
    /// The last audit, shared by concurrent callers.
    audits: Arc<Coalesced<AuditReport>>,
}

impl<D, O> Clone for Introspection<D, O> {
    fn clone(&self) -> Self {
        Self {
            inbound: self.inbound.clone(),
            outbound: self.outbound.clone(),
            streams: self.streams.clone(),
            metrics: self.metrics.clone(),
            audits: self.audits.clone(),
        }
    }
}

/// One stream that was not sent what the index gives.
#[derive(Debug, Serialize)]
pub struct StreamMismatch {
    pub id: u64,
    pub kind: &'static str,
    pub workload: String,
    pub target: String,
    /// What the index gives now, if it still answers the request.
    pub in_index: Result<String, String>,
    /// What the stream was last sent (absent: nothing yet).
    pub last_sent: Option<String>,
}

/// `/audit`'s answer.
#[derive(Debug, Serialize)]
pub struct AuditReport {
    pub consistent: bool,
    pub streams: usize,
    pub mismatches: Vec<StreamMismatch>,
}

impl<D: DiscoverInboundServer, O: DiscoverOutboundPolicy> Introspection<D, O> {
    pub fn new(
        inbound: Arc<InboundPolicyServer<D>>,
        outbound: Arc<OutboundPolicyServer<O>>,
        streams: Arc<PolicyStreams>,
        metrics: AuditMetrics,
    ) -> Self {
        Self {
            inbound,
            outbound,
            streams,
            metrics,
            audits: Arc::new(Coalesced::new(AUDIT_FRESH_FOR)),
        }
    }

    /// The routes of the introspection listener.
    pub fn routes(self) -> Router {
        Router::new()
            .route("/streams", get(streams::<D, O>))
            .route("/audit", get(audit::<D, O>))
            .with_state(self)
    }

    /// What the index gives `request` now, as a stream would be sent it.
    fn message_now(&self, request: &PolicyRequest) -> Result<Message, tonic::Status> {
        match request {
            PolicyRequest::Inbound(spec) => {
                self.inbound.server_now(spec.clone()).map(Message::Inbound)
            }
            PolicyRequest::Outbound(spec) => self
                .outbound
                .policy_now(spec.clone())
                .map(Message::Outbound),
        }
    }

    /// The streams whose last message differs from the index's now. Messages
    /// are compared decoded: their label maps encode in no fixed order.
    fn differing(&self, streams: &[Arc<ListedPolicyStream>]) -> Vec<Arc<ListedPolicyStream>> {
        streams
            .iter()
            .filter(|s| {
                let sent = s
                    .last_frame()
                    .map(|frame| Message::decode(&s.request, &frame));
                self.message_now(&s.request).ok() != sent
            })
            .cloned()
            .collect()
    }

    /// An audit's report (with [`GRACE`]): the last one if it is fresh,
    /// else a new run, one at a time.
    pub async fn shared_audit(&self) -> Arc<AuditReport> {
        self.audits.get(|| self.run_audit(GRACE)).await
    }

    /// One audit: the streams that differ now and still differ `grace` later.
    pub async fn run_audit(&self, grace: Duration) -> AuditReport {
        let all = self.streams.all();
        let first = self.differing(&all);
        if !first.is_empty() {
            tokio::time::sleep(grace).await;
        }
        let mismatches: Vec<_> = self
            .differing(&first)
            .iter()
            .map(|s| StreamMismatch {
                id: s.id,
                kind: s.request.kind(),
                workload: s.request.workload().to_string(),
                target: s.request.target(),
                in_index: self
                    .message_now(&s.request)
                    .map(|m| format!("{m:?}"))
                    .map_err(|status| format!("{:?}: {}", status.code(), status.message())),
                last_sent: s
                    .last_frame()
                    .map(|frame| format!("{:?}", Message::decode(&s.request, &frame))),
            })
            .collect();
        self.metrics.runs.inc();
        self.metrics.mismatches.inc_by(mismatches.len() as u64);
        for m in &mismatches {
            tracing::warn!(
                stream = m.id, kind = m.kind, workload = %m.workload, target = %m.target,
                in_index = ?m.in_index, last_sent = ?m.last_sent,
                "audit: a stream's last message differs from the index"
            );
        }
        AuditReport {
            consistent: mismatches.is_empty(),
            streams: all.len(),
            mismatches,
        }
    }
}

/// A message a stream is sent (or a frame that would not decode).
#[derive(PartialEq)]
enum Message {
    Inbound(linkerd2_proxy_api::inbound::Server),
    Outbound(linkerd2_proxy_api::outbound::OutboundPolicy),
    Undecodable(String),
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inbound(m) => write!(f, "{m:?}"),
            Self::Outbound(m) => write!(f, "{m:?}"),
            Self::Undecodable(e) => write!(f, "undecodable frame: {e}"),
        }
    }
}

impl Message {
    /// The frame a stream of `request` was sent, decoded back.
    fn decode(request: &PolicyRequest, frame: &Bytes) -> Self {
        let decoded = match request {
            PolicyRequest::Inbound(_) => grpc_stream::decode_request(frame).map(Self::Inbound),
            PolicyRequest::Outbound(_) => grpc_stream::decode_request(frame).map(Self::Outbound),
        };
        decoded.unwrap_or_else(|status| Self::Undecodable(status.message().to_string()))
    }
}

#[derive(Debug, Default, Deserialize)]
struct StreamsQuery {
    after: Option<u64>,
    limit: Option<usize>,
    kind: Option<String>,
    workload: Option<String>,
    target: Option<String>,
}

#[derive(Debug, Serialize)]
struct StreamView {
    id: u64,
    kind: &'static str,
    /// The client's workload string as it sent it.
    workload: String,
    target: String,
    peer: Option<String>,
    opened_at_ms: u64,
    last_write_ms: Option<u64>,
    updates: u64,
}

#[derive(Debug, Serialize)]
struct StreamsPage {
    open: usize,
    streams: Vec<StreamView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

async fn streams<D: DiscoverInboundServer, O: DiscoverOutboundPolicy>(
    State(state): State<Introspection<D, O>>,
    Query(q): Query<StreamsQuery>,
) -> Response {
    if let Some(kind) = q.kind.as_deref()
        && kind != "WatchPort"
        && kind != "Watch"
    {
        return (
            StatusCode::BAD_REQUEST,
            format!("unknown kind {kind:?}: WatchPort or Watch\n"),
        )
            .into_response();
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let contains =
        |value: &str, wanted: &Option<String>| wanted.as_deref().is_none_or(|w| value.contains(w));
    let page = state.streams.list(q.after.unwrap_or(0), limit + 1, |s| {
        q.kind.as_deref().is_none_or(|k| k == s.request.kind())
            && contains(s.request.workload(), &q.workload)
            && contains(&s.request.target(), &q.target)
    });
    let next_after = (page.len() > limit).then(|| page[limit - 1].id);
    let streams = page
        .iter()
        .take(limit)
        .map(|s| {
            let writes = s.writes.view();
            StreamView {
                id: s.id,
                kind: s.request.kind(),
                workload: s.request.workload().to_string(),
                target: s.request.target(),
                peer: s.peer.map(|p| p.to_string()),
                opened_at_ms: s.opened_at_ms,
                last_write_ms: writes.last_write_ms,
                updates: writes.updates,
            }
        })
        .collect();
    Json(StreamsPage {
        open: state.streams.len(),
        streams,
        next_after,
    })
    .into_response()
}

async fn audit<D: DiscoverInboundServer, O: DiscoverOutboundPolicy>(
    State(state): State<Introspection<D, O>>,
) -> Response {
    Json(state.shared_audit().await.as_ref()).into_response()
}

#[cfg(test)]
mod tests {
    use std::{
        net::{IpAddr, SocketAddr},
        num::NonZeroU16,
    };

    use futures::StreamExt as _;
    use grpc_stream::FramedMethods as _;
    use linkerd2_proxy_api::inbound::PortSpec;
    use meridian_runtime::Shutdown;
    use tokio::sync::watch;

    use super::*;
    use crate::{
        core::{
            DETECT_TIMEOUT, InboundServer, LookupError, ProxyProtocol, ServerRef, WorkloadPort,
            outbound::{OutboundPolicy, OutboundTarget, ServiceTarget},
        },
        metrics::GrpcMetrics,
    };

    struct OnePod(watch::Receiver<Arc<InboundServer>>);

    impl DiscoverInboundServer for OnePod {
        fn watch_inbound_server(
            &self,
            target: &WorkloadPort,
        ) -> Result<watch::Receiver<Arc<InboundServer>>, LookupError> {
            if target.name == "web-0" {
                Ok(self.0.clone())
            } else {
                Err(LookupError::UnknownServer)
            }
        }
    }

    struct NoServices;

    impl DiscoverOutboundPolicy for NoServices {
        fn lookup_ip(&self, _: IpAddr, _: NonZeroU16, _: &str) -> Option<OutboundTarget> {
            None
        }

        fn watch_outbound_policy(&self, _: &ServiceTarget) -> watch::Receiver<Arc<OutboundPolicy>> {
            unreachable!("no outbound request in these tests")
        }

        fn knows_service(&self, _: &str, _: &str) -> bool {
            false
        }
    }

    fn server(name: &str) -> InboundServer {
        InboundServer {
            reference: ServerRef::Server(name.into()),
            protocol: ProxyProtocol::Detect {
                timeout: DETECT_TIMEOUT,
            },
            authorizations: Default::default(),
            http_routes: Default::default(),
            grpc_routes: Default::default(),
            ratelimit: None,
        }
    }

    const WATCH_PORT: &str = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";

    #[tokio::test]
    async fn a_stream_not_sent_the_newest_server_is_found() {
        let (tx, rx) = watch::channel(Arc::new(server("a")));
        let streams = PolicyStreams::new();
        let (_trigger, shutdown) = Shutdown::new();
        let inbound = Arc::new(
            InboundPolicyServer::new(OnePod(rx), vec![], shutdown.clone(), GrpcMetrics::default())
                .with_streams(streams.clone()),
        );
        let outbound = Arc::new(
            OutboundPolicyServer::new(
                NoServices,
                "cluster.local",
                false,
                shutdown,
                GrpcMetrics::default(),
            )
            .with_streams(streams.clone()),
        );
        let metrics = AuditMetrics::default();
        let introspection =
            Introspection::new(inbound.clone(), outbound, streams.clone(), metrics.clone());

        let peer: SocketAddr = "10.0.0.9:4000".parse().expect("addr");
        let spec = PortSpec {
            workload: r#"{"ns":"ns","pod":"web-0"}"#.into(),
            port: 8080,
        };
        let mut stream = inbound
            .open(WATCH_PORT, spec, Some(peer))
            .await
            .expect("opened");
        let _ = stream.next().await;
        let clean = introspection.run_audit(Duration::ZERO).await;
        assert!(clean.consistent, "{clean:?}");
        assert_eq!(clean.streams, 1);

        // The index moves on; the stream has not written it yet.
        tx.send_replace(Arc::new(server("b")));
        let report = introspection.run_audit(Duration::ZERO).await;
        let [m] = &report.mismatches[..] else {
            panic!("one mismatch expected: {report:?}");
        };
        assert_eq!((m.kind, m.target.as_str()), ("WatchPort", "port 8080"));
        assert!(m.workload.contains("web-0"));
        assert!(matches!(&m.in_index, Ok(s) if s.contains("\"b\"")), "{m:?}");
        assert!(
            matches!(&m.last_sent, Some(s) if s.contains("\"a\"")),
            "{m:?}"
        );
        assert_eq!(metrics.mismatches.get(), 1);

        // Once written, the stream is consistent again.
        let _ = stream.next().await;
        let after = introspection.run_audit(Duration::ZERO).await;
        assert!(after.consistent, "{after:?}");
        assert_eq!(metrics.runs.get(), 3);

        let routes = introspection.routes();
        let response = tower::ServiceExt::oneshot(
            routes.clone(),
            http::Request::get("/streams?kind=WatchPort&workload=web-0")
                .body(axum::body::Body::empty())
                .expect("request"),
        )
        .await
        .expect("response");
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let page: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(page["open"], 1);
        assert_eq!(page["streams"][0]["peer"], "10.0.0.9:4000");
        assert_eq!(page["streams"][0]["updates"], 2);

        // Concurrent `/audit` callers share one run.
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let routes = routes.clone();
                tokio::spawn(async move {
                    let request = http::Request::get("/audit")
                        .body(axum::body::Body::empty())
                        .expect("request");
                    let response = tower::ServiceExt::oneshot(routes, request)
                        .await
                        .expect("response");
                    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                        .await
                        .expect("body");
                    serde_json::from_slice::<serde_json::Value>(&body).expect("json")
                })
            })
            .collect();
        for caller in callers {
            assert_eq!(caller.await.expect("task")["consistent"], true);
        }
        assert_eq!(metrics.runs.get(), 4, "eight callers, one run");
    }
}
