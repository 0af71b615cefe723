//! Whether an inbound `Server`, as the policy controller sends it to the
//! target's proxy, lets a client in: the rules the proxy applies (client
//! network, then unauthenticated / mesh-TLS identity or suffix), on the
//! Server's authorizations and on those of its HTTP/gRPC routes. Pure.

use std::net::IpAddr;

use linkerd2_proxy_api::{
    inbound::{
        Authz, Server, authn,
        authn::permit_mesh_tls::{self, Clients},
        proxy_protocol,
    },
    meta::metadata,
    net::IpNetwork,
};

/// Who connects: its mesh identity (if meshed) and address.
#[derive(Clone, Debug)]
pub struct Client {
    pub identity: Option<String>,
    pub ip: IpAddr,
}

/// What the target's proxy would decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Let in by this authorization (and on this route, if route-level).
    Allowed { by: String, route: Option<String> },
    /// Nothing lets the client in; `considered` names every authorization.
    Denied { considered: Vec<String> },
}

/// The decision for `client` on `server`.
pub fn decide(server: &Server, client: &Client) -> Decision {
    let mut considered = Vec::new();
    for authz in &server.authorizations {
        considered.push(name(authz));
        if permits(authz, client) {
            return Decision::Allowed {
                by: name(authz),
                route: None,
            };
        }
    }
    for (route, authz) in route_authorizations(server) {
        considered.push(format!("{} (route {route})", name(authz)));
        if permits(authz, client) {
            return Decision::Allowed {
                by: name(authz),
                route: Some(route),
            };
        }
    }
    Decision::Denied { considered }
}

/// The Server's name as its labels give it (`Server ns/web-http`,
/// `default all-unauthenticated`).
pub fn server_name(server: &Server) -> String {
    let label = |k: &str| server.labels.get(k).cloned().unwrap_or_default();
    match label("kind").as_str() {
        "default" => format!("default policy {}", label("name")),
        _ => format!("Server {}", label("name")),
    }
}

/// Whether `authz` lets `client` in.
pub fn permits(authz: &Authz, client: &Client) -> bool {
    let in_networks = authz.networks.is_empty()
        || authz.networks.iter().any(|n| {
            n.net.as_ref().is_some_and(|net| contains(net, client.ip))
                && !n.except.iter().any(|e| contains(e, client.ip))
        });
    if !in_networks {
        return false;
    }
    match authz
        .authentication
        .as_ref()
        .and_then(|a| a.permit.as_ref())
    {
        None => false,
        Some(authn::Permit::Unauthenticated(_)) => true,
        Some(authn::Permit::MeshTls(mtls)) => match &mtls.clients {
            None => false,
            Some(Clients::Unauthenticated(_)) => true,
            Some(Clients::Identities(ids)) => client
                .identity
                .as_deref()
                .is_some_and(|id| identity_matches(ids, id)),
        },
    }
}

fn identity_matches(ids: &permit_mesh_tls::PermitClientIdentities, id: &str) -> bool {
    ids.identities.iter().any(|i| i.name == id)
        || ids.suffixes.iter().any(|s| {
            let labels: Vec<&str> = id.split('.').collect();
            s.parts.len() <= labels.len()
                && labels[labels.len() - s.parts.len()..]
                    .iter()
                    .zip(&s.parts)
                    .all(|(l, p)| *l == p)
        })
}

fn contains(net: &IpNetwork, ip: IpAddr) -> bool {
    let Some(base) = net.ip.and_then(|a| IpAddr::try_from(a).ok()) else {
        return false;
    };
    let prefix = net.prefix_len;
    match (base, ip) {
        (IpAddr::V4(b), IpAddr::V4(i)) => {
            let mask = u32::MAX
                .checked_shl(32u32.saturating_sub(prefix))
                .unwrap_or(0);
            prefix <= 32 && (u32::from(b) & mask) == (u32::from(i) & mask)
        }
        (IpAddr::V6(b), IpAddr::V6(i)) => {
            let mask = u128::MAX
                .checked_shl(128u32.saturating_sub(prefix))
                .unwrap_or(0);
            prefix <= 128 && (u128::from(b) & mask) == (u128::from(i) & mask)
        }
        _ => false,
    }
}

/// `Kind ns/name` of an authorization, from its metadata (else its labels).
pub fn name(authz: &Authz) -> String {
    if let Some(metadata::Kind::Resource(r)) = authz.metadata.as_ref().and_then(|m| m.kind.as_ref())
    {
        return format!("{} {}", r.kind, r.name);
    }
    if let Some(metadata::Kind::Default(d)) = authz.metadata.as_ref().and_then(|m| m.kind.as_ref())
    {
        return format!("default {d}");
    }
    let label = |k: &str| authz.labels.get(k).cloned().unwrap_or_default();
    format!("{} {}", label("kind"), label("name"))
}

