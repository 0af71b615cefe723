//! ServiceProfiles → `DestinationProfile`: routes and their request and
//! response matches, route metric labels, retryability, timeouts, the retry
//! budget, traffic-split overrides, opaque protocol and the parent/profile
//! references. Pure functions; the index decides which ServiceProfile
//! applies and publishes the result.

use std::{collections::HashMap, net::SocketAddr, sync::Arc};

use k8s_api::{
    go_duration::parse_go_duration,
    service_profile::{self as sp, ServiceProfile},
};
use linkerd2_proxy_api::{
    destination::{
        DestinationProfile, HttpStatusRange, PathMatch, RequestMatch, ResponseClass, ResponseMatch,
        RetryBudget, Route, WeightedAddr, WeightedDst, request_match, response_match,
    },
    http_types::{HttpMethod, http_method},
    meta::{Metadata, Resource, metadata},
};

use super::frames::Frames;
use super::weighted_addr::{bare_addr, weighted_addr};
use crate::config::TranslatorConfig;
use crate::core::{ServiceTarget, endpoint::Endpoint};

/// Why a ServiceProfile cannot be turned into an update (the stream keeps
/// its previous profile and the problem is logged, as in the original).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    #[error("route {route:?} has a condition with no field set")]
    EmptyRequestMatch { route: String },
    #[error("route {route:?} has a response class with no field set")]
    EmptyResponseMatch { route: String },
    #[error("route {route:?} has an invalid status range {min}-{max}")]
    StatusRange { route: String, min: u32, max: u32 },
    #[error("invalid retry budget ttl {ttl:?}: {reason}")]
    RetryBudgetTtl { ttl: String, reason: String },
}

/// The retry budget proxies get when the profile sets none.
pub fn default_retry_budget() -> RetryBudget {
    RetryBudget {
        retry_ratio: 0.2,
        min_retries_per_second: 10,
        ttl: Some(prost_types::Duration {
            seconds: 10,
            nanos: 0,
        }),
    }
}

/// The profile of a Service port. `profile` is the ServiceProfile that
/// applies (client namespace first, then the Service's), if any; `opaque`
/// says whether the port is in the Service's opaque set.
pub fn service_profile(
    target: &ServiceTarget,
    profile: Option<&ServiceProfile>,
    opaque: bool,
) -> Result<DestinationProfile, ProfileError> {
    let spec = profile.map(|p| &p.spec);
    let routes = spec
        .map(|s| s.routes.iter().map(route).collect::<Result<Vec<_>, _>>())
        .transpose()?
        .unwrap_or_default();
    let retry_budget = match spec.and_then(|s| s.retry_budget.as_ref()) {
        Some(budget) => retry_budget(budget)?,
        None => default_retry_budget(),
    };
    let dst_overrides = spec
        .map(|s| {
            s.dst_overrides
                .iter()
                .map(|dst| weighted_dst(dst, target.port))
                .collect()
        })
        .unwrap_or_default();
    let profile_ref = Resource {
        group: "linkerd.io".into(),
        kind: profile.map(|_| "ServiceProfile".into()).unwrap_or_default(),
        name: profile
            .and_then(|p| p.metadata.name.clone())
            .unwrap_or_default(),
        namespace: profile
            .and_then(|p| p.metadata.namespace.clone())
            .unwrap_or_default(),
        ..Default::default()
    };
    Ok(DestinationProfile {
        fully_qualified_name: target.fqn.clone(),
        opaque_protocol: opaque,
        routes,
        retry_budget: Some(retry_budget),
        dst_overrides,
        endpoint: None,
        parent_ref: Some(resource_metadata(Resource {
            group: "core".into(),
            kind: "Service".into(),
            name: target.service.name.clone(),
            namespace: target.service.namespace.clone(),
            port: u32::from(target.port),
            ..Default::default()
        })),
        profile_ref: Some(resource_metadata(profile_ref)),
    })
}

