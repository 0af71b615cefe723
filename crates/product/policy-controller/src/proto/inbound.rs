//! Conversion of an [`InboundServer`] into the proxy API's `Server`.

use std::collections::{BTreeMap, HashMap};

use ipnet::IpNet;
use linkerd2_proxy_api::{
    grpc_route as grpc_proto, http_route as route_proto, http_types,
    inbound::{self as proto, authn, proxy_protocol},
    meta::{self, metadata},
};

use super::ratelimit::to_rate_limit;
use crate::core::{
    AuthorizationRef, Authorizations, ClientAuthentication, ClientAuthorization, IdentityMatch,
    InboundServer, ProxyProtocol, RouteRef, ServerRef,
    grpc_routes::{self, GrpcRoute},
    outbound::GrpcRouteMatch,
    routes::{
        Filter, HeaderMatch, HeaderModifierFilter, HostMatch, HttpRoute, HttpRouteMatch, PathMatch,
        PathModifier, QueryParamMatch, RequestRedirectFilter, ordered,
    },
};

const POLICY_GROUP: &str = k8s_api::policy::GROUP;

/// The proxy API view of `server`. Authorizations without networks are
/// sent with the cluster networks. gRPC servers get their GRPCRoutes, or
/// the default gRPC route when none is attached.
pub fn to_server(server: &InboundServer, cluster_networks: &[IpNet]) -> proto::Server {
    let http_routes = || {
        ordered(&server.http_routes)
            .into_iter()
            .map(|(r, route)| to_http_route(r, route, cluster_networks))
            .collect::<Vec<_>>()
    };
    let kind = match &server.protocol {
        ProxyProtocol::Detect { timeout } => proxy_protocol::Kind::Detect(proxy_protocol::Detect {
            timeout: prost_types::Duration::try_from(*timeout).ok(),
            http_routes: http_routes(),
            http_local_rate_limit: server.ratelimit.as_ref().map(to_rate_limit),
        }),
        ProxyProtocol::Http1 => proxy_protocol::Kind::Http1(proxy_protocol::Http1 {
            routes: http_routes(),
            local_rate_limit: server.ratelimit.as_ref().map(to_rate_limit),
        }),
        ProxyProtocol::Http2 => proxy_protocol::Kind::Http2(proxy_protocol::Http2 {
            routes: http_routes(),
            local_rate_limit: server.ratelimit.as_ref().map(to_rate_limit),
        }),
        ProxyProtocol::Grpc => proxy_protocol::Kind::Grpc(proxy_protocol::Grpc {
            routes: if server.grpc_routes.is_empty() {
                vec![default_grpc_route()]
            } else {
                to_grpc_routes(&server.grpc_routes, cluster_networks)
            },
        }),
        ProxyProtocol::Opaque => proxy_protocol::Kind::Opaque(proxy_protocol::Opaque {}),
        ProxyProtocol::Tls => proxy_protocol::Kind::Tls(proxy_protocol::Tls {}),
    };
    let labels = match &server.reference {
        ServerRef::Default(name) => labels("", "default", name),
        ServerRef::Server(name) => labels(POLICY_GROUP, "server", name),
    };
    proto::Server {
        protocol: Some(proto::ProxyProtocol { kind: Some(kind) }),
        server_ips: Vec::new(),
        authorizations: to_authzs(&server.authorizations, cluster_networks),
        labels,
    }
}

