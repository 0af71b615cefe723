//! The open `WatchPort` and outbound `Watch` streams, as the admin server
//! shows them: what each asked for, from where, and the last message it
//! was sent (kept as the shared encoded frame, so the audit can compare it
//! with what the index gives now without a copy per stream).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use bytes::Bytes;
use futures::StreamExt;
use grpc_stream::{
    FrameStream,
    registry::{self, WriteCounts},
};
use linkerd2_proxy_api::{
    inbound::PortSpec,
    outbound::{TrafficSpec, traffic_spec},
};

/// The policy controller's open streams.
pub type PolicyStreams = registry::StreamRegistry<PolicyStream>;
/// One open stream, listed.
pub type ListedPolicyStream = registry::Listed<PolicyStream>;

/// What a stream asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyRequest {
    /// `InboundServerPolicies.WatchPort`.
    Inbound(PortSpec),
    /// `OutboundPolicies.Watch`.
    Outbound(TrafficSpec),
}

impl PolicyRequest {
    /// `WatchPort` or `Watch`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Inbound(_) => "WatchPort",
            Self::Outbound(_) => "Watch",
        }
    }

    /// The client's workload string (`{"ns":…,"pod":…}`) as it sent it.
    pub fn workload(&self) -> &str {
        match self {
            Self::Inbound(spec) => &spec.workload,
            Self::Outbound(spec) => &spec.source_workload,
        }
    }

    /// The port (inbound) or the authority / address (outbound) asked for.
    pub fn target(&self) -> String {
        match self {
            Self::Inbound(spec) => format!("port {}", spec.port),
            Self::Outbound(spec) => match &spec.target {
                Some(traffic_spec::Target::Authority(authority)) => authority.clone(),
                Some(traffic_spec::Target::Addr(addr)) => addr
                    .ip
                    .and_then(|ip| std::net::IpAddr::try_from(ip).ok())
                    .map_or_else(
                        || format!("?:{}", addr.port),
                        |ip| SocketAddr::new(ip, addr.port as u16).to_string(),
                    ),
                None => String::new(),
            },
        }
    }
}

/// One stream: its request (fixed) and what it was last sent.
#[derive(Debug)]
pub struct PolicyStream {
    pub request: PolicyRequest,
    pub peer: Option<SocketAddr>,
    /// The last message handed to the transport, encoded (shared with
    /// every stream sent the same frame).
    last_frame: Mutex<Option<Bytes>>,
    pub writes: WriteCounts,
}

impl PolicyStream {
    /// The last frame sent, if any.
    pub fn last_frame(&self) -> Option<Bytes> {
        self.last_frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn sent(&self, frame: &Bytes) {
        *self
            .last_frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(frame.clone());
        self.writes.wrote(false);
    }
}

/// Lists `frames` as a stream of `request` from `peer` for as long as it lives.
pub fn listed(
    registry: &Arc<PolicyStreams>,
    request: PolicyRequest,
    peer: Option<SocketAddr>,
    frames: FrameStream,
) -> FrameStream {
    let registered = registry.register(PolicyStream {
        request,
        peer,
        last_frame: Mutex::new(None),
        writes: WriteCounts::default(),
    });
    Box::pin(frames.map(move |frame| {
        if let Ok(frame) = &frame {
            registered.listed().sent(frame);
        }
        frame
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stream_is_listed_with_its_last_frame_until_dropped() {
        let registry = PolicyStreams::new();
        let frames: FrameStream = Box::pin(futures::stream::iter([
            Ok(Bytes::from_static(b"one")),
            Ok(Bytes::from_static(b"two")),
        ]));
        let spec = PortSpec {
            workload: r#"{"ns":"ns","pod":"web-0"}"#.into(),
            port: 8080,
        };
        let mut stream = listed(
            &registry,
            PolicyRequest::Inbound(spec),
            Some("10.0.0.9:5000".parse().expect("addr")),
            frames,
        );
        let [entry] = &registry.all()[..] else {
            panic!("one stream expected");
        };
        assert_eq!(entry.request.kind(), "WatchPort");
        assert_eq!(entry.request.target(), "port 8080");
        assert_eq!(entry.last_frame(), None);
        let _ = stream.next().await;
        let _ = stream.next().await;
        assert_eq!(entry.last_frame().as_deref(), Some(&b"two"[..]));
        assert_eq!(entry.writes.view().updates, 2);
        drop(stream);
        assert!(registry.is_empty());
    }
}
