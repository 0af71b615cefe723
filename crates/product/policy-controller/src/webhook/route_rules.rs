//! What admission checks in a route, as the original's webhook does
//! (`policy-controller/runtime/src/admission.rs` at Linkerd 2.20), and
//! nothing more: matches, header modifiers, redirects, the timeouts of a
//! policy HTTPRoute, a Gateway API HTTP or gRPC route's Service backends
//! (a port), EgressNetwork parents (a port), the retry and timeout
//! annotations when a parent is a Service or an EgressNetwork, and one
//! rule in a TLSRoute or TCPRoute.
//!
//! Whatever else the Gateway API allows (a `RequestMirror` or `URLRewrite`
//! filter, a Server parent with a port, backend filters, …) is admitted:
//! routes in a cluster may belong to other Gateway implementations.
//! What Meridian cannot serve is reported in the route's status by the
//! status writer (`crate::status`), as the index ignores it.
//!
//! The original reads a spec into typed structs first; a spec those do not
//! accept (an enum value they do not know, a missing required field) is
//! [`Problem::Unparsed`]: refused for a `policy.linkerd.io` HTTPRoute,
//! admitted for the Gateway API kinds.

use k8s_api::{
    gateway::{GrpcRouteMatch, GrpcRouteRule, L4RouteRule},
    policy::http_route::{
        HeaderModifier, HttpBackendRef, HttpHeaderMatch, HttpRouteFilter, HttpRouteMatch,
        HttpRouteRule, ParentRef, RequestRedirect,
    },
};

use crate::k8s::{
    outbound::{
        annotations::{self, Annotations},
        egress::is_egress_network_ref,
        routes::is_service_ref,
    },
    routes::{header_name, header_value, regex},
};

/// Why a route is not admitted as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The original's typed spec would not hold it (for Gateway API kinds
    /// the original admits such a route).
    Unparsed(String),
    /// A rule the original's webhook enforces.
    Invalid(String),
}

pub type Checked = Result<(), Problem>;

fn invalid(what: impl Into<String>) -> Problem {
    Problem::Invalid(what.into())
}

fn unparsed(what: impl Into<String>) -> Problem {
    Problem::Unparsed(what.into())
}

fn invalid_from(e: crate::k8s::InvalidResource) -> Problem {
    Problem::Invalid(e.to_string())
}

/// An EgressNetwork parent must name a port.
pub fn parents(parents: Option<&[ParentRef]>) -> Checked {
    let portless = parents
        .into_iter()
        .flatten()
        .any(|p| is_egress_network_ref(p.group.as_deref(), p.kind.as_deref()) && p.port.is_none());
    if portless {
        return Err(invalid(
            "cannot target an EgressNetwork without specifying a port",
        ));
    }
    Ok(())
}

/// The route's own retry (`retry.linkerd.io/http` or `/grpc`, `/limit`,
/// `/timeout`) and `timeout.linkerd.io/*` annotations, read only when a
/// parent is a Service or an EgressNetwork.
pub fn annotations(
    parents: Option<&[ParentRef]>,
    annotations: &Annotations,
    grpc: bool,
) -> Checked {
    let outbound = parents.into_iter().flatten().any(|p| {
        is_service_ref(p.group.as_deref(), p.kind.as_deref())
            || is_egress_network_ref(p.group.as_deref(), p.kind.as_deref())
    });
    if !outbound {
        return Ok(());
    }
    let retry = if grpc {
        annotations::grpc_retry(annotations).map(|_| ())
    } else {
        annotations::http_retry(annotations).map(|_| ())
    };
    retry
        .and_then(|()| annotations::timeouts(annotations).map(|_| ()))
        .map_err(|e| invalid(e.to_string()))
}

/// The methods of the Gateway API's `HTTPMethod` enum.
const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

fn absolute(path: &str) -> Checked {
    if path.starts_with('/') {
        Ok(())
    } else {
        Err(invalid(format!("path {path:?} is not absolute")))
    }
}