/// The profile of a single endpoint (a pod IP, a host port, an instance
/// name or an unknown address).
pub fn endpoint_profile(endpoint: WeightedAddr, opaque: bool) -> DestinationProfile {
    DestinationProfile {
        retry_budget: Some(default_retry_budget()),
        endpoint: Some(endpoint),
        opaque_protocol: opaque,
        ..Default::default()
    }
}

/// A computed profile, compared with the published one before it is encoded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile(pub DestinationProfile);

/// A published profile and its encoded frame.
#[derive(Debug)]
pub struct ProfileState {
    /// The profile.
    pub profile: DestinationProfile,
    /// Its encoded frame (just one), shared by every stream that follows it:
    /// a stream sends it as a `Get` stream sends a group's step.
    pub frames: Frames,
}

impl ProfileState {
    /// Encodes `profile` once.
    pub fn new(profile: Profile) -> Arc<Self> {
        let frames = Frames::from([super::frames::profile(&profile.0)]);
        Arc::new(Self {
            profile: profile.0,
            frames,
        })
    }

    /// Whether this state publishes `profile`.
    pub fn publishes(&self, profile: &Profile) -> bool {
        self.profile == profile.0
    }
}

/// The profile of a ServiceProfile-backed Service port (see [`service_profile`]).
pub fn service(
    target: &ServiceTarget,
    profile: Option<&ServiceProfile>,
    opaque: bool,
) -> Result<Profile, ProfileError> {
    service_profile(target, profile, opaque).map(Profile)
}

/// The endpoint profile of a Running pod's address: its `WeightedAddr` with
/// a `namespace` label, or the bare address if the pod's proxy ports cannot
/// be read.
pub fn pod_endpoint(
    endpoint: &Endpoint,
    namespace: &str,
    cfg: &TranslatorConfig,
    opaque: bool,
) -> Profile {
    match weighted_addr(endpoint, cfg, None) {
        Ok(mut wa) => {
            wa.metric_labels
                .insert("namespace".to_string(), namespace.to_string());
            Profile(endpoint_profile(wa, opaque))
        }
        Err(error) => {
            tracing::warn!(addr = %endpoint.addr, %error, "serving a bare endpoint profile");
            Profile(endpoint_profile(bare_addr(endpoint.addr), opaque))
        }
    }
}

/// The endpoint profile of an address nothing is known about.
pub fn bare_endpoint(addr: SocketAddr, opaque: bool) -> Profile {
    Profile(endpoint_profile(bare_addr(addr), opaque))
}

fn resource_metadata(resource: Resource) -> Metadata {
    Metadata {
        kind: Some(metadata::Kind::Resource(resource)),
    }
}

fn route(spec: &sp::RouteSpec) -> Result<Route, ProfileError> {
    let condition =
        request_match(&spec.condition).ok_or_else(|| ProfileError::EmptyRequestMatch {
            route: spec.name.clone(),
        })?;
    let response_classes = spec
        .response_classes
        .iter()
        .map(|class| {
            let condition = response_match(&class.condition, &spec.name)?.ok_or_else(|| {
                ProfileError::EmptyResponseMatch {
                    route: spec.name.clone(),
                }
            })?;
            Ok(ResponseClass {
                condition: Some(condition),
                is_failure: class.is_failure,
            })
        })
        .collect::<Result<Vec<_>, ProfileError>>()?;
    let timeout = spec
        .timeout
        .as_deref()
        .filter(|t| !t.is_empty())
        .and_then(|t| match parse_go_duration(t) {
            Ok(nanos) => Some(duration_from_nanos(nanos)),
            Err(error) => {
                tracing::warn!(route = %spec.name, %error, "ignoring an invalid route timeout");
                None
            }
        });
    Ok(Route {
        condition: Some(condition),
        response_classes,
        metrics_labels: HashMap::from([("route".to_string(), spec.name.clone())]),
        is_retryable: spec.is_retryable,
        timeout,
    })
}

