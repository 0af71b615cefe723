//! Profile rules → `DestinationProfile`: routes and their request and
//! response matches, route metric labels, retryability, timeouts, the retry
//! budget, traffic-split overrides, opaque protocol and the parent/profile
//! references; and the endpoint profiles of single addresses. Pure
//! functions; the index decides which rules apply and publishes the result.

use std::{collections::HashMap, net::SocketAddr, sync::Arc};

use linkerd2_proxy_api::{
    destination::{
        DestinationProfile, HttpStatusRange, PathMatch, RequestMatch, ResponseClass, ResponseMatch,
        RetryBudget, Route, WeightedAddr, WeightedDst, request_match, response_match,
    },
    http_types::{HttpMethod, http_method},
    meta::{Metadata, Resource, metadata},
};

use super::frames::Frames;
use super::weighted_addr::{OwnerCase, bare_addr, endpoint_addr, fill_external};
use crate::config::TranslatorConfig;
use crate::core::{
    ServiceTarget,
    endpoint::{Endpoint, Workload},
    profile::{self as rules, ProfileRules},
};

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

/// The profile of a Service port. `rules` are those of the ServiceProfile
/// that applies (client namespace first, then the Service's), if any;
/// `opaque` says whether the port is in the Service's opaque set.
pub fn service_profile(
    target: &ServiceTarget,
    rules: Option<&ProfileRules>,
    opaque: bool,
) -> DestinationProfile {
    let routes = rules
        .map(|r| r.routes.iter().map(route).collect())
        .unwrap_or_default();
    let retry_budget = rules
        .and_then(|r| r.retry_budget.as_ref())
        .map_or_else(default_retry_budget, retry_budget);
    let dst_overrides = rules
        .map(|r| r.dst_overrides.iter().map(weighted_dst).collect())
        .unwrap_or_default();
    // The original's `kind` is the ServiceProfile object's own TypeMeta
    // kind, which client-go's informers leave empty on the objects they
    // decode: every proxy sees `""` there, profiled or not.
    let profile_ref = Resource {
        group: "linkerd.io".into(),
        kind: String::new(),
        name: rules.map(|r| r.source.1.clone()).unwrap_or_default(),
        namespace: rules.map(|r| r.source.0.clone()).unwrap_or_default(),
        ..Default::default()
    };
    DestinationProfile {
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
    }
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
    /// Incremented on every published change (0 for the first profile).
    pub version: u64,
    /// The profile.
    pub profile: DestinationProfile,
    /// Its encoded frame (just one), shared by every stream that follows it:
    /// a stream sends it as a `Get` stream sends a group's step.
    pub frames: Frames,
}

impl ProfileState {
    /// Encodes `profile` once, as the publisher's `version`.
    pub fn new(version: u64, profile: Profile) -> Arc<Self> {
        let frames = Frames::from([super::frames::profile(&profile.0)]);
        Arc::new(Self {
            version,
            profile: profile.0,
            frames,
        })
    }

    /// A publisher with nothing to send yet (its first profile could not
    /// be made: an unusable ServiceProfile, a pod whose proxy ports cannot
    /// be read): its streams send nothing until a profile can be made, as
    /// the original's drop such an update and send nothing.
    pub fn nothing_yet() -> Arc<Self> {
        Arc::new(Self {
            version: 0,
            profile: DestinationProfile::default(),
            frames: Frames::from(Vec::new()),
        })
    }

    /// Whether this state publishes `profile`.
    pub fn publishes(&self, profile: &Profile) -> bool {
        !self.frames.is_empty() && self.profile == profile.0
    }
}

/// The profile of a Service port (see [`service_profile`]).
pub fn service(target: &ServiceTarget, rules: Option<&ProfileRules>, opaque: bool) -> Profile {
    Profile(service_profile(target, rules, opaque))
}