/// An HTTP match: absolute paths, valid regular expressions, header names
/// and values.
pub fn http_match(m: &HttpRouteMatch) -> Checked {
    if let Some(path) = &m.path {
        let value = path.value.as_deref().unwrap_or("/");
        match path.kind.as_deref() {
            None | Some("PathPrefix") | Some("Exact") => absolute(value)?,
            Some("RegularExpression") => regex(value).map(drop).map_err(invalid_from)?,
            Some(other) => return Err(unparsed(format!("unknown path match type {other:?}"))),
        }
    }
    for h in m.headers.iter().flatten() {
        header_match(h)?;
    }
    for q in m.query_params.iter().flatten() {
        match q.kind.as_deref() {
            None | Some("Exact") => {}
            Some("RegularExpression") => regex(&q.value).map(drop).map_err(invalid_from)?,
            Some(other) => {
                return Err(unparsed(format!("unknown query match type {other:?}")));
            }
        }
    }
    if let Some(method) = &m.method
        && !METHODS.contains(&method.as_str())
    {
        return Err(unparsed(format!("unknown method {method:?}")));
    }
    Ok(())
}

fn header_match(h: &HttpHeaderMatch) -> Checked {
    header_name(&h.name).map_err(invalid_from)?;
    match h.kind.as_deref() {
        None | Some("Exact") => header_value(&h.value).map(drop).map_err(invalid_from),
        Some("RegularExpression") => regex(&h.value).map(drop).map_err(invalid_from),
        Some(other) => Err(unparsed(format!("unknown header match type {other:?}"))),
    }
}

fn header_modifier(m: &HeaderModifier) -> Checked {
    for h in m.add.iter().chain(m.set.iter()).flatten() {
        header_name(&h.name).map_err(invalid_from)?;
        header_value(&h.value).map_err(invalid_from)?;
    }
    for name in m.remove.iter().flatten() {
        header_name(name).map_err(invalid_from)?;
    }
    Ok(())
}

/// A redirect: a replacement path, when given, is `replaceFullPath` or
/// else `replacePrefixMatch` (whatever its `type` says, as the original
/// reads it) and absolute; a status code is a valid HTTP status.
fn redirect(r: &RequestRedirect) -> Checked {
    match r.scheme.as_deref() {
        None | Some("http") | Some("https") => {}
        Some(other) => return Err(unparsed(format!("unknown redirect scheme {other:?}"))),
    }
    if let Some(path) = &r.path {
        if !matches!(path.kind.as_str(), "ReplaceFullPath" | "ReplacePrefixMatch") {
            return Err(unparsed(format!(
                "unknown redirect path type {:?}",
                path.kind
            )));
        }
        let (field, value) = match (&path.replace_full_path, &path.replace_prefix_match) {
            (Some(full), _) => ("replaceFullPath", full),
            (None, Some(prefix)) => ("replacePrefixMatch", prefix),
            (None, None) => {
                return Err(invalid(
                    "RequestRedirect filter must contain either replaceFullPath or replacePrefixMatch",
                ));
            }
        };
        if !value.starts_with('/') {
            return Err(invalid(format!(
                "requestRedirect.path.{field} {value:?} is not an absolute path"
            )));
        }
    }
    if let Some(code) = r.status_code
        && http::StatusCode::from_u16(code).is_err()
    {
        return Err(invalid(format!("invalid redirect status {code}")));
    }
    Ok(())
}

/// A Gateway API filter: its header modifiers and redirect, when present,
/// are checked; its type is not (any filter the Gateway API allows is
/// admitted).
fn gateway_filter(f: &HttpRouteFilter) -> Checked {
    if let Some(m) = &f.request_header_modifier {
        header_modifier(m)?;
    }
    if let Some(m) = &f.response_header_modifier {
        header_modifier(m)?;
    }
    if let Some(r) = &f.request_redirect {
        redirect(r)?;
    }
    Ok(())
}

