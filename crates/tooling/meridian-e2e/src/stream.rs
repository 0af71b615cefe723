//! A `Destination.Get` client that keeps what it was sent, the way a proxy
//! does, and can follow the Meridian pod across restarts by reconnecting.

use std::{
    collections::BTreeSet,
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use linkerd2_proxy_api::{
    destination::{GetDestination, Update, destination_client::DestinationClient, update},
    net::TcpAddress,
};
use tonic::{Streaming, transport::Channel};

/// An open `Get` stream and the endpoint set it describes so far.
pub struct EndpointStream {
    stream: Streaming<Update>,
    /// Endpoints as built only from Add and Remove messages.
    pub current: BTreeSet<SocketAddr>,
    /// `Some(exists)` after a NoEndpoints, until the next Add.
    pub no_endpoints: Option<bool>,
}

/// Connects a Destination client to `addr` (a port-forward's local end).
pub async fn connect(addr: SocketAddr) -> Result<DestinationClient<Channel>, String> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    Ok(DestinationClient::new(channel))
}

impl EndpointStream {
    /// Opens `Get` for `path` with an empty context token.
    pub async fn open(
        client: &mut DestinationClient<Channel>,
        path: &str,
    ) -> Result<Self, tonic::Status> {
        let request = GetDestination {
            scheme: "k8s".into(),
            path: path.into(),
            context_token: String::new(),
        };
        let stream = client.get(request).await?.into_inner();
        Ok(Self {
            stream,
            current: BTreeSet::new(),
            no_endpoints: None,
        })
    }

    /// Reads one message (waiting at most `timeout`) and applies it.
    /// `Err` when the stream ended, failed or stayed silent.
    pub async fn next(&mut self, timeout: Duration) -> Result<(), String> {
        match tokio::time::timeout(timeout, self.stream.message()).await {
            Err(_) => Err("no message".into()),
            Ok(Err(status)) => Err(format!("stream failed: {status:?}")),
            Ok(Ok(None)) => Err("stream ended".into()),
            Ok(Ok(Some(update))) => {
                self.apply(&update);
                Ok(())
            }
        }
    }

    fn apply(&mut self, update: &Update) {
        match &update.update {
            Some(update::Update::Add(set)) => {
                self.no_endpoints = None;
                for addr in &set.addrs {
                    if let Some(addr) = addr.addr.as_ref().and_then(socket_addr) {
                        self.current.insert(addr);
                    }
                }
            }
            Some(update::Update::Remove(set)) => {
                for addr in set.addrs.iter().filter_map(socket_addr) {
                    self.current.remove(&addr);
                }
            }
            Some(update::Update::NoEndpoints(none)) => {
                self.current.clear();
                self.no_endpoints = Some(none.exists);
            }
            None => {}
        }
    }

    /// Reads until the endpoint set is `want` (within `timeout`).
    pub async fn wait_for(
        &mut self,
        what: &str,
        want: &BTreeSet<SocketAddr>,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.current != *want {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(format!("{what}: holds {:?}, want {want:?}", self.current));
            }
            self.next(left)
                .await
                .map_err(|e| format!("{what}: {e}; holds {:?}", self.current))?;
        }
        Ok(())
    }
}

fn socket_addr(addr: &TcpAddress) -> Option<SocketAddr> {
    let ip = IpAddr::try_from(addr.ip?).ok()?;
    Some(SocketAddr::new(ip, u16::try_from(addr.port).ok()?))
}