fn labels(group: &str, kind: &str, name: &str) -> HashMap<String, String> {
    [("group", group), ("kind", kind), ("name", name)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn to_authzs(authzs: &Authorizations, cluster_networks: &[IpNet]) -> Vec<proto::Authz> {
    authzs
        .iter()
        .map(|(r, a)| to_authz(r, a, cluster_networks))
        .collect()
}

fn to_authz(
    reference: &AuthorizationRef,
    authz: &ClientAuthorization,
    cluster_networks: &[IpNet],
) -> proto::Authz {
    let (group, kind, name) = match reference {
        AuthorizationRef::Default(name) => ("", "default", *name),
        AuthorizationRef::ServerAuthorization(name) => {
            (POLICY_GROUP, "serverauthorization", name.as_str())
        }
        AuthorizationRef::AuthorizationPolicy(name) => {
            (POLICY_GROUP, "authorizationpolicy", name.as_str())
        }
    };
    let metadata = match reference {
        AuthorizationRef::Default(name) => metadata::Kind::Default(name.to_string()),
        _ => metadata::Kind::Resource(meta::Resource {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            ..Default::default()
        }),
    };
    let networks = if authz.networks.is_empty() {
        cluster_networks
            .iter()
            .map(|net| proto::Network {
                net: Some((*net).into()),
                except: Vec::new(),
            })
            .collect()
    } else {
        authz
            .networks
            .iter()
            .map(|n| proto::Network {
                net: Some(n.net.into()),
                except: n.except.iter().map(|e| (*e).into()).collect(),
            })
            .collect()
    };
    let permit = match &authz.authentication {
        ClientAuthentication::Unauthenticated => {
            authn::Permit::Unauthenticated(authn::PermitUnauthenticated {})
        }
        ClientAuthentication::TlsUnauthenticated => authn::Permit::MeshTls(authn::PermitMeshTls {
            clients: Some(authn::permit_mesh_tls::Clients::Unauthenticated(
                authn::PermitUnauthenticated {},
            )),
        }),
        ClientAuthentication::TlsAuthenticated(ids) => {
            let mut identities = Vec::new();
            let mut suffixes = Vec::new();
            for id in ids {
                match id {
                    IdentityMatch::Exact(name) => {
                        identities.push(proto::Identity { name: name.clone() })
                    }
                    IdentityMatch::Suffix(parts) => suffixes.push(proto::IdentitySuffix {
                        parts: parts.clone(),
                    }),
                }
            }
            authn::Permit::MeshTls(authn::PermitMeshTls {
                clients: Some(authn::permit_mesh_tls::Clients::Identities(
                    authn::permit_mesh_tls::PermitClientIdentities {
                        identities,
                        suffixes,
                    },
                )),
            })
        }
    };
    proto::Authz {
        networks,
        authentication: Some(proto::Authn {
            permit: Some(permit),
        }),
        labels: labels(group, kind, name),
        metadata: Some(meta::Metadata {
            kind: Some(metadata),
        }),
    }
}

pub(crate) fn route_metadata(reference: &RouteRef) -> meta::Metadata {
    let kind = match reference {
        RouteRef::Default(name) => metadata::Kind::Default(name.to_string()),
        RouteRef::Resource(gkn) => metadata::Kind::Resource(meta::Resource {
            group: gkn.group.clone(),
            kind: gkn.kind.clone(),
            name: gkn.name.clone(),
            ..Default::default()
        }),
    };
    meta::Metadata { kind: Some(kind) }
}

fn to_http_route(
    reference: &RouteRef,
    route: &HttpRoute,
    cluster_networks: &[IpNet],
) -> proto::HttpRoute {
    proto::HttpRoute {
        metadata: Some(route_metadata(reference)),
        hosts: route.hostnames.iter().map(host_match).collect(),
        authorizations: to_authzs(&route.authorizations, cluster_networks),
        rules: route
            .rules
            .iter()
            .map(|rule| proto::http_route::Rule {
                matches: rule.matches.iter().map(route_match).collect(),
                filters: rule.filters.iter().filter_map(filter).collect(),
            })
            .collect(),
    }
}

fn default_grpc_route() -> proto::GrpcRoute {
    proto::GrpcRoute {
        metadata: Some(route_metadata(&RouteRef::Default("default"))),
        hosts: Vec::new(),
        authorizations: Vec::new(),
        rules: vec![proto::grpc_route::Rule {
            matches: vec![grpc_proto::GrpcRouteMatch {
                rpc: Some(grpc_proto::GrpcRpcMatch::default()),
                headers: Vec::new(),
            }],
            filters: Vec::new(),
        }],
    }
}

pub(crate) fn host_match(host: &HostMatch) -> route_proto::HostMatch {
    let m = match host {
        HostMatch::Exact(h) => route_proto::host_match::Match::Exact(h.clone()),
        HostMatch::Suffix { reverse_labels } => {
            route_proto::host_match::Match::Suffix(route_proto::host_match::Suffix {
                reverse_labels: reverse_labels.clone(),
            })
        }
    };
    route_proto::HostMatch { r#match: Some(m) }
}

pub(crate) fn route_match(m: &HttpRouteMatch) -> route_proto::HttpRouteMatch {
    use route_proto::{header_match, path_match, query_param_match};
    route_proto::HttpRouteMatch {
        path: m.path.as_ref().map(|p| route_proto::PathMatch {
            kind: Some(match p {
                PathMatch::Exact(s) => path_match::Kind::Exact(s.clone()),
                PathMatch::Prefix(s) => path_match::Kind::Prefix(s.clone()),
                PathMatch::Regex(s) => path_match::Kind::Regex(s.clone()),
            }),
        }),
        headers: m
            .headers
            .iter()
            .map(|h| match h {
                HeaderMatch::Exact(name, value) => route_proto::HeaderMatch {
                    name: name.clone(),
                    value: Some(header_match::Value::Exact(value.as_bytes().to_vec())),
                },
                HeaderMatch::Regex(name, re) => route_proto::HeaderMatch {
                    name: name.clone(),
                    value: Some(header_match::Value::Regex(re.clone())),
                },
            })
            .collect(),
        query_params: m
            .query_params
            .iter()
            .map(|q| match q {
                QueryParamMatch::Exact(name, value) => route_proto::QueryParamMatch {
                    name: name.clone(),
                    value: Some(query_param_match::Value::Exact(value.clone())),
                },
                QueryParamMatch::Regex(name, re) => route_proto::QueryParamMatch {
                    name: name.clone(),
                    value: Some(query_param_match::Value::Regex(re.clone())),
                },
            })
            .collect(),
        method: m
            .method
            .as_deref()
            .and_then(|m| http::Method::from_bytes(m.as_bytes()).ok())
            .map(http_types::HttpMethod::from),
    }
}

fn headers(pairs: &[(String, String)]) -> http_types::Headers {
    http_types::Headers {
        headers: pairs
            .iter()
            .map(|(name, value)| http_types::headers::Header {
                name: name.clone(),
                value: value.as_bytes().to_vec(),
            })
            .collect(),
    }
}

/// Header edits as the proxy API's request header modifier.
pub(crate) fn request_header_modifier(
    HeaderModifierFilter { add, set, remove }: &HeaderModifierFilter,
) -> route_proto::RequestHeaderModifier {
    route_proto::RequestHeaderModifier {
        add: Some(headers(add)),
        set: Some(headers(set)),
        remove: remove.clone(),
    }
}

/// Header edits as the proxy API's response header modifier.
pub(crate) fn response_header_modifier(
    HeaderModifierFilter { add, set, remove }: &HeaderModifierFilter,
) -> route_proto::ResponseHeaderModifier {
    route_proto::ResponseHeaderModifier {
        add: Some(headers(add)),
        set: Some(headers(set)),
        remove: remove.clone(),
    }
}

/// A redirect as the proxy API's.
pub(crate) fn redirect(
    RequestRedirectFilter {
        scheme,
        host,
        path,
        port,
        status,
    }: &RequestRedirectFilter,
) -> route_proto::RequestRedirect {
    route_proto::RequestRedirect {
        scheme: scheme.as_deref().map(http_types::Scheme::from),
        host: host.clone().unwrap_or_default(),
        path: path.as_ref().map(|p| route_proto::PathModifier {
            replace: Some(match p {
                PathModifier::Full(s) => route_proto::path_modifier::Replace::Full(s.clone()),
                PathModifier::Prefix(s) => route_proto::path_modifier::Replace::Prefix(s.clone()),
            }),
        }),
        port: port.map(|p| u32::from(p.get())).unwrap_or_default(),
        status: status.map(u32::from).unwrap_or_default(),
    }
}

/// Inbound proxies are sent request header modifiers and redirects only.
fn filter(f: &Filter) -> Option<proto::http_route::Filter> {
    use proto::http_route::filter::Kind;
    let kind = match f {
        Filter::RequestHeaderModifier(m) => Kind::RequestHeaderModifier(request_header_modifier(m)),
        Filter::ResponseHeaderModifier(_) => return None,
        Filter::RequestRedirect(r) => Kind::Redirect(redirect(r)),
    };
    Some(proto::http_route::Filter { kind: Some(kind) })
}

/// Inbound gRPC routes (GRPCRoutes attached to a Server) in publishing
/// order: oldest first, `Resource` metadata, matches as on the outbound
/// side, and only request header modifiers as filters (the original drops
/// the others on inbound gRPC routes).
pub fn to_grpc_routes(
    routes: &BTreeMap<RouteRef, GrpcRoute>,
    cluster_networks: &[IpNet],
) -> Vec<proto::GrpcRoute> {
    grpc_routes::ordered(routes)
        .into_iter()
        .map(|(reference, route)| proto::GrpcRoute {
            metadata: Some(route_metadata(reference)),
            hosts: route.hostnames.iter().map(host_match).collect(),
            authorizations: to_authzs(&route.authorizations, cluster_networks),
            rules: route
                .rules
                .iter()
                .map(|rule| proto::grpc_route::Rule {
                    matches: rule.matches.iter().map(grpc_match).collect(),
                    filters: rule.filters.iter().filter_map(grpc_filter).collect(),
                })
                .collect(),
        })
        .collect()
}

fn grpc_filter(f: &Filter) -> Option<proto::grpc_route::Filter> {
    use proto::grpc_route::filter::Kind;
    match f {
        Filter::RequestHeaderModifier(m) => Some(proto::grpc_route::Filter {
            kind: Some(Kind::RequestHeaderModifier(request_header_modifier(m))),
        }),
        Filter::ResponseHeaderModifier(_) | Filter::RequestRedirect(_) => None,
    }
}

pub(crate) fn grpc_match(m: &GrpcRouteMatch) -> grpc_proto::GrpcRouteMatch {
    grpc_proto::GrpcRouteMatch {
        rpc: m.method.as_ref().map(|m| grpc_proto::GrpcRpcMatch {
            service: m.service.clone().unwrap_or_default(),
            method: m.method.clone().unwrap_or_default(),
        }),
        headers: m
            .headers
            .iter()
            .map(|h| match h {
                HeaderMatch::Exact(name, value) => route_proto::HeaderMatch {
                    name: name.clone(),
                    value: Some(route_proto::header_match::Value::Exact(
                        value.as_bytes().to_vec(),
                    )),
                },
                HeaderMatch::Regex(name, re) => route_proto::HeaderMatch {
                    name: name.clone(),
                    value: Some(route_proto::header_match::Value::Regex(re.clone())),
                },
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::{
        AuthorizationRef, ClientAuthorization, GroupKindName,
        grpc_routes::GrpcRouteRule,
        outbound::{GrpcMethodMatch, GrpcRouteMatch},
        routes::HeaderModifierFilter,
    };
    use linkerd2_proxy_api::meta::metadata;
    use std::time::{Duration, SystemTime};

    use crate::core::{DETECT_TIMEOUT, DefaultPolicy, NetworkMatch, routes::default_http_routes};

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().expect("net")).collect()
    }

    #[test]
    fn default_server_with_probe_route() {
        let cluster = nets(&["10.0.0.0/8"]);
        let probe = nets(&["0.0.0.0/0"]);
        let server = InboundServer {
            reference: ServerRef::Default("all-unauthenticated"),
            protocol: ProxyProtocol::Detect {
                timeout: DETECT_TIMEOUT,
            },
            authorizations: DefaultPolicy::AllUnauthenticated.authorizations(&cluster),
            http_routes: default_http_routes(["/ready"], &probe),
            grpc_routes: Default::default(),
            ratelimit: None,
        };
        let out = to_server(&server, &cluster);
        assert_eq!(out.labels, labels("", "default", "all-unauthenticated"));
        assert!(out.server_ips.is_empty());
        let Some(proxy_protocol::Kind::Detect(detect)) = out.protocol.and_then(|p| p.kind) else {
            panic!("expected detect");
        };
        assert_eq!(
            detect.timeout,
            Some(prost_types::Duration {
                seconds: 10,
                nanos: 0
            })
        );
        let names: Vec<_> = detect
            .http_routes
            .iter()
            .map(|r| r.metadata.clone().and_then(|m| m.kind))
            .collect();
        assert_eq!(
            names,
            [
                Some(metadata::Kind::Default("default".into())),
                Some(metadata::Kind::Default("probe".into()))
            ]
        );
        let probe_route = &detect.http_routes[1];
        assert_eq!(probe_route.authorizations.len(), 1);
        assert_eq!(
            probe_route.authorizations[0].networks[0].net,
            Some(probe[0].into())
        );
        let m = &probe_route.rules[0].matches[0];
        assert_eq!(
            m.method,
            Some(http_types::HttpMethod::from(http::Method::GET))
        );
        assert_eq!(out.authorizations.len(), 1);
        assert_eq!(
            out.authorizations[0].metadata,
            Some(meta::Metadata {
                kind: Some(metadata::Kind::Default("all-unauthenticated".into()))
            })
        );
        assert_eq!(out.authorizations[0].networks.len(), 2);
    }

    #[test]
    fn authz_kinds_identities_and_cluster_networks() {
        let cluster = nets(&["10.0.0.0/8", "192.168.0.0/16"]);
        let authzs: Authorizations = [
            (
                AuthorizationRef::ServerAuthorization("saz".into()),
                ClientAuthorization {
                    networks: vec![],
                    authentication: ClientAuthentication::TlsUnauthenticated,
                },
            ),
            (
                AuthorizationRef::AuthorizationPolicy("ap".into()),
                ClientAuthorization {
                    networks: vec![
                        NetworkMatch::parse("10.1.0.0/16", ["10.1.2.0/24"]).expect("net"),
                    ],
                    authentication: ClientAuthentication::TlsAuthenticated(vec![
                        IdentityMatch::from("web.ns.serviceaccount.identity.linkerd.cluster.local"),
                        IdentityMatch::from("*.ns.serviceaccount.identity.linkerd.cluster.local"),
                    ]),
                },
            ),
        ]
        .into();
        let out = to_authzs(&authzs, &cluster);
        let saz = &out[0];
        assert_eq!(
            saz.labels,
            labels(POLICY_GROUP, "serverauthorization", "saz")
        );
        assert_eq!(
            saz.networks.len(),
            2,
            "empty networks become the cluster networks"
        );
        assert_eq!(
            saz.authentication.clone().and_then(|a| a.permit),
            Some(authn::Permit::MeshTls(authn::PermitMeshTls {
                clients: Some(authn::permit_mesh_tls::Clients::Unauthenticated(
                    authn::PermitUnauthenticated {}
                ))
            }))
        );
        let ap = &out[1];
        assert_eq!(
            ap.metadata,
            Some(meta::Metadata {
                kind: Some(metadata::Kind::Resource(meta::Resource {
                    group: POLICY_GROUP.into(),
                    kind: "authorizationpolicy".into(),
                    name: "ap".into(),
                    ..Default::default()
                }))
            })
        );
        assert_eq!(ap.networks[0].except.len(), 1);
        let Some(authn::Permit::MeshTls(authn::PermitMeshTls {
            clients: Some(authn::permit_mesh_tls::Clients::Identities(ids)),
        })) = ap.authentication.clone().and_then(|a| a.permit)
        else {
            panic!("expected identities");
        };
        assert_eq!(
            ids.identities[0].name,
            "web.ns.serviceaccount.identity.linkerd.cluster.local"
        );
        assert_eq!(
            ids.suffixes[0].parts,
            [
                "ns",
                "serviceaccount",
                "identity",
                "linkerd",
                "cluster",
                "local"
            ]
        );
    }

    #[test]
    fn protocols_and_grpc_default_route() {
        let mut server = InboundServer {
            reference: ServerRef::Server("srv".into()),
            protocol: ProxyProtocol::Grpc,
            authorizations: Authorizations::new(),
            http_routes: default_http_routes([], &[]),
            grpc_routes: Default::default(),
            ratelimit: None,
        };
        let kind = |s: &InboundServer| to_server(s, &[]).protocol.and_then(|p| p.kind);
        let Some(proxy_protocol::Kind::Grpc(grpc)) = kind(&server) else {
            panic!("expected grpc");
        };
        assert_eq!(grpc.routes.len(), 1);
        assert_eq!(
            grpc.routes[0].rules[0].matches[0].rpc,
            Some(grpc_proto::GrpcRpcMatch::default())
        );
        assert_eq!(
            to_server(&server, &[]).labels,
            labels(POLICY_GROUP, "server", "srv")
        );
        server.protocol = ProxyProtocol::Opaque;
        assert!(matches!(
            kind(&server),
            Some(proxy_protocol::Kind::Opaque(_))
        ));
        server.protocol = ProxyProtocol::Tls;
        assert!(matches!(kind(&server), Some(proxy_protocol::Kind::Tls(_))));
        server.protocol = ProxyProtocol::Http2;
        assert!(
            matches!(kind(&server), Some(proxy_protocol::Kind::Http2(h)) if h.routes.len() == 1)
        );
    }

    #[test]
    fn response_header_modifiers_are_not_sent() {
        let f = Filter::ResponseHeaderModifier(HeaderModifierFilter::default());
        assert!(filter(&f).is_none());
        let f = Filter::RequestRedirect(RequestRedirectFilter {
            scheme: Some("https".into()),
            status: Some(302),
            ..Default::default()
        });
        assert!(filter(&f).is_some());
    }

    fn grpc_route_at(at: u64) -> GrpcRoute {
        GrpcRoute {
            hostnames: Vec::new(),
            rules: vec![GrpcRouteRule {
                matches: vec![GrpcRouteMatch {
                    method: Some(GrpcMethodMatch {
                        service: Some("a.B".into()),
                        method: Some("C".into()),
                    }),
                    headers: Vec::new(),
                }],
                filters: vec![
                    Filter::RequestHeaderModifier(HeaderModifierFilter {
                        set: vec![("x".into(), "1".into())],
                        ..Default::default()
                    }),
                    Filter::ResponseHeaderModifier(HeaderModifierFilter::default()),
                ],
            }],
            authorizations: [(
                AuthorizationRef::AuthorizationPolicy("ap".into()),
                ClientAuthorization::allow_all(),
            )]
            .into(),
            created_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(at)),
        }
    }

    fn grpc_route_ref(name: &str) -> RouteRef {
        RouteRef::Resource(GroupKindName {
            group: "gateway.networking.k8s.io".into(),
            kind: "GRPCRoute".into(),
            name: name.into(),
        })
    }

    #[test]
    fn routes_are_ordered_named_and_keep_request_header_filters_only() {
        let routes = [
            (grpc_route_ref("a-new"), grpc_route_at(20)),
            (grpc_route_ref("z-old"), grpc_route_at(10)),
        ]
        .into();
        let sent = to_grpc_routes(&routes, &[]);
        let names: Vec<_> = sent
            .iter()
            .map(
                |r| match r.metadata.as_ref().and_then(|m| m.kind.as_ref()) {
                    Some(metadata::Kind::Resource(res)) => {
                        (res.group.clone(), res.kind.clone(), res.name.clone())
                    }
                    other => panic!("unexpected metadata {other:?}"),
                },
            )
            .collect();
        assert_eq!(
            names,
            [
                (
                    "gateway.networking.k8s.io".into(),
                    "GRPCRoute".into(),
                    "z-old".into()
                ),
                (
                    "gateway.networking.k8s.io".into(),
                    "GRPCRoute".into(),
                    "a-new".into()
                ),
            ]
        );
        let rule = &sent[0].rules[0];
        assert_eq!(rule.filters.len(), 1);
        let rpc = rule.matches[0].rpc.as_ref().expect("rpc match");
        assert_eq!((rpc.service.as_str(), rpc.method.as_str()), ("a.B", "C"));
        assert_eq!(sent[0].authorizations.len(), 1);
    }
}
