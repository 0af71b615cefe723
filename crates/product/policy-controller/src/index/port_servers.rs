//! The published server of each known port of one workload, kept small:
//! every pod a Server selects has an entry, and a cluster has thousands of
//! them.
//!
//! - The ports sit in a sorted list, not a `BTreeMap`: a workload has a
//!   handful of ports, and a map's first node reserves room for eleven
//!   (about 400 bytes for one port).
//! - A port holds its server alone until a lookup watches it; only then
//!   does it get a `watch` channel (about 450 bytes with its notifiers).
//!   Most Server-selected ports are never looked up (their pods' proxies
//!   ask for the ports they serve), and a channel whose last receiver
//!   went is dropped again at the next change.

use std::{num::NonZeroU16, sync::Arc};

use tokio::sync::watch;

use crate::core::InboundServer;

/// One port's published server.
#[derive(Debug)]
pub(super) enum PortServer {
    /// No lookup watches it.
    Unwatched(Arc<InboundServer>),
    /// Lookups watch it: the channel holds the server.
    Watched(watch::Sender<Arc<InboundServer>>),
}

impl PortServer {
    /// The server published now.
    pub fn current(&self) -> Arc<InboundServer> {
        match self {
            Self::Unwatched(server) => server.clone(),
            Self::Watched(tx) => tx.borrow().clone(),
        }
    }

    /// Publishes `server`, notifying watchers only of a real change. A
    /// channel nobody watches any more goes back to the bare server.
    fn publish(&mut self, server: Arc<InboundServer>) {
        match self {
            Self::Watched(tx) if tx.receiver_count() == 0 => *self = Self::Unwatched(server),
            Self::Watched(tx) => {
                tx.send_if_modified(|current| {
                    if *current == server {
                        return false;
                    }
                    *current = server;
                    true
                });
            }
            Self::Unwatched(current) => *current = server,
        }
    }

    /// A receiver of the port's server, opening the channel if needed.
    fn subscribe(&mut self) -> watch::Receiver<Arc<InboundServer>> {
        match self {
            Self::Watched(tx) => tx.subscribe(),
            Self::Unwatched(server) => {
                let (tx, rx) = watch::channel(server.clone());
                *self = Self::Watched(tx);
                rx
            }
        }
    }
}

/// The known ports of a workload and their servers, sorted by port.
#[derive(Debug, Default)]
pub(super) struct PortServers(Vec<(NonZeroU16, PortServer)>);

impl PortServers {
    fn find(&self, port: NonZeroU16) -> Result<usize, usize> {
        self.0.binary_search_by_key(&port, |(p, _)| *p)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The known ports, ascending.
    pub fn ports(&self) -> impl Iterator<Item = NonZeroU16> + '_ {
        self.0.iter().map(|(port, _)| *port)
    }

    pub fn iter(&self) -> impl Iterator<Item = (NonZeroU16, &PortServer)> {
        self.0.iter().map(|(port, ps)| (*port, ps))
    }

    /// Publishes `server` on `port`, adding the port if it is new.
    pub fn publish(&mut self, port: NonZeroU16, server: Arc<InboundServer>) {
        match self.find(port) {
            Ok(i) => self.0[i].1.publish(server),
            Err(i) => self.0.insert(i, (port, PortServer::Unwatched(server))),
        }
    }

    /// A receiver of `port`'s server; an unknown port is added with the
    /// server `new` makes.
    pub fn subscribe(
        &mut self,
        port: NonZeroU16,
        new: impl FnOnce() -> Arc<InboundServer>,
    ) -> watch::Receiver<Arc<InboundServer>> {
        let i = match self.find(port) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (port, PortServer::Unwatched(new())));
                i
            }
        };
        self.0[i].1.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{DefaultPolicy, ProxyProtocol, ServerRef};

    fn server(name: Option<&str>, opaque: bool) -> Arc<InboundServer> {
        let policy = DefaultPolicy::AllUnauthenticated;
        Arc::new(InboundServer {
            reference: match name {
                Some(name) => ServerRef::Server(name.to_string()),
                None => ServerRef::Default(policy.as_str()),
            },
            protocol: if opaque {
                ProxyProtocol::Opaque
            } else {
                ProxyProtocol::Http1
            },
            authorizations: Default::default(),
            http_routes: Default::default(),
            grpc_routes: Default::default(),
            ratelimit: None,
        })
    }

    fn port(n: u16) -> NonZeroU16 {
        NonZeroU16::new(n).expect("nonzero")
    }

    #[test]
    fn ports_stay_sorted_and_unique() {
        let mut ports = PortServers::default();
        for n in [9090, 80, 8080, 80, 443] {
            ports.publish(port(n), server(None, false));
        }
        assert_eq!(
            ports.ports().map(NonZeroU16::get).collect::<Vec<_>>(),
            [80, 443, 8080, 9090]
        );
        let rx = ports.subscribe(port(81), || server(Some("new"), false));
        assert_eq!(rx.borrow().reference, ServerRef::Server("new".into()));
        assert_eq!(ports.len(), 5, "an unknown port is added");
    }

    #[test]
    fn a_watcher_sees_changes_and_only_real_ones() {
        let mut ports = PortServers::default();
        ports.publish(port(80), server(None, false));
        let mut rx = ports.subscribe(port(80), || unreachable!("a known port"));
        rx.mark_unchanged();
        ports.publish(port(80), server(None, false));
        assert!(
            !rx.has_changed().expect("open"),
            "an equal server is no change"
        );
        ports.publish(port(80), server(Some("web"), true));
        assert!(rx.has_changed().expect("open"));
        assert_eq!(
            rx.borrow_and_update().reference,
            ServerRef::Server("web".into())
        );
        let (_, ps) = ports.iter().next().expect("one port");
        assert!(matches!(ps.current().reference, ServerRef::Server(_)));
    }

    #[test]
    fn a_channel_without_watchers_is_dropped_at_the_next_change_and_reopened() {
        let mut ports = PortServers::default();
        ports.publish(port(80), server(None, false));
        let rx = ports.subscribe(port(80), || unreachable!("a known port"));
        drop(rx);
        ports.publish(port(80), server(Some("web"), false));
        let (_, ps) = ports.iter().next().expect("one port");
        assert!(matches!(ps, PortServer::Unwatched(_)), "{ps:?}");
        let rx = ports.subscribe(port(80), || unreachable!("a known port"));
        assert_eq!(rx.borrow().reference, ServerRef::Server("web".into()));
        assert!(ps_is_watched(&ports));
    }

    fn ps_is_watched(ports: &PortServers) -> bool {
        ports
            .iter()
            .all(|(_, ps)| matches!(ps, PortServer::Watched(_)))
    }
}