/// A `policy.linkerd.io` HTTPRoute filter: one of the three kinds that
/// CRD defines, with its configuration.
fn policy_filter(f: &HttpRouteFilter) -> Checked {
    let missing = |field: &str| unparsed(format!("missing field `{field}`"));
    match f.kind.as_str() {
        "RequestHeaderModifier" => f
            .request_header_modifier
            .as_ref()
            .ok_or_else(|| missing("requestHeaderModifier"))
            .and_then(header_modifier),
        "ResponseHeaderModifier" => f
            .response_header_modifier
            .as_ref()
            .ok_or_else(|| missing("responseHeaderModifier"))
            .and_then(header_modifier),
        "RequestRedirect" => f
            .request_redirect
            .as_ref()
            .ok_or_else(|| missing("requestRedirect"))
            .and_then(redirect),
        other => Err(unparsed(format!(
            "unknown filter type {other:?} (expected RequestHeaderModifier, ResponseHeaderModifier or RequestRedirect)"
        ))),
    }
}

/// A Gateway API HTTP or gRPC route's backend naming a Service
/// (exactly: no group, `""` or `core`; no kind or `Service`) needs a
/// non-zero port. Other backends are left to their controllers.
fn backend(b: &HttpBackendRef) -> Checked {
    let service = matches!(b.group.as_deref(), None | Some("") | Some("core"))
        && matches!(b.kind.as_deref(), None | Some("Service"));
    if service && b.port.is_none_or(|p| p == 0) {
        return Err(invalid(
            "invalid backendRef: cannot reference a Service without a port",
        ));
    }
    Ok(())
}

/// The rules of a `policy.linkerd.io` HTTPRoute (its timeouts are
/// checked by `route_timeouts`).
pub fn policy_http_rules(rules: Option<&[HttpRouteRule]>) -> Checked {
    for rule in rules.into_iter().flatten() {
        for m in rule.matches.iter().flatten() {
            http_match(m)?;
        }
        for f in rule.filters.iter().flatten() {
            policy_filter(f)?;
        }
    }
    Ok(())
}

/// The rules of a Gateway API HTTPRoute.
pub fn gateway_http_rules(rules: Option<&[HttpRouteRule]>) -> Checked {
    for rule in rules.into_iter().flatten() {
        for m in rule.matches.iter().flatten() {
            http_match(m)?;
        }
        for f in rule.filters.iter().flatten() {
            gateway_filter(f)?;
        }
        for b in rule.backend_refs.iter().flatten() {
            backend(b)?;
        }
    }
    Ok(())
}

fn grpc_match(m: &GrpcRouteMatch) -> Checked {
    for h in m.headers.iter().flatten() {
        header_match(h)?;
    }
    if let Some(method) = &m.method {
        match method.kind.as_deref() {
            None | Some("Exact") => {}
            Some("RegularExpression") => {
                return Err(invalid(
                    "unsupported GRPCRoute method match type \"RegularExpression\"",
                ));
            }
            Some(other) => {
                return Err(unparsed(format!("unknown method match type {other:?}")));
            }
        }
    }
    Ok(())
}

/// The rules of a GRPCRoute: matches, header modifiers, Service backends.
pub fn grpc_rules(rules: Option<&[GrpcRouteRule]>) -> Checked {
    for rule in rules.into_iter().flatten() {
        for m in rule.matches.iter().flatten() {
            grpc_match(m)?;
        }
        for f in rule.filters.iter().flatten() {
            if let Some(m) = &f.request_header_modifier {
                header_modifier(m)?;
            }
            if let Some(m) = &f.response_header_modifier {
                header_modifier(m)?;
            }
        }
        for b in rule.backend_refs.iter().flatten() {
            backend(b)?;
        }
    }
    Ok(())
}

