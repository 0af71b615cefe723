//! Route resources as the outbound index uses them: the Service and
//! EgressNetwork parents they name, which of those our status writer
//! accepted, and the route
//! itself (matches and filters through the same conversions as inbound
//! routes, plus backends, timeouts and retries). Policy HTTPRoutes,
//! Gateway HTTPRoutes and GRPCRoutes are all converted here; the
//! conversions are public so the status writer can say why the index
//! ignores a route (admission checks only what the original checks).

use std::{collections::BTreeSet, num::NonZeroU16, time::Duration, time::SystemTime};

use k8s_api::{
    gateway::{self, GrpcRouteRule, GrpcRouteSpec},
    policy::{
        self,
        http_route::{
            HttpBackendRef, HttpRouteFilter, HttpRouteRule, HttpRouteSpec, HttpRouteStatus,
            POLICY_CONTROLLER_NAME, ParentRef,
        },
    },
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    annotations::{self, Annotations},
    egress::is_egress_network_ref,
};
use crate::{
    core::{
        outbound::{
            Backend, GrpcMethodMatch, GrpcRoute, GrpcRouteMatch, HttpRoute, L4Route, OutboundRoute,
            OutboundRule, RouteId, RouteRetry, RouteTimeouts, WeightedEgressNetwork,
            WeightedService, service_authority,
        },
        routes::{Filter, host_match},
    },
    k8s::{
        InvalidResource,
        routes::{filter, header_match, invalid, route_match},
    },
};

/// A Service (port) a route attaches to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceParent {
    pub namespace: String,
    pub name: String,
    /// `None`: every port of the Service.
    pub port: Option<NonZeroU16>,
}

/// A converted route of either protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyRoute {
    Http(HttpRoute),
    Grpc(GrpcRoute),
    Tls(L4Route),
    Tcp(L4Route),
}

/// A route with its Service and EgressNetwork parents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundBinding {
    /// Service parents from `parentRefs` that our controller accepted.
    pub parents: BTreeSet<ServiceParent>,
    /// EgressNetwork parents (namespace, name, port) that our controller
    /// accepted.
    pub egress_parents: BTreeSet<ServiceParent>,
    pub route: AnyRoute,
}

/// Whether a parent (or backend) reference names a core Service.
pub fn is_service_ref(group: Option<&str>, kind: Option<&str>) -> bool {
    group.is_none_or(|g| g.is_empty() || g.eq_ignore_ascii_case("core"))
        && kind.is_some_and(|k| k.eq_ignore_ascii_case("Service"))
}

/// The Service parents a route names.
pub fn service_parents<'a>(
    parents: impl IntoIterator<Item = &'a ParentRef>,
    route_ns: &str,
) -> BTreeSet<ServiceParent> {
    parents_of_kind(parents, route_ns, is_service_ref)
}

/// The EgressNetwork parents a route names.
pub fn egress_parents<'a>(
    parents: impl IntoIterator<Item = &'a ParentRef>,
    route_ns: &str,
) -> BTreeSet<ServiceParent> {
    parents_of_kind(parents, route_ns, is_egress_network_ref)
}

fn parents_of_kind<'a>(
    parents: impl IntoIterator<Item = &'a ParentRef>,
    route_ns: &str,
    is_kind: fn(Option<&str>, Option<&str>) -> bool,
) -> BTreeSet<ServiceParent> {
    parents
        .into_iter()
        .filter(|p| is_kind(p.group.as_deref(), p.kind.as_deref()))
        .map(|p| ServiceParent {
            namespace: p.namespace.clone().unwrap_or_else(|| route_ns.to_string()),
            name: p.name.clone(),
            port: p.port.and_then(NonZeroU16::new),
        })
        .collect()
}

/// The parents of one kind a status says our controller accepted.
fn accepted_parents(
    status: Option<&HttpRouteStatus>,
    route_ns: &str,
    is_kind: fn(Option<&str>, Option<&str>) -> bool,
) -> BTreeSet<ServiceParent> {
    let accepted = status
        .iter()
        .flat_map(|s| &s.parents)
        .filter(|p| p.controller_name == POLICY_CONTROLLER_NAME)
        .filter(|p| {
            p.conditions
                .iter()
                .any(|c| c.type_ == k8s_api::conditions::ACCEPTED && c.status == "True")
        })
        .map(|p| &p.parent_ref);
    parents_of_kind(accepted, route_ns, is_kind)
}

/// The parents of one kind in `spec_parents` that the status accepted.
fn attached_of_kind(
    spec_parents: Option<&Vec<ParentRef>>,
    status: Option<&HttpRouteStatus>,
    ns: &str,
    is_kind: fn(Option<&str>, Option<&str>) -> bool,
) -> BTreeSet<ServiceParent> {
    let accepted = accepted_parents(status, ns, is_kind);
    parents_of_kind(spec_parents.into_iter().flatten(), ns, is_kind)
        .into_iter()
        .filter(|p| {
            accepted.iter().any(|a| {
                a.namespace == p.namespace
                    && a.name == p.name
                    && (a.port.is_none() || a.port == p.port)
            })
        })
        .collect()
}

