//! HTTPRoutes (`policy.linkerd.io` and Gateway API, which share a shape)
//! as the inbound index uses them: the Servers they attach to,
//! whether our controller accepted them (status), and the route itself.
//! The conversions are public so that the status writer can say why the
//! index ignores a route.

use std::{collections::BTreeSet, num::NonZeroU16, time::SystemTime};

use k8s_api::policy::{
    HTTPRoute, HttpRouteSpec, HttpRouteStatus,
    http_route::{
        HeaderModifier, HttpHeaderMatch, HttpRouteFilter, HttpRouteMatch as K8sMatch,
        HttpRouteRule, POLICY_CONTROLLER_NAME, ParentRef,
    },
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::InvalidResource;
use crate::core::routes::{
    Filter, HeaderMatch, HeaderModifierFilter, HttpRoute, HttpRouteMatch, HttpRouteRule as Rule,
    PathMatch, PathModifier, QueryParamMatch, RequestRedirectFilter, host_match,
};

/// A route with the Servers it names and those that accepted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteBinding {
    /// Server names from `parentRefs`.
    pub parents: BTreeSet<String>,
    /// Server names with an `Accepted=True` condition written by
    /// `linkerd.io/policy-controller`.
    pub accepted: BTreeSet<String>,
    pub route: HttpRoute,
}

impl RouteBinding {
    /// Converts a route resource in namespace `ns`.
    pub fn from_resource(route: &HTTPRoute, ns: &str) -> Result<Self, InvalidResource> {
        Self::from_parts(&route.metadata, &route.spec, route.status.as_ref(), ns)
    }

    /// Converts a Gateway API HTTPRoute (the same spec and status shape)
    /// in namespace `ns`.
    pub fn from_gateway(
        route: &k8s_api::gateway::HTTPRoute,
        ns: &str,
    ) -> Result<Self, InvalidResource> {
        Self::from_parts(&route.metadata, &route.spec, route.status.as_ref(), ns)
    }

    fn from_parts(
        meta: &ObjectMeta,
        spec: &HttpRouteSpec,
        status: Option<&HttpRouteStatus>,
        ns: &str,
    ) -> Result<Self, InvalidResource> {
        Ok(Self {
            parents: server_parents(spec.parent_refs.iter().flatten(), ns)?,
            accepted: accepted_servers(status),
            route: http_route(spec, created_at(meta))?,
        })
    }

    /// Whether the route is attached to Server `name`.
    pub fn attached_to(&self, name: &str) -> bool {
        self.parents.contains(name) && self.accepted.contains(name)
    }
}

/// The Servers whose `Accepted=True` condition our controller wrote.
pub(crate) fn accepted_servers(status: Option<&HttpRouteStatus>) -> BTreeSet<String> {
    status
        .iter()
        .flat_map(|s| &s.parents)
        .filter(|p| p.controller_name == POLICY_CONTROLLER_NAME)
        .filter(|p| is_server_parent(&p.parent_ref))
        .filter(|p| {
            p.conditions
                .iter()
                .any(|c| c.type_ == k8s_api::conditions::ACCEPTED && c.status == "True")
        })
        .map(|p| p.parent_ref.name.clone())
        .collect()
}

/// When the resource was created.
pub(crate) fn created_at(meta: &ObjectMeta) -> Option<SystemTime> {
    meta.creation_timestamp
        .as_ref()
        .map(|t| SystemTime::from(t.0))
}

/// Whether a parent reference names a `policy.linkerd.io` Server (kind
/// and group compared case-insensitively).
pub fn is_server_parent(parent: &ParentRef) -> bool {
    let group = parent.group.as_deref().unwrap_or_default();
    parent
        .kind
        .as_deref()
        .is_some_and(|k| k.eq_ignore_ascii_case("Server"))
        && group.eq_ignore_ascii_case(k8s_api::policy::GROUP)
}

/// The Server names of a route's parents; other parent kinds are skipped.
/// A Server parent in another namespace, or with a port or section name,
/// makes the route invalid.
pub fn server_parents<'a>(
    parents: impl Iterator<Item = &'a ParentRef>,
    ns: &str,
) -> Result<BTreeSet<String>, InvalidResource> {
    let mut servers = BTreeSet::new();
    for parent in parents.filter(|p| is_server_parent(p) && !p.name.is_empty()) {
        if parent.namespace.as_deref().is_some_and(|n| n != ns) {
            return Err(InvalidResource::ParentRef("a Server in another namespace"));
        }
        if parent.port.is_some() {
            return Err(InvalidResource::ParentRef("a port"));
        }
        if parent.section_name.is_some() {
            return Err(InvalidResource::ParentRef("a section name"));
        }
        servers.insert(parent.name.clone());
    }
    Ok(servers)
}

/// Converts a route spec. Unsupported filters, relative paths, bad regular
/// expressions, header names or methods make the whole route invalid.
pub fn http_route(
    spec: &HttpRouteSpec,
    created_at: Option<SystemTime>,
) -> Result<HttpRoute, InvalidResource> {
    let rules = spec
        .rules
        .iter()
        .flatten()
        .map(rule)
        .collect::<Result<_, _>>()?;
    Ok(HttpRoute {
        hostnames: spec
            .hostnames
            .iter()
            .flatten()
            .map(|h| host_match(h))
            .collect(),
        rules,
        authorizations: Default::default(),
        created_at,
    })
}