/// A TLSRoute or TCPRoute has exactly one rule (`rules` is required).
pub fn l4_rules(kind: &str, rules: Option<&[L4RouteRule]>) -> Checked {
    let Some(rules) = rules else {
        return Err(unparsed("missing field `rules`"));
    };
    if rules.len() != 1 {
        return Err(invalid(format!("a {kind} needs exactly one rule")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules<T: serde::de::DeserializeOwned>(json: serde_json::Value) -> Vec<T> {
        serde_json::from_value(json).expect("rules")
    }

    #[test]
    fn redirects_read_the_path_fields_whatever_the_type() {
        let r: Vec<HttpRouteRule> = rules(serde_json::json!([{"filters": [
            {"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replacePrefixMatch": "/v2"}}}
        ]}]));
        assert_eq!(gateway_http_rules(Some(&r)), Ok(()));
        assert_eq!(policy_http_rules(Some(&r)), Ok(()));
    }

    #[test]
    fn gateway_filters_of_any_type_are_admitted_but_their_modifiers_checked() {
        let ok: Vec<HttpRouteRule> = rules(serde_json::json!([{"filters": [
            {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "web", "port": 80}}},
            {"type": "URLRewrite", "urlRewrite": {"hostname": "a"}},
            {"type": "ExtensionRef", "extensionRef": {"group": "x", "kind": "Y", "name": "z"}},
            {"type": "CORS"},
            {"type": "RequestHeaderModifier"}
        ]}]));
        assert_eq!(gateway_http_rules(Some(&ok)), Ok(()));
        assert!(matches!(
            policy_http_rules(Some(&ok)),
            Err(Problem::Unparsed(_))
        ));
        let bad: Vec<HttpRouteRule> = rules(serde_json::json!([{"filters": [
            {"type": "URLRewrite", "requestHeaderModifier": {"add": [{"name": "x a", "value": "b"}]}}
        ]}]));
        assert_eq!(
            gateway_http_rules(Some(&bad)),
            Err(invalid("invalid header name \"x a\""))
        );
    }

    #[test]
    fn service_backends_need_a_port_others_do_not() {
        let r: Vec<HttpRouteRule> = rules(serde_json::json!([{"backendRefs": [
            {"name": "a", "port": 80},
            {"group": "example.com", "kind": "Bucket", "name": "b"},
            {"kind": "service", "name": "lower-case kind is not the original's Service"}
        ]}]));
        assert_eq!(gateway_http_rules(Some(&r)), Ok(()));
        for b in [
            serde_json::json!({"name": "a"}),
            serde_json::json!({"group": "core", "kind": "Service", "name": "a", "port": 0}),
            serde_json::json!({"group": "", "name": "a"}),
        ] {
            let r: Vec<HttpRouteRule> = rules(serde_json::json!([{"backendRefs": [b]}]));
            assert_eq!(
                gateway_http_rules(Some(&r)),
                Err(invalid(
                    "invalid backendRef: cannot reference a Service without a port"
                ))
            );
        }
        // The policy HTTPRoute's backends are not checked.
        let r: Vec<HttpRouteRule> = rules(serde_json::json!([{"backendRefs": [{"name": "a"}]}]));
        assert_eq!(policy_http_rules(Some(&r)), Ok(()));
    }

    #[test]
    fn unknown_enum_values_are_unparsed() {
        for m in [
            serde_json::json!({"path": {"type": "Glob", "value": "/a"}}),
            serde_json::json!({"method": "FETCH"}),
            serde_json::json!({"headers": [{"type": "Prefix", "name": "a", "value": "b"}]}),
        ] {
            let m: HttpRouteMatch = serde_json::from_value(m).expect("match");
            assert!(matches!(http_match(&m), Err(Problem::Unparsed(_))));
        }
    }

    #[test]
    fn egress_parents_need_a_port() {
        let p: Vec<ParentRef> = rules(serde_json::json!([
            {"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "all"}
        ]));
        assert_eq!(
            parents(Some(&p)),
            Err(invalid(
                "cannot target an EgressNetwork without specifying a port"
            ))
        );
        // A Server parent may name a port: the index ignores such a route,
        // the status says why.
        let p: Vec<ParentRef> = rules(serde_json::json!([
            {"group": "policy.linkerd.io", "kind": "Server", "name": "web", "port": 80}
        ]));
        assert_eq!(parents(Some(&p)), Ok(()));
    }
}
