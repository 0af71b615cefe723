//! The two control planes compared: each a destination address and a
//! policy address, given directly (`--a 127.0.0.1:8086,127.0.0.1:8090`) or,
//! with `--port-forward`, a Deployment (`--a linkerd/linkerd-destination`)
//! whose Ready pod's ports are forwarded through the API server. Both are
//! connected before anything is asked: a side that cannot be reached ends
//! the run naming its address.

use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use tonic::transport::{Channel, Endpoint};

use super::ask::Conns;
use crate::forward;

/// How long connecting to an address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A side, as given and as reached.
#[derive(Clone, Debug)]
pub struct Side {
    /// `a` or `b`.
    pub name: &'static str,
    pub destination: String,
    pub policy: String,
    /// `pod <ns>/<pod> of Deployment <ns>/<name>`, when port-forwarded.
    pub via: Option<String>,
}

impl Side {
    /// How the side is reached, for reports.
    pub fn describe(&self) -> String {
        let via = self
            .via
            .as_ref()
            .map(|v| format!(" (port-forwarded to {v})"))
            .unwrap_or_default();
        format!(
            "destination {}, policy {}{via}",
            self.destination, self.policy
        )
    }
}

/// Ports forwarded to a Deployment's pod.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub destination: u16,
    pub policy: u16,
}

/// Why a side cannot be asked.
#[derive(Debug, thiserror::Error)]
#[error("side {side}: cannot reach the {what} at {addr}: {error}")]
pub struct Unreachable {
    pub side: &'static str,
    pub what: &'static str,
    pub addr: String,
    pub error: String,
}

/// `spec` as a side: `DESTINATION,POLICY` addresses, or with a Kubernetes
/// client (`--port-forward`), `<namespace>/<deployment>`.
pub async fn resolve(
    name: &'static str,
    spec: &str,
    forwarding: Option<(&Client, Ports)>,
) -> anyhow::Result<Side> {
    let Some((kube, ports)) = forwarding else {
        let (destination, policy) = spec.split_once(',').with_context(|| {
            format!("--{name} {spec:?}: give the destination and the policy address, comma-separated (e.g. 127.0.0.1:8086,127.0.0.1:8090)")
        })?;
        return Ok(Side {
            name,
            destination: url(destination.trim()),
            policy: url(policy.trim()),
            via: None,
        });
    };
    let Some((ns, deployment)) = spec.split_once('/') else {
        bail!(
            "--{name} {spec:?}: with --port-forward, give <namespace>/<deployment> (e.g. linkerd/linkerd-destination)"
        );
    };
    let pod = forward::deployment_pod(kube, ns, deployment).await?;
    Ok(Side {
        name,
        destination: forward::forward(kube, ns, &pod, ports.destination).await?,
        policy: forward::forward(kube, ns, &pod, ports.policy).await?,
        via: Some(format!(
            "pod {ns}/{pod} of Deployment {ns}/{deployment}, ports {} and {}",
            ports.destination, ports.policy
        )),
    })
}

/// `addr` as a URL: `http://` unless it names a scheme.
pub(crate) fn url(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

/// Connects both of a side's addresses (an HTTP/2 connection each).
pub async fn connect(side: &Side) -> Result<Conns, Unreachable> {
    let one = |what: &'static str, addr: &str| {
        let addr = addr.to_string();
        async move {
            let unreachable = |error: String| Unreachable {
                side: side.name,
                what,
                addr: addr.clone(),
                error,
            };
            let endpoint = Endpoint::from_shared(addr.clone())
                .map_err(|e| unreachable(e.to_string()))?
                .connect_timeout(CONNECT_TIMEOUT);
            match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
                Ok(Ok(channel)) => Ok::<Channel, Unreachable>(channel),
                Ok(Err(e)) => Err(unreachable(error_chain(&e))),
                Err(_) => Err(unreachable(format!(
                    "no connection within {CONNECT_TIMEOUT:?}"
                ))),
            }
        }
    };
    let (destination, policy) = tokio::join!(
        one("destination", &side.destination),
        one("policy controller", &side.policy)
    );
    Ok(Conns {
        destination: destination?,
        policy: policy?,
    })
}

/// An error and its causes, `: `-separated (a cause its error already
/// says is not repeated).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(&format!(": {cause_text}"));
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn addresses_are_two_urls() {
        let side = resolve("a", "127.0.0.1:8086, http://[::1]:8090", None)
            .await
            .expect("side");
        assert_eq!(side.destination, "http://127.0.0.1:8086");
        assert_eq!(side.policy, "http://[::1]:8090");
        let error = resolve("b", "127.0.0.1:8086", None)
            .await
            .expect_err("one address");
        assert!(
            error
                .to_string()
                .starts_with("--b \"127.0.0.1:8086\": give the destination and the policy address"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_address_where_nothing_listens_is_named() {
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let side = resolve("b", &format!("{free},{free}"), None)
            .await
            .expect("side");
        let Err(error) = connect(&side).await else {
            panic!("nothing listens at {free}");
        };
        assert!(
            error.to_string().starts_with(&format!(
                "side b: cannot reach the destination at http://{free}: "
            )),
            "{error}"
        );
    }
}