fn rule(rule: &HttpRouteRule) -> Result<Rule, InvalidResource> {
    Ok(Rule {
        matches: rule
            .matches
            .iter()
            .flatten()
            .map(route_match)
            .collect::<Result<_, _>>()?,
        filters: rule
            .filters
            .iter()
            .flatten()
            .map(filter)
            .collect::<Result<_, _>>()?,
    })
}

pub(crate) fn invalid(what: impl Into<String>) -> InvalidResource {
    InvalidResource::Route(what.into())
}

pub(crate) fn regex(re: &str) -> Result<String, InvalidResource> {
    regex::Regex::new(re)
        .map(|_| re.to_string())
        .map_err(|e| invalid(format!("invalid regular expression {re:?}: {e}")))
}

pub(crate) fn header_name(name: &str) -> Result<String, InvalidResource> {
    http::HeaderName::from_bytes(name.as_bytes())
        .map(|h| h.as_str().to_string())
        .map_err(|_| invalid(format!("invalid header name {name:?}")))
}

pub(crate) fn header_value(value: &str) -> Result<String, InvalidResource> {
    http::HeaderValue::from_str(value)
        .map(|_| value.to_string())
        .map_err(|_| invalid(format!("invalid header value {value:?}")))
}

fn absolute(path: &str) -> Result<String, InvalidResource> {
    if path.starts_with('/') {
        Ok(path.to_string())
    } else {
        Err(invalid(format!("path {path:?} is not absolute")))
    }
}

/// A redirect's replacement path must be absolute, as the original's
/// conversion requires.
fn redirect_path(field: &str, path: &str) -> Result<String, InvalidResource> {
    if path.starts_with('/') {
        Ok(path.to_string())
    } else {
        Err(invalid(format!(
            "requestRedirect.path.{field} {path:?} is not an absolute path"
        )))
    }
}

pub(crate) fn route_match(m: &K8sMatch) -> Result<HttpRouteMatch, InvalidResource> {
    let path = m
        .path
        .as_ref()
        .map(|p| {
            let value = p.value.as_deref().unwrap_or("/");
            match p.kind.as_deref().unwrap_or("PathPrefix") {
                "Exact" => absolute(value).map(PathMatch::Exact),
                "PathPrefix" => absolute(value).map(PathMatch::Prefix),
                "RegularExpression" => regex(value).map(PathMatch::Regex),
                other => Err(invalid(format!("unsupported path match type {other:?}"))),
            }
        })
        .transpose()?;
    let headers = m
        .headers
        .iter()
        .flatten()
        .map(header_match)
        .collect::<Result<_, _>>()?;
    let query_params = m
        .query_params
        .iter()
        .flatten()
        .map(|q| match q.kind.as_deref().unwrap_or("Exact") {
            "Exact" => Ok(QueryParamMatch::Exact(q.name.clone(), q.value.clone())),
            "RegularExpression" => Ok(QueryParamMatch::Regex(q.name.clone(), regex(&q.value)?)),
            other => Err(invalid(format!("unsupported query match type {other:?}"))),
        })
        .collect::<Result<_, _>>()?;
    let method = m
        .method
        .as_deref()
        .map(|method| {
            http::Method::from_bytes(method.as_bytes())
                .map(|m| m.as_str().to_string())
                .map_err(|_| invalid(format!("invalid method {method:?}")))
        })
        .transpose()?;
    Ok(HttpRouteMatch {
        path,
        headers,
        query_params,
        method,
    })
}

/// A header match (HTTP and gRPC routes share it).
pub(crate) fn header_match(h: &HttpHeaderMatch) -> Result<HeaderMatch, InvalidResource> {
    let name = header_name(&h.name)?;
    match h.kind.as_deref().unwrap_or("Exact") {
        "Exact" => Ok(HeaderMatch::Exact(name, header_value(&h.value)?)),
        "RegularExpression" => Ok(HeaderMatch::Regex(name, regex(&h.value)?)),
        other => Err(invalid(format!("unsupported header match type {other:?}"))),
    }
}

fn header_modifier(m: &HeaderModifier) -> Result<HeaderModifierFilter, InvalidResource> {
    let pairs = |list: &Option<Vec<k8s_api::policy::http_route::HttpHeader>>| {
        list.iter()
            .flatten()
            .map(|h| Ok((header_name(&h.name)?, header_value(&h.value)?)))
            .collect::<Result<Vec<_>, InvalidResource>>()
    };
    Ok(HeaderModifierFilter {
        add: pairs(&m.add)?,
        set: pairs(&m.set)?,
        remove: m
            .remove
            .iter()
            .flatten()
            .map(|n| header_name(n))
            .collect::<Result<_, _>>()?,
    })
}