/// Every route's authorizations, with the route's name.
fn route_authorizations(server: &Server) -> Vec<(String, &Authz)> {
    let route_name =
        |m: Option<&linkerd2_proxy_api::meta::Metadata>| match m.and_then(|m| m.kind.as_ref()) {
            Some(metadata::Kind::Resource(r)) => format!("{} {}", r.kind, r.name),
            Some(metadata::Kind::Default(d)) => format!("default {d}"),
            None => "unnamed".to_string(),
        };
    let mut out = Vec::new();
    let Some(kind) = server.protocol.as_ref().and_then(|p| p.kind.as_ref()) else {
        return out;
    };
    let (http, grpc) = match kind {
        proxy_protocol::Kind::Detect(d) => (&d.http_routes[..], &[][..]),
        proxy_protocol::Kind::Http1(h) => (&h.routes[..], &[][..]),
        proxy_protocol::Kind::Http2(h) => (&h.routes[..], &[][..]),
        proxy_protocol::Kind::Grpc(g) => (&[][..], &g.routes[..]),
        proxy_protocol::Kind::Opaque(_) | proxy_protocol::Kind::Tls(_) => (&[][..], &[][..]),
    };
    for route in http {
        for authz in &route.authorizations {
            out.push((route_name(route.metadata.as_ref()), authz));
        }
    }
    for route in grpc {
        for authz in &route.authorizations {
            out.push((route_name(route.metadata.as_ref()), authz));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use linkerd2_proxy_api::inbound::{
        Authn, Identity, IdentitySuffix, Network, authn::PermitMeshTls,
    };

    use super::*;

    fn net(cidr: &str) -> Network {
        let (ip, len) = cidr.split_once('/').expect("cidr");
        let ip: IpAddr = ip.parse().expect("ip");
        Network {
            net: Some(IpNetwork {
                ip: Some(ip.into()),
                prefix_len: len.parse().expect("len"),
            }),
            except: vec![],
        }
    }

    fn mtls(identities: &[&str], suffixes: &[&[&str]]) -> Option<Authn> {
        Some(Authn {
            permit: Some(authn::Permit::MeshTls(PermitMeshTls {
                clients: Some(Clients::Identities(
                    permit_mesh_tls::PermitClientIdentities {
                        identities: identities
                            .iter()
                            .map(|n| Identity { name: (*n).into() })
                            .collect(),
                        suffixes: suffixes
                            .iter()
                            .map(|p| IdentitySuffix {
                                parts: p.iter().map(|s| (*s).into()).collect(),
                            })
                            .collect(),
                    },
                )),
            })),
        })
    }

    fn authz(name: &str, networks: Vec<Network>, authentication: Option<Authn>) -> Authz {
        Authz {
            networks,
            authentication,
            labels: Default::default(),
            metadata: Some(crate::test_messages::authorization_policy(name)),
        }
    }

    const ALLOWED: &str = "allowed.ns.serviceaccount.identity.linkerd.cluster.local";

    fn client(identity: Option<&str>, ip: &str) -> Client {
        Client {
            identity: identity.map(str::to_string),
            ip: ip.parse().expect("ip"),
        }
    }

    fn server(authorizations: Vec<Authz>) -> Server {
        Server {
            authorizations,
            ..Default::default()
        }
    }

    #[test]
    fn identities_suffixes_and_networks() {
        let s = server(vec![
            authz("by-name", vec![net("0.0.0.0/0")], mtls(&[ALLOWED], &[])),
            authz(
                "by-suffix",
                vec![net("10.0.0.0/8")],
                mtls(
                    &[],
                    &[&[
                        "other",
                        "serviceaccount",
                        "identity",
                        "linkerd",
                        "cluster",
                        "local",
                    ]],
                ),
            ),
        ]);
        assert_eq!(
            decide(&s, &client(Some(ALLOWED), "192.168.1.1")),
            Decision::Allowed {
                by: "AuthorizationPolicy by-name".into(),
                route: None
            }
        );
        let other = "x.other.serviceaccount.identity.linkerd.cluster.local";
        assert_eq!(
            decide(&s, &client(Some(other), "10.1.2.3")),
            Decision::Allowed {
                by: "AuthorizationPolicy by-suffix".into(),
                route: None
            }
        );
        // The suffix's network does not hold the client.
        assert_eq!(
            decide(&s, &client(Some(other), "192.168.1.1")),
            Decision::Denied {
                considered: vec![
                    "AuthorizationPolicy by-name".into(),
                    "AuthorizationPolicy by-suffix".into()
                ]
            }
        );
        // Unmeshed clients have no identity.
        assert!(matches!(
            decide(&s, &client(None, "10.1.2.3")),
            Decision::Denied { .. }
        ));
    }

    #[test]
    fn unauthenticated_and_an_empty_suffix_let_everyone_in() {
        let unauth = authz(
            "all",
            vec![net("0.0.0.0/0"), net("::/0")],
            Some(Authn {
                permit: Some(authn::Permit::Unauthenticated(Default::default())),
            }),
        );
        assert!(permits(&unauth, &client(None, "fd00::1")));
        let any_mesh = authz("mesh", vec![], mtls(&[], &[&[]]));
        assert!(permits(&any_mesh, &client(Some(ALLOWED), "10.0.0.1")));
        assert!(!permits(&any_mesh, &client(None, "10.0.0.1")));
        assert_eq!(
            decide(&server(vec![]), &client(Some(ALLOWED), "10.0.0.1")),
            Decision::Denied { considered: vec![] }
        );
    }
}