fn created_at(meta: &ObjectMeta) -> Option<SystemTime> {
    meta.creation_timestamp
        .as_ref()
        .map(|t| SystemTime::from(t.0))
}

fn object_annotations(meta: &ObjectMeta) -> Annotations {
    meta.annotations.clone().unwrap_or_default()
}

/// The identity of a route resource.
pub fn route_id(group: &str, kind: &str, meta: &ObjectMeta) -> RouteId {
    RouteId {
        group: group.to_string(),
        kind: kind.to_string(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// What a binding reads of every route kind: its metadata, spec, the
/// parents the spec names and its status (one status type for all kinds).
pub trait RouteObject {
    type Spec;
    fn meta(&self) -> &ObjectMeta;
    fn spec(&self) -> &Self::Spec;
    fn parent_refs(&self) -> Option<&Vec<ParentRef>>;
    fn status(&self) -> Option<&HttpRouteStatus>;
}

macro_rules! route_object {
    ($($kind:ty => $spec:ty),* $(,)?) => {$(
        impl RouteObject for $kind {
            type Spec = $spec;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn parent_refs(&self) -> Option<&Vec<ParentRef>> {
                self.spec.parent_refs.as_ref()
            }
            fn status(&self) -> Option<&HttpRouteStatus> {
                self.status.as_ref()
            }
        }
    )*};
}

route_object!(
    policy::HTTPRoute => HttpRouteSpec,
    gateway::HTTPRoute => HttpRouteSpec,
    gateway::GRPCRoute => GrpcRouteSpec,
    gateway::TLSRoute => gateway::TlsRouteSpec,
    gateway::TCPRoute => gateway::TcpRouteSpec,
);

/// A route spec the outbound index serves, converted with its route's
/// annotations, creation time and namespace.
pub trait OutboundSpec {
    fn convert(
        &self,
        annotations: &Annotations,
        created_at: Option<SystemTime>,
        ns: &str,
        cluster_domain: &str,
    ) -> Result<AnyRoute, InvalidResource>;
}

/// HTTPRoutes (policy and Gateway API share the spec) and GRPCRoutes: rules
/// with matches, filters, backends, timeouts and retries.
macro_rules! rules_spec {
    ($($spec:ty => $convert:ident, $kind:ident;)*) => {$(
        impl OutboundSpec for $spec {
            fn convert(
                &self,
                annotations: &Annotations,
                created_at: Option<SystemTime>,
                ns: &str,
                cluster_domain: &str,
            ) -> Result<AnyRoute, InvalidResource> {
                $convert(self, annotations, created_at, ns, cluster_domain).map(AnyRoute::$kind)
            }
        }
    )*};
}

rules_spec! {
    HttpRouteSpec => http_route, Http;
    GrpcRouteSpec => grpc_route, Grpc;
}

impl OutboundSpec for gateway::TlsRouteSpec {
    /// One rule, and the SNIs of its hostnames (no annotations).
    fn convert(
        &self,
        _: &Annotations,
        created_at: Option<SystemTime>,
        ns: &str,
        cluster_domain: &str,
    ) -> Result<AnyRoute, InvalidResource> {
        let mut l4 = l4_route("TLSRoute", self.rules.as_deref(), ns, cluster_domain)?;
        l4.hostnames = self
            .hostnames
            .iter()
            .flatten()
            .map(|h| host_match(h))
            .collect();
        l4.created_at = created_at;
        Ok(AnyRoute::Tls(l4))
    }
}

impl OutboundSpec for gateway::TcpRouteSpec {
    /// One rule (no hostnames, no annotations).
    fn convert(
        &self,
        _: &Annotations,
        created_at: Option<SystemTime>,
        ns: &str,
        cluster_domain: &str,
    ) -> Result<AnyRoute, InvalidResource> {
        let mut l4 = l4_route("TCPRoute", self.rules.as_deref(), ns, cluster_domain)?;
        l4.created_at = created_at;
        Ok(AnyRoute::Tcp(l4))
    }
}

/// A route of any kind the outbound index serves, converted and bound to
/// its accepted Service and EgressNetwork parents.
pub fn binding<R: RouteObject<Spec: OutboundSpec>>(
    route: &R,
    cluster_domain: &str,
) -> Result<OutboundBinding, InvalidResource> {
    let meta = route.meta();
    let ns = meta.namespace.as_deref().unwrap_or_default();
    let converted = route.spec().convert(
        &object_annotations(meta),
        created_at(meta),
        ns,
        cluster_domain,
    )?;
    let (spec_parents, status) = (route.parent_refs(), route.status());
    Ok(OutboundBinding {
        parents: attached_of_kind(spec_parents, status, ns, is_service_ref),
        egress_parents: attached_of_kind(spec_parents, status, ns, is_egress_network_ref),
        route: converted,
    })
}

/// A TLSRoute or TCPRoute: exactly one rule (a proxy cannot select
/// between rules without matches).
pub fn l4_route(
    kind: &str,
    rules: Option<&[gateway::L4RouteRule]>,
    ns: &str,
    cluster_domain: &str,
) -> Result<L4Route, InvalidResource> {
    let [rule] = rules.unwrap_or_default() else {
        return Err(invalid(format!("a {kind} needs exactly one rule")));
    };
    let no_filters = |f: &HttpRouteFilter| -> Result<Filter, InvalidResource> {
        Err(invalid(format!("unsupported filter {:?}", f.kind)))
    };
    Ok(OutboundRoute {
        hostnames: Vec::new(),
        rules: vec![OutboundRule {
            matches: Vec::new(),
            backends: rule
                .backend_refs
                .iter()
                .flatten()
                .map(|b| backend(b, ns, cluster_domain, no_filters))
                .collect(),
            retry: None,
            timeouts: RouteTimeouts::default(),
            filters: Vec::new(),
        }],
        created_at: None,
    })
}

fn annotation_error(e: annotations::InvalidAnnotation) -> InvalidResource {
    invalid(e.to_string())
}

/// A rule timeout: a Gateway API (Go-style) duration; zero means none.
fn rule_timeout(value: Option<&str>, field: &str) -> Result<Option<Duration>, InvalidResource> {
    let Some(value) = value else {
        return Ok(None);
    };
    let nanos = k8s_api::go_duration::parse_go_duration(value)
        .map_err(|e| invalid(format!("invalid {field} timeout {value:?}: {e}")))?;
    let nanos = u64::try_from(nanos)
        .map_err(|_| invalid(format!("{field} timeout {value:?} is negative")))?;
    Ok(Some(Duration::from_nanos(nanos)).filter(|d| !d.is_zero()))
}

/// Converts an HTTP route spec in namespace `ns`. Annotation timeouts and
/// retries apply to every rule; a rule's `timeouts.request` is used when
/// the annotation sets no request timeout.
pub fn http_route(
    spec: &HttpRouteSpec,
    annotations: &Annotations,
    created_at: Option<SystemTime>,
    ns: &str,
    cluster_domain: &str,
) -> Result<HttpRoute, InvalidResource> {
    let timeouts = annotations::timeouts(annotations).map_err(annotation_error)?;
    let retry = annotations::http_retry(annotations).map_err(annotation_error)?;
    let rules = spec
        .rules
        .iter()
        .flatten()
        .map(|r| http_rule(r, &timeouts, &retry, ns, cluster_domain))
        .collect::<Result<_, _>>()?;
    Ok(OutboundRoute {
        hostnames: spec
            .hostnames
            .iter()
            .flatten()
            .map(|h| host_match(h))
            .collect(),
        rules,
        created_at,
    })
}

fn http_rule(
    rule: &HttpRouteRule,
    timeouts: &RouteTimeouts,
    retry: &Option<RouteRetry<crate::core::outbound::HttpRetryCondition>>,
    ns: &str,
    cluster_domain: &str,
) -> Result<
    OutboundRule<crate::core::routes::HttpRouteMatch, crate::core::outbound::HttpRetryCondition>,
    InvalidResource,
> {
    let matches = rule
        .matches
        .iter()
        .flatten()
        .map(route_match)
        .collect::<Result<_, _>>()?;
    let filters = rule
        .filters
        .iter()
        .flatten()
        .map(filter)
        .collect::<Result<_, _>>()?;
    let request = rule_timeout(
        rule.timeouts.as_ref().and_then(|t| t.request.as_deref()),
        "request",
    )?;
    let backend_request = rule_timeout(
        rule.timeouts
            .as_ref()
            .and_then(|t| t.backend_request.as_deref()),
        "backendRequest",
    )?;
    if let (Some(request), Some(backend)) = (request, backend_request)
        && backend > request
    {
        let text = |d: Option<&String>| d.cloned().unwrap_or_default();
        let t = rule.timeouts.as_ref();
        return Err(invalid(format!(
            "backendRequest timeout ({}) must not be greater than request timeout ({})",
            text(t.and_then(|t| t.backend_request.as_ref())),
            text(t.and_then(|t| t.request.as_ref())),
        )));
    }
    let mut timeouts = timeouts.clone();
    timeouts.request = timeouts.request.or(request);
    Ok(OutboundRule {
        matches,
        backends: rule
            .backend_refs
            .iter()
            .flatten()
            .map(|b| backend(b, ns, cluster_domain, filter))
            .collect(),
        retry: retry.clone(),
        timeouts,
        filters,
    })
}

/// Converts a GRPCRoute spec in namespace `ns`.
pub fn grpc_route(
    spec: &GrpcRouteSpec,
    annotations: &Annotations,
    created_at: Option<SystemTime>,
    ns: &str,
    cluster_domain: &str,
) -> Result<GrpcRoute, InvalidResource> {
    let timeouts = annotations::timeouts(annotations).map_err(annotation_error)?;
    let retry = annotations::grpc_retry(annotations).map_err(annotation_error)?;
    let rules = spec
        .rules
        .iter()
        .flatten()
        .map(|rule: &GrpcRouteRule| {
            let matches = rule
                .matches
                .iter()
                .flatten()
                .map(grpc_match)
                .collect::<Result<_, _>>()?;
            let filters = rule
                .filters
                .iter()
                .flatten()
                .map(grpc_filter)
                .collect::<Result<_, _>>()?;
            Ok(OutboundRule {
                matches,
                backends: rule
                    .backend_refs
                    .iter()
                    .flatten()
                    .map(|b| backend(b, ns, cluster_domain, grpc_filter))
                    .collect(),
                retry: retry.clone(),
                timeouts: timeouts.clone(),
                filters,
            })
        })
        .collect::<Result<_, InvalidResource>>()?;
    Ok(OutboundRoute {
        hostnames: spec
            .hostnames
            .iter()
            .flatten()
            .map(|h| host_match(h))
            .collect(),
        rules,
        created_at,
    })
}

pub(crate) fn grpc_match(m: &gateway::GrpcRouteMatch) -> Result<GrpcRouteMatch, InvalidResource> {
    let method = m
        .method
        .as_ref()
        .map(|method| match method.kind.as_deref().unwrap_or("Exact") {
            "Exact" => Ok(GrpcMethodMatch {
                service: method.service.clone(),
                method: method.method.clone(),
            }),
            other => Err(invalid(format!(
                "unsupported GRPCRoute method match type {other:?}"
            ))),
        })
        .transpose()?;
    Ok(GrpcRouteMatch {
        method,
        headers: m
            .headers
            .iter()
            .flatten()
            .map(header_match)
            .collect::<Result<_, _>>()?,
    })
}

/// gRPC routes take header modifiers only.
pub(crate) fn grpc_filter(f: &HttpRouteFilter) -> Result<Filter, InvalidResource> {
    match f.kind.as_str() {
        "RequestHeaderModifier" | "ResponseHeaderModifier" => filter(f),
        other => Err(invalid(format!("unsupported filter {other:?}"))),
    }
}

/// A backend reference. Problems with one backend do not invalidate the
/// route: the backend becomes [`Backend::Invalid`], whose requests fail.
fn backend(
    b: &HttpBackendRef,
    ns: &str,
    cluster_domain: &str,
    convert_filter: fn(&HttpRouteFilter) -> Result<Filter, InvalidResource>,
) -> Backend {
    let weight = b.weight.unwrap_or(1);
    if is_egress_network_ref(b.group.as_deref(), b.kind.as_deref()) {
        return match b.filters.iter().flatten().map(convert_filter).collect() {
            Ok(filters) => Backend::EgressNetwork(WeightedEgressNetwork {
                weight,
                namespace: b.namespace.clone().unwrap_or_else(|| ns.to_string()),
                name: b.name.clone(),
                port: b.port.and_then(NonZeroU16::new),
                filters,
                forward: None,
            }),
            Err(error) => Backend::Invalid {
                weight,
                message: format!("unsupported backend filter: {error}"),
            },
        };
    }
    if !is_service_ref(
        b.group.as_deref(),
        Some(b.kind.as_deref().unwrap_or("Service")),
    ) {
        return Backend::Invalid {
            weight,
            message: format!(
                "unsupported backend type {} {}",
                b.group.as_deref().unwrap_or("core"),
                b.kind.as_deref().unwrap_or("<empty>")
            ),
        };
    }
    let filters = match b
        .filters
        .iter()
        .flatten()
        .map(convert_filter)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(filters) => filters,
        Err(error) => {
            return Backend::Invalid {
                weight,
                message: format!("unsupported backend filter: {error}"),
            };
        }
    };
    let Some(port) = b.port.and_then(NonZeroU16::new) else {
        return Backend::Invalid {
            weight,
            message: format!("missing port for backend Service {}", b.name),
        };
    };
    let namespace = b.namespace.clone().unwrap_or_else(|| ns.to_string());
    Backend::Service(WeightedService {
        weight,
        authority: service_authority(&b.name, &namespace, cluster_domain, port),
        namespace,
        name: b.name.clone(),
        port,
        filters,
        exists: false,
    })
}