pub(crate) fn filter(f: &HttpRouteFilter) -> Result<Filter, InvalidResource> {
    let missing = || invalid(format!("filter {} has no configuration", f.kind));
    match f.kind.as_str() {
        "RequestHeaderModifier" => f
            .request_header_modifier
            .as_ref()
            .ok_or_else(missing)
            .and_then(header_modifier)
            .map(Filter::RequestHeaderModifier),
        "ResponseHeaderModifier" => f
            .response_header_modifier
            .as_ref()
            .ok_or_else(missing)
            .and_then(header_modifier)
            .map(Filter::ResponseHeaderModifier),
        "RequestRedirect" => {
            let r = f.request_redirect.as_ref().ok_or_else(missing)?;
            let path = r
                .path
                .as_ref()
                .map(|p| match p.kind.as_str() {
                    "ReplaceFullPath" => p
                        .replace_full_path
                        .as_deref()
                        .ok_or_else(|| invalid("ReplaceFullPath without replaceFullPath"))
                        .and_then(|s| redirect_path("replaceFullPath", s))
                        .map(PathModifier::Full),
                    "ReplacePrefixMatch" => p
                        .replace_prefix_match
                        .as_deref()
                        .ok_or_else(|| invalid("ReplacePrefixMatch without replacePrefixMatch"))
                        .and_then(|s| redirect_path("replacePrefixMatch", s))
                        .map(PathModifier::Prefix),
                    other => Err(invalid(format!("unsupported path modifier {other:?}"))),
                })
                .transpose()?;
            let status = r
                .status_code
                .map(|code| {
                    http::StatusCode::from_u16(code)
                        .map(|s| s.as_u16())
                        .map_err(|_| invalid(format!("invalid redirect status {code}")))
                })
                .transpose()?;
            Ok(Filter::RequestRedirect(RequestRedirectFilter {
                scheme: r.scheme.clone(),
                host: r.hostname.clone(),
                path,
                port: r.port.and_then(NonZeroU16::new),
                status,
            }))
        }
        other => Err(invalid(format!("unsupported filter {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> HttpRouteSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    #[test]
    fn converts_matches_filters_and_hosts() {
        let route = http_route(
            &spec(serde_json::json!({
                "hostnames": ["*.example.com", "api.local"],
                "rules": [{
                    "matches": [{
                        "path": {"type": "Exact", "value": "/a"},
                        "headers": [{"name": "X-Env", "value": "dev"}],
                        "queryParams": [{"type": "RegularExpression", "name": "q", "value": "^x+$"}],
                        "method": "POST"
                    }, {}],
                    "filters": [
                        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "remove": ["x-b"]}},
                        {"type": "RequestRedirect", "requestRedirect": {"hostname": "b", "statusCode": 301, "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}}}
                    ]
                }]
            })),
            None,
        )
        .expect("valid route");
        assert_eq!(route.hostnames.len(), 2);
        let rule = &route.rules[0];
        assert_eq!(
            rule.matches[0],
            HttpRouteMatch {
                path: Some(PathMatch::Exact("/a".into())),
                headers: vec![HeaderMatch::Exact("x-env".into(), "dev".into())],
                query_params: vec![QueryParamMatch::Regex("q".into(), "^x+$".into())],
                method: Some("POST".into()),
            }
        );
        assert_eq!(rule.matches[1], HttpRouteMatch::default());
        assert_eq!(
            rule.filters,
            vec![
                Filter::RequestHeaderModifier(HeaderModifierFilter {
                    add: vec![],
                    set: vec![("x-a".into(), "1".into())],
                    remove: vec!["x-b".into()],
                }),
                Filter::RequestRedirect(RequestRedirectFilter {
                    host: Some("b".into()),
                    status: Some(301),
                    path: Some(PathModifier::Prefix("/b".into())),
                    ..Default::default()
                }),
            ]
        );
    }

    #[test]
    fn unsupported_or_malformed_routes_are_invalid() {
        let bad = [
            serde_json::json!({"rules": [{"matches": [{"path": {"type": "Exact", "value": "relative"}}]}]}),
            serde_json::json!({"rules": [{"matches": [{"path": {"type": "RegularExpression", "value": "("}}]}]}),
            serde_json::json!({"rules": [{"filters": [{"type": "RequestMirror"}]}]}),
            serde_json::json!({"rules": [{"matches": [{"headers": [{"name": "bad header", "value": "x"}]}]}]}),
        ];
        for json in bad {
            assert!(http_route(&spec(json.clone()), None).is_err(), "{json}");
        }
    }

    #[test]
    fn parents_must_be_local_servers_without_port_or_section() {
        let parent = |json| serde_json::from_value::<ParentRef>(json).expect("parent");
        let server = parent(
            serde_json::json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"}),
        );
        let gateway = parent(serde_json::json!({"name": "gw"}));
        let parents = server_parents([&server, &gateway].into_iter(), "ns").expect("valid");
        assert_eq!(parents.into_iter().collect::<Vec<_>>(), ["web"]);
        for bad in [
            serde_json::json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "namespace": "other"}),
            serde_json::json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "port": 80}),
            serde_json::json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "sectionName": "x"}),
        ] {
            assert!(server_parents([&parent(bad)].into_iter(), "ns").is_err());
        }
    }
}
