//! Conversion of inbound gRPC routes (GRPCRoutes attached to a Server) into
//! the proxy API's `inbound.GrpcRoute`: oldest first, `Resource` metadata,
//! matches as on the outbound side, and only request header modifiers as
//! filters (the original drops the others on inbound gRPC routes).

use std::collections::BTreeMap;

use ipnet::IpNet;
use linkerd2_proxy_api::inbound as proto;

use super::{
    convert::{host_match, request_header_modifier, route_metadata, to_authzs},
    outbound_convert::grpc_match,
};
use crate::core::{
    RouteRef,
    grpc_routes::{GrpcRoute, ordered},
    routes::Filter,
};

/// The routes in publishing order.
pub fn to_grpc_routes(
    routes: &BTreeMap<RouteRef, GrpcRoute>,
    cluster_networks: &[IpNet],
) -> Vec<proto::GrpcRoute> {
    ordered(routes)
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
                    filters: rule.filters.iter().filter_map(filter).collect(),
                })
                .collect(),
        })
        .collect()
}

fn filter(f: &Filter) -> Option<proto::grpc_route::Filter> {
    use proto::grpc_route::filter::Kind;
    match f {
        Filter::RequestHeaderModifier(m) => Some(proto::grpc_route::Filter {
            kind: Some(Kind::RequestHeaderModifier(request_header_modifier(m))),
        }),
        Filter::ResponseHeaderModifier(_) | Filter::RequestRedirect(_) => None,
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

    fn route(at: u64) -> GrpcRoute {
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

    fn gkn(name: &str) -> RouteRef {
        RouteRef::Resource(GroupKindName {
            group: "gateway.networking.k8s.io".into(),
            kind: "GRPCRoute".into(),
            name: name.into(),
        })
    }

    #[test]
    fn routes_are_ordered_named_and_keep_request_header_filters_only() {
        let routes = [(gkn("a-new"), route(20)), (gkn("z-old"), route(10))].into();
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