/// A request match; `None` when no field is set. Several fields are
/// combined with `All`, in the order all, any, method, not, pathRegex.
fn request_match(m: &sp::RequestMatch) -> Option<RequestMatch> {
    let mut parts = Vec::new();
    if let Some(all) = &m.all {
        let matches = all.iter().filter_map(request_match).collect();
        parts.push(request_match::Match::All(request_match::Seq { matches }));
    }
    if let Some(any) = &m.any {
        let matches = any.iter().filter_map(request_match).collect();
        parts.push(request_match::Match::Any(request_match::Seq { matches }));
    }
    if let Some(method) = m.method.as_deref().filter(|s| !s.is_empty()) {
        parts.push(request_match::Match::Method(http_method(method)));
    }
    if let Some(not) = m.not.as_deref().and_then(request_match) {
        parts.push(request_match::Match::Not(Box::new(not)));
    }
    if let Some(regex) = m.path_regex.as_deref().filter(|s| !s.is_empty()) {
        parts.push(request_match::Match::Path(PathMatch {
            regex: regex.to_string(),
        }));
    }
    combine(
        parts,
        |matches| request_match::Match::All(request_match::Seq { matches }),
        |m| RequestMatch { r#match: Some(m) },
    )
}

/// A response match; `None` when no field is set. Fields in the order
/// all, any, status, not.
fn response_match(
    m: &sp::ResponseMatch,
    route: &str,
) -> Result<Option<ResponseMatch>, ProfileError> {
    // The set matches of a list, leaving out elements with no field set.
    let seq = |list: &[sp::ResponseMatch]| -> Result<response_match::Seq, ProfileError> {
        let mut matches = Vec::with_capacity(list.len());
        for m in list {
            matches.extend(response_match(m, route)?);
        }
        Ok(response_match::Seq { matches })
    };
    let mut parts = Vec::new();
    if let Some(all) = &m.all {
        parts.push(response_match::Match::All(seq(all)?));
    }
    if let Some(any) = &m.any {
        parts.push(response_match::Match::Any(seq(any)?));
    }
    if let Some(range) = &m.status {
        let invalid = |v: u32| v != 0 && !(100..=599).contains(&v);
        if invalid(range.min) || invalid(range.max) || (range.max != 0 && range.max < range.min) {
            return Err(ProfileError::StatusRange {
                route: route.to_string(),
                min: range.min,
                max: range.max,
            });
        }
        parts.push(response_match::Match::Status(HttpStatusRange {
            min: range.min,
            max: range.max,
        }));
    }
    if let Some(not) = m.not.as_deref()
        && let Some(not) = response_match(not, route)?
    {
        parts.push(response_match::Match::Not(Box::new(not)));
    }
    Ok(combine(
        parts,
        |matches| response_match::Match::All(response_match::Seq { matches }),
        |m| ResponseMatch { r#match: Some(m) },
    ))
}

/// One part as is; several wrapped in `All`; none → `None`.
fn combine<P, M>(mut parts: Vec<P>, all: impl Fn(Vec<M>) -> P, wrap: impl Fn(P) -> M) -> Option<M> {
    match parts.len() {
        0 => None,
        1 => parts.pop().map(wrap),
        _ => Some(wrap(all(parts.into_iter().map(&wrap).collect()))),
    }
}

fn http_method(method: &str) -> HttpMethod {
    use http_method::Registered;
    let upper = method.to_ascii_uppercase();
    let registered = match upper.as_str() {
        "GET" => Some(Registered::Get),
        "POST" => Some(Registered::Post),
        "PUT" => Some(Registered::Put),
        "DELETE" => Some(Registered::Delete),
        "PATCH" => Some(Registered::Patch),
        "OPTIONS" => Some(Registered::Options),
        "CONNECT" => Some(Registered::Connect),
        "HEAD" => Some(Registered::Head),
        "TRACE" => Some(Registered::Trace),
        _ => None,
    };
    HttpMethod {
        r#type: Some(match registered {
            Some(r) => http_method::Type::Registered(r as i32),
            None => http_method::Type::Unregistered(upper),
        }),
    }
}

