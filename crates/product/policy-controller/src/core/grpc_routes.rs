//! Inbound gRPC routes (from Gateway API GRPCRoutes attached to a Server):
//! service/method and header matches, the filters a proxy applies to
//! matching requests, and the route's own authorizations. The matches are
//! the outbound model's ([`super::outbound::GrpcRouteMatch`]).

use std::{collections::BTreeMap, time::SystemTime};

use super::{
    Authorizations,
    outbound::GrpcRouteMatch,
    routes::{Filter, HostMatch, RouteRef},
};

/// An inbound gRPC route.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GrpcRoute {
    pub hostnames: Vec<HostMatch>,
    pub rules: Vec<GrpcRouteRule>,
    /// Authorizations of requests matching this route, beside the server's.
    pub authorizations: Authorizations,
    /// When the resource was created.
    pub created_at: Option<SystemTime>,
}

/// Matches and filters of one rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GrpcRouteRule {
    pub matches: Vec<GrpcRouteMatch>,
    pub filters: Vec<Filter>,
}

/// Routes in publishing order: oldest first, then by reference (as HTTP
/// routes are ordered).
pub fn ordered(routes: &BTreeMap<RouteRef, GrpcRoute>) -> Vec<(&RouteRef, &GrpcRoute)> {
    let mut list: Vec<_> = routes.iter().collect();
    list.sort_by(|(a_ref, a), (b_ref, b)| {
        super::routes::by_creation(a.created_at, b.created_at).then_with(|| a_ref.cmp(b_ref))
    });
    list
}
