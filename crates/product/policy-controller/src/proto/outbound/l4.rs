//! TLSRoutes and TCPRoutes in the proxy API: opaque routes (only the
//! oldest TCP route: nothing selects among them) and TLS routes by SNI,
//! their backends balanced with the plain estimator.

use linkerd2_proxy_api::{
    opaque_route,
    outbound::{self as proto, proxy_protocol},
};

use super::{
    Resolved, balancer, egress_backend, failing_backend, peak_ewma, resolve, route_meta,
    service_meta,
};
use crate::core::{
    outbound::{Backend, L4Route, OutboundPolicy, RouteId, ordered},
    routes::HostMatch,
};

/// TCP routes cannot select among themselves: the oldest one is sent.
pub(super) fn tcp(
    policy: &OutboundPolicy,
    default_backend: &proto::Backend,
) -> proxy_protocol::Kind {
    proxy_protocol::Kind::Opaque(proxy_protocol::Opaque {
        routes: ordered(&policy.tcp_routes)
            .into_iter()
            .take(1)
            .map(|(id, r)| tcp_route(id, r, default_backend))
            .collect(),
    })
}

/// L4 backends balance with the plain estimator; a failing one carries an
/// `Invalid` filter.
fn l4_backend(b: &Backend) -> (u32, proto::Backend, Option<String>) {
    let (weight, resolved) = resolve(b);
    match resolved {
        Resolved::Usable(svc) => (
            weight,
            balancer(
                service_meta(&svc.namespace, &svc.name, svc.port.get()),
                &svc.authority,
                peak_ewma(),
            ),
            None,
        ),
        Resolved::Forward(net, addr) => (weight, egress_backend(net, addr), None),
        Resolved::Failing { meta, message } => (weight, failing_backend(meta), Some(message)),
    }
}

/// An L4 route's backends (each with an `Invalid` filter if it cannot be
/// used), or the default backend when it has none, in the types of the
/// proxy API's `opaque_route` or `tls_route` (one shape in two sets).
macro_rules! l4_distribution {
    ($m:ident, $route:expr, $default_backend:expr) => {{
        use proto::$m::{
            Distribution, Filter, RouteBackend, WeightedRouteBackend, distribution, filter,
        };
        let backends: Vec<_> = $route
            .rules
            .iter()
            .flat_map(|r| &r.backends)
            .map(|b| {
                let (weight, backend, invalid) = l4_backend(b);
                WeightedRouteBackend {
                    weight,
                    backend: Some(RouteBackend {
                        backend: Some(backend),
                        filters: invalid
                            .map(|message| Filter {
                                kind: Some(filter::Kind::Invalid(opaque_route::Invalid {
                                    message,
                                })),
                            })
                            .into_iter()
                            .collect(),
                    }),
                }
            })
            .collect();
        let kind = if backends.is_empty() {
            distribution::Kind::FirstAvailable(distribution::FirstAvailable {
                backends: vec![RouteBackend {
                    backend: Some($default_backend.clone()),
                    filters: Vec::new(),
                }],
            })
        } else {
            distribution::Kind::RandomAvailable(distribution::RandomAvailable { backends })
        };
        Distribution { kind: Some(kind) }
    }};
}

fn tcp_route(
    id: &RouteId,
    route: &L4Route,
    default_backend: &proto::Backend,
) -> proto::OpaqueRoute {
    proto::OpaqueRoute {
        metadata: route_meta(id),
        rules: vec![proto::opaque_route::Rule {
            backends: Some(l4_distribution!(opaque_route, route, default_backend)),
            filters: Vec::new(),
        }],
    }
}

pub(super) fn tls_route(
    id: &RouteId,
    route: &L4Route,
    default_backend: &proto::Backend,
) -> proto::TlsRoute {
    use linkerd2_proxy_api::tls_route::{SniMatch, sni_match};
    let snis = route
        .hostnames
        .iter()
        .map(|h| SniMatch {
            r#match: Some(match h {
                HostMatch::Exact(host) => sni_match::Match::Exact(host.clone()),
                HostMatch::Suffix { reverse_labels } => {
                    sni_match::Match::Suffix(sni_match::Suffix {
                        reverse_labels: reverse_labels.clone(),
                    })
                }
            }),
        })
        .collect();
    proto::TlsRoute {
        metadata: route_meta(id),
        snis,
        rules: vec![proto::tls_route::Rule {
            backends: Some(l4_distribution!(tls_route, route, default_backend)),
            filters: Vec::new(),
        }],
    }
}