fn retry_budget(budget: &sp::RetryBudget) -> Result<RetryBudget, ProfileError> {
    let nanos = parse_go_duration(&budget.ttl).map_err(|e| ProfileError::RetryBudgetTtl {
        ttl: budget.ttl.clone(),
        reason: e.to_string(),
    })?;
    Ok(RetryBudget {
        retry_ratio: budget.retry_ratio,
        min_retries_per_second: budget.min_retries_per_second,
        ttl: Some(duration_from_nanos(nanos)),
    })
}

fn duration_from_nanos(nanos: i64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: nanos / 1_000_000_000,
        nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    }
}

/// A traffic-split destination: `:<port>` is appended to an authority
/// without one; the weight is the quantity's milli-value × 10 (`1` → 10000).
fn weighted_dst(dst: &sp::WeightedDst, port: u16) -> WeightedDst {
    let authority = if has_port(&dst.authority) {
        dst.authority.clone()
    } else {
        format!("{}:{port}", dst.authority)
    };
    WeightedDst {
        authority,
        weight: milli_value(&dst.weight.0).map_or(0, |m| {
            u32::try_from(m.saturating_mul(10)).unwrap_or(u32::MAX)
        }),
        backend_ref: None,
    }
}

fn has_port(authority: &str) -> bool {
    authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// The milli-value of a Kubernetes quantity (`1` → 1000, `500m` → 500,
/// `1k` → 1000000, `0.5` → 500), rounded up like Kubernetes does; `None` if
/// malformed or negative.
pub fn milli_value(quantity: &str) -> Option<u64> {
    let q = quantity.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let number = number.strip_prefix('+').unwrap_or(number);
    let value: f64 = number.parse().ok()?;
    let scale: f64 = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    let milli = value * scale * 1000.0;
    (milli.is_finite() && milli >= 0.0).then(|| milli.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ServiceId;
    use serde_json::json;

    fn target() -> ServiceTarget {
        ServiceTarget {
            service: ServiceId {
                namespace: "ns".into(),
                name: "web".into(),
            },
            port: 80,
            fqn: "web.ns.svc.cluster.local".into(),
        }
    }

    fn profile(spec: serde_json::Value) -> ServiceProfile {
        serde_json::from_value(json!({
            "apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
            "metadata": {"name": "web.ns.svc.cluster.local", "namespace": "ns"},
            "spec": spec
        }))
        .expect("profile")
    }

    #[test]
    fn the_default_profile_has_the_default_budget_and_references() {
        let p = service_profile(&target(), None, false).expect("profile");
        assert_eq!(p.fully_qualified_name, "web.ns.svc.cluster.local");
        assert!(p.routes.is_empty());
        assert_eq!(p.retry_budget, Some(default_retry_budget()));
        assert_eq!(
            p.parent_ref,
            Some(resource_metadata(Resource {
                group: "core".into(),
                kind: "Service".into(),
                name: "web".into(),
                namespace: "ns".into(),
                port: 80,
                ..Default::default()
            }))
        );
        assert_eq!(
            p.profile_ref,
            Some(resource_metadata(Resource {
                group: "linkerd.io".into(),
                ..Default::default()
            }))
        );
    }

    #[test]
    fn routes_budget_and_overrides_are_converted() {
        let sp = profile(json!({
            "routes": [{
                "name": "GET /books",
                "condition": {"method": "get", "pathRegex": "/books/\\d+"},
                "responseClasses": [{"condition": {"status": {"min": 500, "max": 599}}, "isFailure": true}],
                "isRetryable": true,
                "timeout": "1.5s"
            }, {
                "name": "custom",
                "condition": {"method": "PURGE"},
                "timeout": "bogus"
            }],
            "retryBudget": {"retryRatio": 0.5, "minRetriesPerSecond": 3, "ttl": "1m"},
            "dstOverrides": [
                {"authority": "web-v2.ns.svc.cluster.local", "weight": "500m"},
                {"authority": "web-v3.ns.svc.cluster.local:8080", "weight": "1"}
            ]
        }));
        let p = service_profile(&target(), Some(&sp), true).expect("profile");
        assert!(p.opaque_protocol);
        assert_eq!(p.routes.len(), 2);
        let first = &p.routes[0];
        assert_eq!(first.metrics_labels["route"], "GET /books");
        assert!(first.is_retryable);
        assert_eq!(
            first.timeout,
            Some(prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000
            })
        );
        let Some(request_match::Match::All(all)) =
            first.condition.as_ref().and_then(|c| c.r#match.clone())
        else {
            panic!("two fields are wrapped in All: {:?}", first.condition)
        };
        assert_eq!(all.matches.len(), 2);
        assert_eq!(
            all.matches[0].r#match,
            Some(request_match::Match::Method(HttpMethod {
                r#type: Some(http_method::Type::Registered(
                    http_method::Registered::Get as i32
                ))
            }))
        );
        assert_eq!(
            first.response_classes[0].condition,
            Some(ResponseMatch {
                r#match: Some(response_match::Match::Status(HttpStatusRange {
                    min: 500,
                    max: 599
                }))
            })
        );
        assert_eq!(p.routes[1].timeout, None, "a bad timeout is ignored");
        assert_eq!(
            p.routes[1]
                .condition
                .as_ref()
                .and_then(|c| c.r#match.clone()),
            Some(request_match::Match::Method(HttpMethod {
                r#type: Some(http_method::Type::Unregistered("PURGE".into()))
            }))
        );
        assert_eq!(
            p.retry_budget,
            Some(RetryBudget {
                retry_ratio: 0.5,
                min_retries_per_second: 3,
                ttl: Some(prost_types::Duration {
                    seconds: 60,
                    nanos: 0
                })
            })
        );
        let dsts: Vec<(&str, u32)> = p
            .dst_overrides
            .iter()
            .map(|d| (d.authority.as_str(), d.weight))
            .collect();
        assert_eq!(
            dsts,
            [
                ("web-v2.ns.svc.cluster.local:80", 5000),
                ("web-v3.ns.svc.cluster.local:8080", 10000)
            ]
        );
        let Some(metadata::Kind::Resource(r)) = p.profile_ref.and_then(|m| m.kind) else {
            panic!("profile_ref")
        };
        assert_eq!(
            (r.kind.as_str(), r.name.as_str()),
            ("ServiceProfile", "web.ns.svc.cluster.local")
        );
    }

    #[test]
    fn invalid_profiles_are_errors() {
        let empty = profile(json!({"routes": [{"name": "r", "condition": {}}]}));
        assert_eq!(
            service_profile(&target(), Some(&empty), false),
            Err(ProfileError::EmptyRequestMatch { route: "r".into() })
        );
        let ttl = profile(
            json!({"retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 1, "ttl": "x"}}),
        );
        assert!(matches!(
            service_profile(&target(), Some(&ttl), false),
            Err(ProfileError::RetryBudgetTtl { .. })
        ));
        let status = profile(
            json!({"routes": [{"name": "r", "condition": {"method": "GET"},
            "responseClasses": [{"condition": {"status": {"min": 600}}}]}]}),
        );
        assert!(matches!(
            service_profile(&target(), Some(&status), false),
            Err(ProfileError::StatusRange { .. })
        ));
    }

    #[test]
    fn quantities_convert_to_milli_values() {
        assert_eq!(milli_value("1"), Some(1000));
        assert_eq!(milli_value("500m"), Some(500));
        assert_eq!(milli_value("0.5"), Some(500));
        assert_eq!(milli_value("2k"), Some(2_000_000));
        assert_eq!(milli_value("1e2"), Some(100_000));
        assert_eq!(milli_value("-1"), None);
        assert_eq!(milli_value("abc"), None);
    }
}
