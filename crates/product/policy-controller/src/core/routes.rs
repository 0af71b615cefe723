//! Inbound HTTP routes: references, matches, filters, the default and probe
//! routes, and the order in which routes are published.

use std::{cmp::Ordering, collections::BTreeMap, num::NonZeroU16, time::SystemTime};

use ipnet::IpNet;

use super::{AuthorizationRef, Authorizations, ClientAuthentication, ClientAuthorization};

/// Names a route resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKindName {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// Which resource (or default) produced an [`HttpRoute`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RouteRef {
    /// `default` (matches everything) or `probe`.
    Default(&'static str),
    Resource(GroupKindName),
}

/// An inbound HTTP route.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HttpRoute {
    pub hostnames: Vec<HostMatch>,
    pub rules: Vec<HttpRouteRule>,
    /// Authorizations that apply to requests matching this route, in
    /// addition to the server's.
    pub authorizations: Authorizations,
    /// When the resource was created (`None` for defaults).
    pub created_at: Option<SystemTime>,
}

/// A `:authority` match.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostMatch {
    Exact(String),
    /// `*.a.b` is `reverse_labels: ["b", "a"]`.
    Suffix {
        reverse_labels: Vec<String>,
    },
}

/// Matches and filters of one rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HttpRouteRule {
    pub matches: Vec<HttpRouteMatch>,
    pub filters: Vec<Filter>,
}

/// A request match: every given part must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HttpRouteMatch {
    pub path: Option<PathMatch>,
    pub headers: Vec<HeaderMatch>,
    pub query_params: Vec<QueryParamMatch>,
    /// An HTTP method (validated).
    pub method: Option<String>,
}

/// A path match (regular expressions are validated).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathMatch {
    Exact(String),
    Prefix(String),
    Regex(String),
}

/// A header match: (name, value or regular expression).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HeaderMatch {
    Exact(String, String),
    Regex(String, String),
}

/// A query parameter match: (name, value or regular expression).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueryParamMatch {
    Exact(String, String),
    Regex(String, String),
}

/// A filter applied to matching requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Filter {
    RequestHeaderModifier(HeaderModifierFilter),
    /// Kept in the model; proxies are not sent it on inbound routes.
    ResponseHeaderModifier(HeaderModifierFilter),
    RequestRedirect(RequestRedirectFilter),
}

/// Header edits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeaderModifierFilter {
    pub add: Vec<(String, String)>,
    pub set: Vec<(String, String)>,
    pub remove: Vec<String>,
}

/// A redirect response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestRedirectFilter {
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub path: Option<PathModifier>,
    pub port: Option<NonZeroU16>,
    pub status: Option<u16>,
}

/// How a redirect rewrites the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathModifier {
    Full(String),
    Prefix(String),
}

// === impl GroupKindName ===

impl Ord for GroupKindName {
    /// By name, then group, then kind.
    fn cmp(&self, other: &Self) -> Ordering {
        (&self.name, &self.group, &self.kind).cmp(&(&other.name, &other.group, &other.kind))
    }
}

impl PartialOrd for GroupKindName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

// === impl RouteRef ===

impl Ord for RouteRef {
    /// Resources sort before defaults.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Resource(a), Self::Resource(b)) => a.cmp(b),
            (Self::Default(a), Self::Default(b)) => a.cmp(b),
            (Self::Resource(_), Self::Default(_)) => Ordering::Less,
            (Self::Default(_), Self::Resource(_)) => Ordering::Greater,
        }
    }
}

impl PartialOrd for RouteRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

// === impl HttpRoute ===

impl HttpRoute {
    /// `Default("default")`: everything under `/`, no route authorizations
    /// (the server's apply).
    pub fn default_route() -> Self {
        Self {
            hostnames: Vec::new(),
            rules: vec![HttpRouteRule {
                matches: vec![HttpRouteMatch {
                    path: Some(PathMatch::Prefix("/".to_string())),
                    ..Default::default()
                }],
                filters: Vec::new(),
            }],
            authorizations: Authorizations::new(),
            created_at: None,
        }
    }

