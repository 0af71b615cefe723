//! What a failover client's stream holds, built only from the messages it
//! was sent (a new stream starts from nothing: its first message is the
//! full state), and the truth it must converge to: the state the benchmark
//! wrote through the API (each write applied to [`Truth`] once the API
//! accepted it).

use std::{collections::HashSet, net::SocketAddr};

use linkerd2_proxy_api::{
    inbound::{self, Server as InboundServer},
    net::TcpAddress,
    outbound::{self, OutboundPolicy},
};
use prost::Message;

/// `destination.Update` with only what the check reads: the addresses
/// (decoding skips the rest, the metric labels and TLS identities of
/// every endpoint, which would cost a 2,500-proxy client more CPU than the
/// server under test spends; field numbers as in destination.proto).
#[derive(Clone, PartialEq, prost::Message)]
struct SlimUpdate {
    #[prost(oneof = "SlimKind", tags = "1, 2, 3")]
    update: Option<SlimKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum SlimKind {
    #[prost(message, tag = "1")]
    Add(SlimAddSet),
    #[prost(message, tag = "2")]
    Remove(SlimRemoveSet),
    #[prost(message, tag = "3")]
    NoEndpoints(SlimNoEndpoints),
}

#[derive(Clone, PartialEq, prost::Message)]
struct SlimAddSet {
    #[prost(message, repeated, tag = "1")]
    addrs: Vec<SlimWeightedAddr>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SlimWeightedAddr {
    #[prost(message, optional, tag = "1")]
    addr: Option<TcpAddress>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SlimRemoveSet {
    #[prost(message, repeated, tag = "1")]
    addrs: Vec<TcpAddress>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SlimNoEndpoints {}

/// What a stream is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// `Get` of Service `.0`: the ready addresses of its endpoints.
    Addrs(usize),
    /// `WatchPort` of a pod of Server group `.0`: its `proxyProtocol`.
    Inbound(usize),
    /// Outbound `Watch` of Service `.0`: opaque or not.
    Outbound(usize),
    /// Only served (`GetProfile`: nothing in it changes in the benchmark).
    Served,
}

/// The protocol a policy stream last received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
    Opaque,
    Detect,
    Other,
}

/// What one stream holds now.
#[derive(Clone, Debug, Default)]
pub enum Held {
    #[default]
    Nothing,
    /// `Get`: addresses, as [`addr_key`]s.
    Addrs(HashSet<u64>),
    Protocol(Protocol),
}

/// An IPv4 socket address as one integer (`ip << 16 | port`); other
/// addresses are not ours.
pub fn addr_key(addr: SocketAddr) -> Option<u64> {
    match addr {
        SocketAddr::V4(v4) => Some(u64::from(u32::from(*v4.ip())) << 16 | u64::from(v4.port())),
        SocketAddr::V6(_) => None,
    }
}

/// Applies one message (`body`, without its 5-byte prefix) to `held`.
pub fn apply(check: Check, held: &mut Held, body: &[u8]) -> Result<(), prost::DecodeError> {
    match check {
        Check::Addrs(_) => {
            let update = SlimUpdate::decode(body)?;
            if !matches!(held, Held::Addrs(_)) {
                *held = Held::Addrs(HashSet::new());
            }
            let Held::Addrs(addrs) = held else {
                return Ok(());
            };
            match update.update {
                Some(SlimKind::Add(set)) => addrs.extend(
                    set.addrs
                        .into_iter()
                        .filter_map(|wa| SocketAddr::try_from(wa.addr?).ok())
                        .filter_map(addr_key),
                ),
                Some(SlimKind::Remove(set)) => {
                    for addr in set.addrs {
                        if let Some(key) = SocketAddr::try_from(addr).ok().and_then(addr_key) {
                            addrs.remove(&key);
                        }
                    }
                }
                Some(SlimKind::NoEndpoints(_)) => addrs.clear(),
                None => {}
            }
        }
        Check::Inbound(_) => {
            let server = InboundServer::decode(body)?;
            let kind = server.protocol.and_then(|p| p.kind);
            *held = Held::Protocol(match kind {
                Some(inbound::proxy_protocol::Kind::Http1(_)) => Protocol::Http1,
                Some(inbound::proxy_protocol::Kind::Http2(_)) => Protocol::Http2,
                Some(inbound::proxy_protocol::Kind::Opaque(_)) => Protocol::Opaque,
                Some(inbound::proxy_protocol::Kind::Detect(_)) => Protocol::Detect,
                _ => Protocol::Other,
            });
        }
        Check::Outbound(_) => {
            let policy = OutboundPolicy::decode(body)?;
            let kind = policy.protocol.and_then(|p| p.kind);
            *held = Held::Protocol(match kind {
                Some(outbound::proxy_protocol::Kind::Opaque(_)) => Protocol::Opaque,
                Some(outbound::proxy_protocol::Kind::Detect(_)) => Protocol::Detect,
                Some(outbound::proxy_protocol::Kind::Http1(_)) => Protocol::Http1,
                Some(outbound::proxy_protocol::Kind::Http2(_)) => Protocol::Http2,
                _ => Protocol::Other,
            });
        }
        Check::Served => {}
    }
    Ok(())
}

/// What the benchmark wrote, as streams must hold it.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    /// Per Service: its ready addresses.
    pub addrs: Vec<HashSet<u64>>,
    /// Per Server group: HTTP/2 (else HTTP/1).
    pub http2: Vec<bool>,
    /// Per outbound Service: opaque (else detected).
    pub opaque: Vec<bool>,
}

impl Truth {
    /// Whether `held` is what a stream checked by `check` must hold.
    pub fn holds(&self, check: Check, held: &Held) -> bool {
        match (check, held) {
            (Check::Served, _) => true,
            (Check::Addrs(s), Held::Addrs(addrs)) => self.addrs.get(s) == Some(addrs),
            (Check::Addrs(s), Held::Nothing) => self.addrs.get(s).is_some_and(HashSet::is_empty),
            (Check::Inbound(g), Held::Protocol(p)) => {
                let want = if self.http2.get(g).copied().unwrap_or_default() {
                    Protocol::Http2
                } else {
                    Protocol::Http1
                };
                *p == want
            }
            (Check::Outbound(s), Held::Protocol(p)) => {
                let want = if self.opaque.get(s).copied().unwrap_or_default() {
                    Protocol::Opaque
                } else {
                    Protocol::Detect
                };
                *p == want
            }
            _ => false,
        }
    }
}

/// Splits a byte stream into length-prefixed gRPC messages.
#[derive(Default)]
pub struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    /// Feeds `data`; calls `each` with every message it completed.
    pub fn feed(&mut self, data: &[u8], mut each: impl FnMut(&[u8])) {
        self.buf.extend_from_slice(data);
        let mut at = 0;
        while self.buf.len() - at >= 5 {
            let len = u32::from_be_bytes([
                self.buf[at + 1],
                self.buf[at + 2],
                self.buf[at + 3],
                self.buf[at + 4],
            ]) as usize;
            if self.buf.len() - at - 5 < len {
                break;
            }
            each(&self.buf[at + 5..at + 5 + len]);
            at += 5 + len;
        }
        self.buf.drain(..at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkerd2_proxy_api::destination::{
        AddrSet, NoEndpoints, Update, WeightedAddr, WeightedAddrSet, update,
    };

    fn frame<M: Message>(m: &M) -> Vec<u8> {
        let body = m.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend(body);
        out
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn get_updates_build_the_address_set_across_frame_splits() {
        let add = Update {
            update: Some(update::Update::Add(WeightedAddrSet {
                addrs: ["10.0.0.1:80", "10.0.0.2:80"]
                    .iter()
                    .map(|a| WeightedAddr {
                        addr: Some(sa(a).into()),
                        weight: 1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })),
        };
        let remove = Update {
            update: Some(update::Update::Remove(AddrSet {
                addrs: vec![sa("10.0.0.1:80").into()],
            })),
        };
        let mut bytes = frame(&add);
        bytes.extend(frame(&remove));
        let mut frames = Frames::default();
        let mut held = Held::Nothing;
        for chunk in bytes.chunks(7) {
            frames.feed(chunk, |body| {
                apply(Check::Addrs(0), &mut held, body).expect("decodes");
            });
        }
        let mut truth = Truth {
            addrs: vec![
                [sa("10.0.0.2:80")]
                    .into_iter()
                    .filter_map(addr_key)
                    .collect(),
            ],
            ..Default::default()
        };
        assert!(truth.holds(Check::Addrs(0), &held));
        truth.addrs[0].clear();
        assert!(!truth.holds(Check::Addrs(0), &held));
        let none = Update {
            update: Some(update::Update::NoEndpoints(NoEndpoints { exists: true })),
        };
        frames.feed(&frame(&none), |body| {
            apply(Check::Addrs(0), &mut held, body).expect("decodes");
        });
        assert!(truth.holds(Check::Addrs(0), &held));
    }

    #[test]
    fn protocols_are_compared_with_what_was_written() {
        let truth = Truth {
            http2: vec![true],
            opaque: vec![false],
            ..Default::default()
        };
        assert!(truth.holds(Check::Inbound(0), &Held::Protocol(Protocol::Http2)));
        assert!(!truth.holds(Check::Inbound(0), &Held::Protocol(Protocol::Http1)));
        assert!(!truth.holds(Check::Inbound(0), &Held::Nothing));
        assert!(truth.holds(Check::Outbound(0), &Held::Protocol(Protocol::Detect)));
        assert!(truth.holds(Check::Served, &Held::Nothing));
    }
}
