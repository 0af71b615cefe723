//! The admission rules of the `policy.linkerd.io` kinds and of the Gateway
//! API routes (`gateway.networking.k8s.io` HTTPRoute, GRPCRoute, TLSRoute
//! and TCPRoute),
//! served through the shared [`admission`] plumbing; any other kind is
//! admitted with a warning. Every kind is checked with the very
//! conversion the index applies ([`crate::index`]), so an object the
//! webhook admits is never ignored by the index, and the reverse; the
//! admission-only rules are that a Server's `accessPolicy` must parse (the
//! index tolerates a bad one rather than drop the Server) and the rule
//! timeouts of a policy HTTPRoute (`route_timeouts`), which the inbound
//! index does not read.

use admission::{AdmissionRequest, Validate, Verdict};
use k8s_api::{
    gateway,
    policy::{
        AuthorizationPolicy, HTTPRoute, MeshTLSAuthentication, NetworkAuthentication, Server,
        ServerAuthorization,
        http_route::{HttpBackendRef, ParentRef},
    },
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use crate::{
    core::DefaultPolicy,
    index::{
        ClusterInfo, InvalidResource, RouteBinding, ServerSpec, authorization_policy,
        gateway_routes::GrpcRouteBinding, is_server_parent, mesh_tls_authentication,
        network_authentication, outbound::routes as outbound_routes, server_authorization,
    },
};

/// Why an object is refused.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    #[error("could not be parsed: {0}")]
    Parse(#[from] serde_json::Error),
    #[error(transparent)]
    Invalid(#[from] InvalidResource),
    #[error("invalid 'accessPolicy' field: {0}")]
    AccessPolicy(#[from] crate::core::InvalidDefaultPolicy),
    #[error(transparent)]
    Timeouts(#[from] route_timeouts::InvalidTimeouts),
    #[error("is not a kind this webhook validates")]
    UnsupportedKind,
}

/// The policy controller's validating webhook.
#[derive(Clone, Debug)]
pub struct PolicyValidator {
    cluster: ClusterInfo,
}

impl PolicyValidator {
    /// Identities and service accounts resolve with `cluster`'s settings,
    /// exactly as in the index.
    pub fn new(cluster: ClusterInfo) -> Self {
        Self { cluster }
    }

    /// Checks one object of `kind` (a `policy.linkerd.io` kind) in `ns`.
    pub fn check(&self, kind: &str, ns: &str, object: &serde_json::Value) -> Result<(), Rejection> {
        let cluster = &self.cluster;
        match kind {
            "Server" => {
                let srv: Server = parse(object)?;
                if let Some(policy) = &srv.spec.access_policy {
                    policy.parse::<DefaultPolicy>()?;
                }
                ServerSpec::from_resource(&srv, cluster)?;
            }
            "ServerAuthorization" => {
                let saz: ServerAuthorization = parse(object)?;
                server_authorization(&saz.spec, ns, cluster)?;
            }
            "AuthorizationPolicy" => {
                let ap: AuthorizationPolicy = parse(object)?;
                authorization_policy(&ap.spec, ns)?;
            }
            "MeshTLSAuthentication" => {
                let authn: MeshTLSAuthentication = parse(object)?;
                mesh_tls_authentication(&authn.spec, ns, cluster)?;
            }
            "NetworkAuthentication" => {
                let authn: NetworkAuthentication = parse(object)?;
                network_authentication(&authn.spec)?;
            }
            "HTTPRoute" => {
                let route: HTTPRoute = parse(object)?;
                RouteBinding::from_resource(&route, ns)?;
                policies::check_egress_parents(route.spec.parent_refs.as_deref())?;
                route_timeouts::check(&route.spec)?;
                // Routes on Services also go through the outbound conversion.
                if has_service_parent(route.spec.parent_refs.as_deref()) {
                    outbound_routes::http_route(
                        &route.spec,
                        &annotations(&route.metadata),
                        None,
                        ns,
                        CLUSTER_DOMAIN,
                    )?;
                }
            }
            "HTTPLocalRateLimitPolicy" => policies::check_ratelimit(object)?,
            "EgressNetwork" => policies::check_egress_network(object, cluster)?,
            _ => return Err(Rejection::UnsupportedKind),
        }
        Ok(())
    }
}

/// Checks one Gateway API route of `kind` in `ns` with the index's own
/// conversions: the inbound ones when a parent is a Server, the outbound
/// ones always. `Ok(Some(warning))` admits an object that does not even
/// parse, as the original does for the Gateway API kinds (the upstream
/// CRD schema is the authority on their shape), telling the client why.
pub fn check_gateway(
    kind: &str,
    ns: &str,
    object: &serde_json::Value,
) -> Result<Option<String>, Rejection> {
    let backends = |rules: Vec<&Vec<HttpBackendRef>>| {
        outbound_routes::check_backends(rules.into_iter().flatten())
    };
    let unparsed = |error: serde_json::Error| {
        tracing::warn!(%ns, %kind, %error, "admitting a Gateway API route that does not parse");
        Ok(Some(format!(
            "failed to parse {kind} spec; admitting anyway: {error}"
        )))
    };
    match kind {
        "HTTPRoute" => {
            let route = match parse::<gateway::HTTPRoute>(object) {
                Ok(route) => route,
                Err(error) => return unparsed(error),
            };
            if has_server_parent(route.spec.parent_refs.as_deref()) {
                RouteBinding::from_gateway(&route, ns)?;
            }
            policies::check_egress_parents(route.spec.parent_refs.as_deref())?;
            let annotations = annotations(&route.metadata);
            outbound_routes::http_route(&route.spec, &annotations, None, ns, CLUSTER_DOMAIN)?;
            backends(
                route
                    .spec
                    .rules
                    .iter()
                    .flatten()
                    .filter_map(|r| r.backend_refs.as_ref())
                    .collect(),
            )?;
        }
        "GRPCRoute" => {
            let route = match parse::<gateway::GRPCRoute>(object) {
                Ok(route) => route,
                Err(error) => return unparsed(error),
            };
            if has_server_parent(route.spec.parent_refs.as_deref()) {
                GrpcRouteBinding::from_resource(&route, ns)?;
            }
            policies::check_egress_parents(route.spec.parent_refs.as_deref())?;
            let annotations = annotations(&route.metadata);
            outbound_routes::grpc_route(&route.spec, &annotations, None, ns, CLUSTER_DOMAIN)?;
            backends(
                route
                    .spec
                    .rules
                    .iter()
                    .flatten()
                    .filter_map(|r| r.backend_refs.as_ref())
                    .collect(),
            )?;
        }
        "TLSRoute" | "TCPRoute" => {
            let parsed = if kind == "TLSRoute" {
                parse::<gateway::TLSRoute>(object).map(|r| (r.spec.parent_refs, r.spec.rules))
            } else {
                parse::<gateway::TCPRoute>(object).map(|r| (r.spec.parent_refs, r.spec.rules))
            };
            let (parents, rules) = match parsed {
                Ok(parsed) => parsed,
                Err(error) => return unparsed(error),
            };
            policies::check_egress_parents(parents.as_deref())?;
            outbound_routes::l4_route(kind, rules.as_deref(), ns, CLUSTER_DOMAIN)?;
            backends(
                rules
                    .iter()
                    .flatten()
                    .filter_map(|r| r.backend_refs.as_ref())
                    .collect(),
            )?;
        }
        _ => return Err(Rejection::UnsupportedKind),
    }
    Ok(None)
}

/// Conversions need a cluster domain for backend paths; admission only
/// looks at whether they succeed.
const CLUSTER_DOMAIN: &str = "cluster.local";

fn has_server_parent(parents: Option<&[ParentRef]>) -> bool {
    parents.into_iter().flatten().any(is_server_parent)
}

/// Whether a route has an outbound parent (a Service or an EgressNetwork).
fn has_service_parent(parents: Option<&[ParentRef]>) -> bool {
    parents.into_iter().flatten().any(|p| {
        outbound_routes::is_service_ref(p.group.as_deref(), p.kind.as_deref())
            || crate::index::outbound::egress::is_egress_network_ref(
                p.group.as_deref(),
                p.kind.as_deref(),
            )
    })
}

fn annotations(meta: &ObjectMeta) -> std::collections::BTreeMap<String, String> {
    meta.annotations.clone().unwrap_or_default()
}

fn parse<K: DeserializeOwned>(object: &serde_json::Value) -> Result<K, serde_json::Error> {
    K::deserialize(object)
}

impl Validate for PolicyValidator {
    fn validate(&self, request: &AdmissionRequest) -> Result<(), String> {
        self.review(request).result
    }

    /// Kinds this webhook does not handle are admitted with a warning
    /// (`unsupported resource type: <group>.<version>.<kind>`, the
    /// original's words), never denied: beside Linkerd's own webhook
    /// configuration, a kind Meridian does not know yet must still apply.
    fn review(&self, request: &AdmissionRequest) -> Verdict {
        let allow = |warnings| Verdict {
            result: Ok(()),
            warnings,
        };
        // DELETE and CONNECT carry no object: nothing to check.
        let Some(object) = &request.object else {
            return allow(Vec::new());
        };
        let kind = &request.kind.kind;
        let ns = request
            .namespace
            .as_deref()
            .or_else(|| {
                object
                    .pointer("/metadata/namespace")
                    .and_then(|v| v.as_str())
            })
            .unwrap_or_default();
        let name = request
            .name
            .as_deref()
            .or_else(|| object.pointer("/metadata/name").and_then(|v| v.as_str()))
            .or_else(|| {
                object
                    .pointer("/metadata/generateName")
                    .and_then(|v| v.as_str())
            })
            .unwrap_or_default();
        let verdict = if request.kind.group == k8s_api::policy::GROUP {
            self.check(kind, ns, object).map(|()| None)
        } else if request.kind.group == gateway::GROUP {
            check_gateway(kind, ns, object)
        } else {
            Err(Rejection::UnsupportedKind)
        };
        match verdict {
            Ok(warning) => allow(warning.into_iter().collect()),
            Err(Rejection::UnsupportedKind) => {
                let k = &request.kind;
                let warning = format!(
                    "unsupported resource type: {}.{}.{}",
                    k.group, k.version, k.kind
                );
                tracing::info!(%ns, %name, %warning, "admitting a kind this webhook does not validate");
                allow(vec![warning])
            }
            Err(rejection) => Verdict {
                result: Err(format!("{kind} \"{ns}/{name}\" {}", message(&rejection))),
                warnings: Vec::new(),
            },
        }
    }
}

/// `is invalid: <what>` for rule violations, the rejection itself otherwise.
fn message(rejection: &Rejection) -> String {
    match rejection {
        Rejection::Invalid(_) | Rejection::AccessPolicy(_) | Rejection::Timeouts(_) => {
            format!("is invalid: {rejection}")
        }
        Rejection::Parse(_) | Rejection::UnsupportedKind => rejection.to_string(),
    }
}

mod policies;
mod route_timeouts;
#[cfg(test)]
mod tests;
