//! GRPCRoutes on the inbound side, as the index keeps them: the Servers
//! they name, those that accepted them, and the route (method and header
//! matches, header-modifier filters; Gateway HTTPRoutes share the policy
//! HTTPRoute's conversion, [`super::routes`]). [`grpc_route`] is public so
//! that the status writer can say why the index ignores a route.

use std::{collections::BTreeSet, time::SystemTime};

use k8s_api::gateway::{self, GrpcRouteSpec};

use super::{
    InvalidResource,
    outbound::routes::{grpc_filter, grpc_match},
    routes::{accepted_servers, created_at, server_parents},
};
use crate::core::{
    Authorizations,
    grpc_routes::{GrpcRoute, GrpcRouteRule},
    routes::host_match,
};

/// The API group of the Gateway API kinds.
pub const GATEWAY_GROUP: &str = gateway::GROUP;

/// A GRPCRoute with the Servers it names and those that accepted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcRouteBinding {
    pub parents: BTreeSet<String>,
    pub accepted: BTreeSet<String>,
    pub route: GrpcRoute,
}

impl GrpcRouteBinding {
    /// Converts a GRPCRoute in namespace `ns`.
    pub fn from_resource(route: &gateway::GRPCRoute, ns: &str) -> Result<Self, InvalidResource> {
        Ok(Self {
            parents: server_parents(route.spec.parent_refs.iter().flatten(), ns)?,
            accepted: accepted_servers(route.status.as_ref()),
            route: grpc_route(&route.spec, created_at(&route.metadata))?,
        })
    }

    pub fn attached_to(&self, name: &str) -> bool {
        self.parents.contains(name) && self.accepted.contains(name)
    }
}

/// Converts a GRPCRoute spec for the inbound side: method and header
/// matches (no `RegularExpression` method match) and header-modifier
/// filters; anything else makes the whole route invalid.
pub fn grpc_route(
    spec: &GrpcRouteSpec,
    created_at: Option<SystemTime>,
) -> Result<GrpcRoute, InvalidResource> {
    let rules = spec
        .rules
        .iter()
        .flatten()
        .map(|rule| {
            Ok(GrpcRouteRule {
                matches: rule
                    .matches
                    .iter()
                    .flatten()
                    .map(grpc_match)
                    .collect::<Result<_, _>>()?,
                filters: rule
                    .filters
                    .iter()
                    .flatten()
                    .map(grpc_filter)
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect::<Result<_, InvalidResource>>()?;
    Ok(GrpcRoute {
        hostnames: spec
            .hostnames
            .iter()
            .flatten()
            .map(|h| host_match(h))
            .collect(),
        rules,
        authorizations: Authorizations::new(),
        created_at,
    })
}
