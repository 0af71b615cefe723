//! Gateway API HTTPRoutes and GRPCRoutes on the inbound side: those with a
//! `policy.linkerd.io` Server parent attach to it once our controller
//! accepted them, exactly as the policy HTTPRoute does, and
//! AuthorizationPolicies targeting them (group `gateway.networking.k8s.io`)
//! become the route's authorizations. [`grpc_route`] is public so that the
//! status writer can say why the index ignores a route.

use std::{collections::BTreeMap, collections::BTreeSet, time::SystemTime};

use k8s_api::gateway::{self, GrpcRouteSpec};

use super::{
    Authentications, ClusterInfo, Index, Indexed, InvalidResource, PolicyNs, PolicyTarget,
    RouteBinding, Touched,
    outbound::routes::{grpc_filter, grpc_match},
    routes::{accepted_servers, created_at, server_parents},
    warn_invalid,
};
use crate::core::{
    Authorizations, GroupKindName, RouteRef,
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

    fn attached_to(&self, name: &str) -> bool {
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

// === impl PolicyNs ===

impl PolicyNs {
    /// The AuthorizationPolicies that target route `gkn` (group and kind
    /// compared case-insensitively), resolved.
    pub(super) fn route_authorizations(
        &self,
        gkn: &GroupKindName,
        authns: &Authentications,
        cluster: &ClusterInfo,
    ) -> Authorizations {
        let targeted = self.authorization_policies.iter().filter(|(_, p)| {
            matches!(&p.target, PolicyTarget::Route(t)
                if t.group.eq_ignore_ascii_case(&gkn.group)
                    && t.kind.eq_ignore_ascii_case(&gkn.kind)
                    && t.name == gkn.name)
        });
        let mut authzs = Authorizations::new();
        self.insert_policies(&mut authzs, targeted, authns, cluster);
        authzs
    }

    /// The GRPCRoutes attached to Server `name` (empty: the proxy API's
    /// default gRPC route is sent).
    pub(super) fn grpc_routes(
        &self,
        name: &str,
        authns: &Authentications,
        cluster: &ClusterInfo,
    ) -> BTreeMap<RouteRef, GrpcRoute> {
        self.grpc_routes
            .iter()
            .filter(|(_, binding)| binding.attached_to(name))
            .map(|(route_name, binding)| {
                let gkn = GroupKindName {
                    group: GATEWAY_GROUP.to_string(),
                    kind: gateway::GRPCRoute::KIND.to_string(),
                    name: route_name.clone(),
                };
                let mut route = binding.route.clone();
                route
                    .authorizations
                    .extend(self.route_authorizations(&gkn, authns, cluster));
                (RouteRef::Resource(gkn), route)
            })
            .collect()
    }
}

// === impl Indexed ===

impl Indexed for gateway::HTTPRoute {
    fn upsert(index: &mut Index, ns: &str, name: String, route: Self) -> Touched {
        let binding = RouteBinding::from_gateway(&route, ns)
            .map_err(|e| warn_invalid("HTTPRoute.gateway.networking.k8s.io", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, binding, |p| &mut p.gateway_http_routes)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<RouteBinding>, |p| {
            &mut p.gateway_http_routes
        })
    }
}

impl Indexed for gateway::GRPCRoute {
    fn upsert(index: &mut Index, ns: &str, name: String, route: Self) -> Touched {
        let binding = GrpcRouteBinding::from_resource(&route, ns)
            .map_err(|e| warn_invalid("GRPCRoute", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, binding, |p| &mut p.grpc_routes)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<GrpcRouteBinding>, |p| &mut p.grpc_routes)
    }
}

#[cfg(test)]
mod tests;
