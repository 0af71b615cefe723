//! Gateway API HTTPRoutes and GRPCRoutes on the inbound side: those with a
//! `policy.linkerd.io` Server parent attach to it once our controller
//! accepted them, exactly as the policy HTTPRoute does, and
//! AuthorizationPolicies targeting them (group `gateway.networking.k8s.io`)
//! become the route's authorizations ([`crate::k8s::grpc_route`] reads the
//! GRPCRoutes).

use std::collections::BTreeMap;

use k8s_api::gateway;

use super::{Authentications, ClusterInfo, Index, Indexed, PolicyNs, Touched, warn_invalid};
use crate::{
    core::{Authorizations, GroupKindName, RouteRef, grpc_routes::GrpcRoute},
    k8s::{
        authz::PolicyTarget,
        grpc_route::{GATEWAY_GROUP, GrpcRouteBinding},
        routes::RouteBinding,
    },
};

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