    /// `Default("probe")`: `GET` of each probe path, allowed from the probe
    /// networks without authentication.
    pub fn probe_route<'a>(
        paths: impl IntoIterator<Item = &'a str>,
        probe_networks: &[IpNet],
    ) -> Self {
        let matches = paths
            .into_iter()
            .map(|path| HttpRouteMatch {
                path: Some(PathMatch::Exact(path.to_string())),
                method: Some("GET".to_string()),
                ..Default::default()
            })
            .collect();
        let authz = ClientAuthorization {
            networks: probe_networks.iter().copied().map(Into::into).collect(),
            authentication: ClientAuthentication::Unauthenticated,
        };
        Self {
            hostnames: Vec::new(),
            rules: vec![HttpRouteRule {
                matches,
                filters: Vec::new(),
            }],
            authorizations: [(AuthorizationRef::Default("probe"), authz)].into(),
            created_at: None,
        }
    }
}

/// The routes of a server without route resources: `default`, plus `probe`
/// when there are probe paths and probe networks.
pub fn default_http_routes<'a>(
    probe_paths: impl IntoIterator<Item = &'a str>,
    probe_networks: &[IpNet],
) -> BTreeMap<RouteRef, HttpRoute> {
    let mut routes = BTreeMap::new();
    routes.insert(RouteRef::Default("default"), HttpRoute::default_route());
    let mut paths = probe_paths.into_iter().peekable();
    if !probe_networks.is_empty() && paths.peek().is_some() {
        routes.insert(
            RouteRef::Default("probe"),
            HttpRoute::probe_route(paths, probe_networks),
        );
    }
    routes
}

/// Routes in publishing order: those with a creation time first (oldest
/// first), then by reference (resources before defaults).
pub fn ordered(routes: &BTreeMap<RouteRef, HttpRoute>) -> Vec<(&RouteRef, &HttpRoute)> {
    let mut list: Vec<_> = routes.iter().collect();
    list.sort_by(|(a_ref, a), (b_ref, b)| {
        by_creation(a.created_at, b.created_at).then_with(|| a_ref.cmp(b_ref))
    });
    list
}

/// Older first; routes with a creation time before those without.
pub fn by_creation(a: Option<SystemTime>, b: Option<SystemTime>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// `*.a.b` → suffix `["b", "a"]`; anything else is exact.
pub fn host_match(hostname: &str) -> HostMatch {
    match hostname.strip_prefix("*.") {
        Some(suffix) => HostMatch::Suffix {
            reverse_labels: suffix.split('.').rev().map(str::to_string).collect(),
        },
        None => HostMatch::Exact(hostname.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn gkn(name: &str) -> RouteRef {
        RouteRef::Resource(GroupKindName {
            group: "policy.linkerd.io".into(),
            kind: "HTTPRoute".into(),
            name: name.into(),
        })
    }

    #[test]
    fn publishing_order_is_time_then_reference() {
        let at = |s| {
            let mut r = HttpRoute::default_route();
            r.created_at = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
            r
        };
        let mut routes = BTreeMap::new();
        routes.insert(RouteRef::Default("default"), HttpRoute::default_route());
        routes.insert(gkn("a-new"), at(20));
        routes.insert(gkn("z-old"), at(10));
        routes.insert(gkn("b-new"), at(20));
        let order: Vec<_> = ordered(&routes)
            .into_iter()
            .map(|(r, _)| r.clone())
            .collect();
        assert_eq!(
            order,
            [
                gkn("z-old"),
                gkn("a-new"),
                gkn("b-new"),
                RouteRef::Default("default")
            ]
        );
    }

    #[test]
    fn defaults_include_probes_only_with_paths_and_networks() {
        let nets: Vec<IpNet> = vec!["0.0.0.0/0".parse().expect("net")];
        assert_eq!(default_http_routes(["/ready"], &[]).len(), 1);
        assert_eq!(default_http_routes([], &nets).len(), 1);
        let routes = default_http_routes(["/live", "/ready"], &nets);
        let probe = &routes[&RouteRef::Default("probe")];
        assert_eq!(probe.rules[0].matches.len(), 2);
        assert_eq!(
            probe.rules[0].matches[0].path,
            Some(PathMatch::Exact("/live".into()))
        );
    }

    #[test]
    fn wildcard_hosts_are_reversed_suffixes() {
        assert_eq!(
            host_match("*.example.com"),
            HostMatch::Suffix {
                reverse_labels: vec!["com".into(), "example".into()]
            }
        );
        assert_eq!(host_match("a.b"), HostMatch::Exact("a.b".into()));
    }
}
