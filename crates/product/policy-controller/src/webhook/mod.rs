//! The admission rules of the `policy.linkerd.io` kinds and of the Gateway
//! API routes (`gateway.networking.k8s.io` HTTPRoute, GRPCRoute, TLSRoute
//! and TCPRoute), served through the shared [`admission`] plumbing: what
//! the original's webhook (Linkerd 2.20) admits and refuses, kind by kind.
//! Any other kind is refused with the original's `unsupported resource
//! type: <group>.<version>.<kind>`.
//!
//! The policy kinds are checked with the index's own conversions, less the
//! rules the original applies in its index only (a ServerAuthorization or
//! MeshTLSAuthentication that authorizes no client is admitted). Routes
//! are checked by `route_rules` for exactly what the original checks
//! (matches, header modifiers, redirects, backend and parent ports,
//! annotations, a policy HTTPRoute's timeouts): a route the Gateway API
//! allows but Meridian cannot serve (a `RequestMirror` filter, a Server
//! parent with a port, …) is admitted, and the status writer says why in
//! its `Accepted` condition. A Gateway API route that does not even parse
//! is admitted (logged), as the original does: the upstream CRD schema is
//! the authority on its shape.

use admission::{AdmissionRequest, Validate, Verdict};
use k8s_api::{
    gateway,
    policy::{
        AuthorizationPolicy, HTTPRoute, MeshTLSAuthentication, NetworkAuthentication, Server,
        ServerAuthorization,
    },
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use self::route_rules::Problem;
use crate::{
    core::{ClusterInfo, DefaultPolicy},
    k8s::{
        InvalidResource,
        authz::{
            authorization_policy, mesh_tls_authentication, network_authentication,
            server_authorization,
        },
        server::ServerSpec,
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
    #[error("{}", route_problem(.0))]
    Route(Problem),
    #[error("is not a kind this webhook validates")]
    UnsupportedKind,
}

impl From<Problem> for Rejection {
    fn from(p: Problem) -> Self {
        Self::Route(p)
    }
}

fn route_problem(p: &Problem) -> String {
    match p {
        Problem::Unparsed(what) => format!("could not be parsed: {what}"),
        Problem::Invalid(what) => what.clone(),
    }
}

/// The rule the original applies in its index only: a ServerAuthorization
/// or MeshTLSAuthentication that authorizes no client is admitted (and
/// ignored by the index). The conversions check it last.
fn admit_no_clients<T>(converted: Result<T, InvalidResource>) -> Result<(), InvalidResource> {
    match converted {
        Ok(_) | Err(InvalidResource::NoClients) => Ok(()),
        Err(e) => Err(e),
    }
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

    /// Checks one object of `kind` (a `policy.linkerd.io` kind, compared
    /// case-insensitively as the original does) in `ns`.
    pub fn check(&self, kind: &str, ns: &str, object: &serde_json::Value) -> Result<(), Rejection> {
        let cluster = &self.cluster;
        let is = |k: &str| kind.eq_ignore_ascii_case(k);
        if is("Server") {
            let srv: Server = parse(object)?;
            if let Some(policy) = &srv.spec.access_policy {
                policy.parse::<DefaultPolicy>()?;
            }
            ServerSpec::from_resource(&srv, cluster)?;
        } else if is("ServerAuthorization") {
            let saz: ServerAuthorization = parse(object)?;
            admit_no_clients(server_authorization(&saz.spec, ns, cluster))?;
        } else if is("AuthorizationPolicy") {
            let ap: AuthorizationPolicy = parse(object)?;
            authorization_policy(&ap.spec, ns)?;
        } else if is("MeshTLSAuthentication") {
            let authn: MeshTLSAuthentication = parse(object)?;
            admit_no_clients(mesh_tls_authentication(&authn.spec, ns, cluster))?;
        } else if is("NetworkAuthentication") {
            let authn: NetworkAuthentication = parse(object)?;
            network_authentication(&authn.spec)?;
        } else if is("HTTPRoute") {
            let route: HTTPRoute = parse(object)?;
            let parents = route.spec.parent_refs.as_deref();
            route_rules::parents(parents)?;
            route_rules::annotations(parents, &annotations(&route.metadata), false)?;
            route_rules::policy_http_rules(route.spec.rules.as_deref())?;
            route_timeouts::check(&route.spec)?;
        } else if is("HTTPLocalRateLimitPolicy") {
            policies::check_ratelimit(object)?;
        } else if is("EgressNetwork") {
            policies::check_egress_network(object, cluster)?;
        } else {
            return Err(Rejection::UnsupportedKind);
        }
        Ok(())
    }
}

/// Checks one Gateway API route of `kind` in `ns` for what the original
/// checks (`route_rules`). A route that does not parse (as the
/// original's types read it) is admitted: `Ok(false)`, logged.
pub fn check_gateway(kind: &str, ns: &str, object: &serde_json::Value) -> Result<bool, Rejection> {
    let is = |k: &str| kind.eq_ignore_ascii_case(k);
    let checked = if is("HTTPRoute") {
        parse::<gateway::HTTPRoute>(object).map(|route| {
            let parents = route.spec.parent_refs.as_deref();
            route_rules::parents(parents)
                .and_then(|()| {
                    route_rules::annotations(parents, &annotations(&route.metadata), false)
                })
                .and_then(|()| route_rules::gateway_http_rules(route.spec.rules.as_deref()))
        })
    } else if is("GRPCRoute") {
        parse::<gateway::GRPCRoute>(object).map(|route| {
            let parents = route.spec.parent_refs.as_deref();
            route_rules::parents(parents)
                .and_then(|()| {
                    route_rules::annotations(parents, &annotations(&route.metadata), true)
                })
                .and_then(|()| route_rules::grpc_rules(route.spec.rules.as_deref()))
        })
    } else if is("TLSRoute") {
        parse::<gateway::TLSRoute>(object).map(|route| {
            route_rules::parents(route.spec.parent_refs.as_deref())
                .and_then(|()| route_rules::l4_rules("TLSRoute", route.spec.rules.as_deref()))
        })
    } else if is("TCPRoute") {
        parse::<gateway::TCPRoute>(object).map(|route| {
            route_rules::parents(route.spec.parent_refs.as_deref())
                .and_then(|()| route_rules::l4_rules("TCPRoute", route.spec.rules.as_deref()))
        })
    } else {
        return Err(Rejection::UnsupportedKind);
    };
    match checked {
        Ok(Ok(())) => Ok(true),
        Ok(Err(Problem::Invalid(what))) => Err(Rejection::Route(Problem::Invalid(what))),
        Ok(Err(Problem::Unparsed(error))) => {
            tracing::warn!(%ns, %kind, %error, "failed to parse a Gateway API route; admitting anyway");
            Ok(false)
        }
        Err(error) => {
            tracing::warn!(%ns, %kind, %error, "failed to parse a Gateway API route; admitting anyway");
            Ok(false)
        }
    }
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

    /// Kinds this webhook does not handle are refused with the original's
    /// message (`unsupported resource type: <group>.<version>.<kind>`),
    /// groups compared case-insensitively as the original does.
    fn review(&self, request: &AdmissionRequest) -> Verdict {
        let answer = |result| Verdict {
            result,
            warnings: Vec::new(),
        };
        // DELETE and CONNECT carry no object: nothing to check.
        let Some(object) = &request.object else {
            return answer(Ok(()));
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
        let group = &request.kind.group;
        let verdict = if group.eq_ignore_ascii_case(k8s_api::policy::GROUP) {
            self.check(kind, ns, object)
        } else if group.eq_ignore_ascii_case(gateway::GROUP) {
            check_gateway(kind, ns, object).map(drop)
        } else {
            Err(Rejection::UnsupportedKind)
        };
        match verdict {
            Ok(()) => answer(Ok(())),
            Err(Rejection::UnsupportedKind) => {
                let k = &request.kind;
                let message = format!(
                    "unsupported resource type: {}.{}.{}",
                    k.group, k.version, k.kind
                );
                tracing::info!(%ns, %name, %message, "denied");
                answer(Err(message))
            }
            Err(rejection) => {
                let message = format!("{kind} \"{ns}/{name}\" {}", message(&rejection));
                tracing::info!(%message, "denied");
                answer(Err(message))
            }
        }
    }
}

/// `is invalid: <what>` for rule violations, the rejection itself otherwise.
fn message(rejection: &Rejection) -> String {
    match rejection {
        Rejection::Invalid(_)
        | Rejection::AccessPolicy(_)
        | Rejection::Timeouts(_)
        | Rejection::Route(Problem::Invalid(_)) => format!("is invalid: {rejection}"),
        Rejection::Parse(_)
        | Rejection::Route(Problem::Unparsed(_))
        | Rejection::UnsupportedKind => rejection.to_string(),
    }
}

mod policies;
mod route_rules;
mod route_timeouts;
#[cfg(test)]
mod tests;