/// The endpoint profile of a pod's or ExternalWorkload's address: its
/// `WeightedAddr` with a `namespace` label. A pod's is the one `Get` sends
/// less `zone_locality` (the original adds that on `Get`'s path only); a
/// workload's is built as the original's profile path builds it (owner
/// kind as written).
///
/// `None` when a pod's proxy ports cannot be read: the original logs it and
/// sends nothing (a stream keeps what it had, a new one waits).
pub fn workload_endpoint(
    endpoint: &Endpoint,
    cfg: &TranslatorConfig,
    opaque: bool,
) -> Option<Profile> {
    let addr = match &endpoint.workload {
        Workload::Pod(pod) => match endpoint_addr(endpoint, cfg) {
            Ok(mut wa) => {
                wa.metric_labels
                    .insert("namespace".to_string(), pod.namespace.to_string());
                wa
            }
            Err(error) => {
                tracing::error!(addr = %endpoint.addr, %error, "failed to create the endpoint: no profile sent");
                return None;
            }
        },
        Workload::External(ew) => {
            let mut wa = bare_addr(endpoint.addr);
            fill_external(&mut wa, endpoint, ew, OwnerCase::AsWritten, cfg);
            wa.metric_labels
                .insert("namespace".to_string(), ew.namespace.clone());
            wa
        }
        Workload::Gateway(_) => bare_addr(endpoint.addr),
    };
    Some(Profile(endpoint_profile(addr, opaque)))
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

fn route(rule: &rules::RouteRule) -> Route {
    Route {
        condition: Some(request_match(&rule.condition)),
        response_classes: rule
            .response_classes
            .iter()
            .map(|class| ResponseClass {
                condition: Some(response_match(&class.condition)),
                is_failure: class.is_failure,
            })
            .collect(),
        metrics_labels: HashMap::from([("route".to_string(), rule.name.clone())]),
        is_retryable: rule.is_retryable,
        timeout: rule.timeout_nanos.map(duration_from_nanos),
    }
}

fn request_match(m: &rules::RequestMatch) -> RequestMatch {
    use request_match::{Match, Seq};
    let seq = |list: &[rules::RequestMatch]| Seq {
        matches: list.iter().map(request_match).collect(),
    };
    let m = match m {
        rules::RequestMatch::All(all) => Match::All(seq(all)),
        rules::RequestMatch::Any(any) => Match::Any(seq(any)),
        rules::RequestMatch::Method(method) => Match::Method(http_method(method)),
        rules::RequestMatch::Not(not) => Match::Not(Box::new(request_match(not))),
        rules::RequestMatch::Path(regex) => Match::Path(PathMatch {
            regex: regex.clone(),
        }),
    };
    RequestMatch { r#match: Some(m) }
}

fn response_match(m: &rules::ResponseMatch) -> ResponseMatch {
    use response_match::{Match, Seq};
    let seq = |list: &[rules::ResponseMatch]| Seq {
        matches: list.iter().map(response_match).collect(),
    };
    let m = match m {
        rules::ResponseMatch::All(all) => Match::All(seq(all)),
        rules::ResponseMatch::Any(any) => Match::Any(seq(any)),
        rules::ResponseMatch::Status { min, max } => Match::Status(HttpStatusRange {
            min: *min,
            max: *max,
        }),
        rules::ResponseMatch::Not(not) => Match::Not(Box::new(response_match(not))),
    };
    ResponseMatch { r#match: Some(m) }
}

/// A method (already upper-cased): registered if the proxy API names it.
fn http_method(method: &str) -> HttpMethod {
    use http_method::Registered;
    let registered = match method {
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
            None => http_method::Type::Unregistered(method.to_string()),
        }),
    }
}

fn retry_budget(budget: &rules::RetryBudget) -> RetryBudget {
    RetryBudget {
        retry_ratio: budget.retry_ratio,
        min_retries_per_second: budget.min_retries_per_second,
        ttl: Some(duration_from_nanos(budget.ttl_nanos)),
    }
}

fn duration_from_nanos(nanos: i64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: nanos / 1_000_000_000,
        nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    }
}

fn weighted_dst(dst: &rules::WeightedDst) -> WeightedDst {
    WeightedDst {
        authority: dst.authority.clone(),
        weight: dst.weight,
        backend_ref: None,
    }
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

    use crate::k8s::fixtures::service_profile as profile;

    #[test]
    fn the_default_profile_has_the_default_budget_and_references() {
        let p = service_profile(&target(), None, false);
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
        let rules = crate::k8s::profiles::profile_rules(&sp, 80).expect("valid profile");
        let p = service_profile(&target(), Some(&rules), true);
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
            (r.group.as_str(), r.kind.as_str(), r.name.as_str()),
            ("linkerd.io", "", "web.ns.svc.cluster.local")
        );
    }
}
