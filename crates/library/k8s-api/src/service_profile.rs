//! The `ServiceProfile` custom resource (`linkerd.io/v1alpha2`, short name
//! `sp`): per-service routes, response classification, retries, timeouts and
//! traffic-split overrides.
//!
//! These are the types the destination's `GetProfile` reads. They are lenient
//! by design (unknown fields are ignored, durations stay strings): rejecting
//! malformed profiles is the job of the `sp-validator` admission webhook,
//! which decodes `request.object` strictly on its own.
//!
//! `v1alpha1` has the same schema except that `spec.routes` is required; the
//! apiserver serves both from the same storage without conversion, so a
//! `v1alpha1` object deserializes into these types as well.
//!
//! The recursive condition fields (`all`, `any`, `not`) are declared in the
//! CRD as objects that preserve unknown fields, so their schema here is
//! written by hand rather than derived (a derived schema would need `$ref`,
//! which structural CRD schemas do not allow).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The spec of a `ServiceProfile`, named after the service it describes
/// (`<svc>.<ns>.svc.<cluster-domain>`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "linkerd.io",
    version = "v1alpha2",
    kind = "ServiceProfile",
    plural = "serviceprofiles",
    shortname = "sp",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceProfileSpec {
    /// Routes, matched in order; the first route whose condition matches a
    /// request classifies it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteSpec>,

    /// How many retries the proxy may add on top of the original requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<RetryBudget>,

    /// Alternative destinations to split traffic to, by weight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dst_overrides: Vec<WeightedDst>,

    /// Ports (or ranges such as `"4000-4100"`) whose traffic is opaque TCP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque_ports: Vec<String>,
}

/// One route: a named request condition plus what to do with matching
/// requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// The route's name, used as the `rt_route` metric label.
    pub name: String,

    /// Which requests belong to this route.
    pub condition: RequestMatch,

    /// How responses to this route are classified, first match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub response_classes: Vec<ResponseClass>,

    /// Whether failed requests on this route may be retried.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_retryable: bool,

    /// The request timeout, in Go duration syntax (`"500ms"`, `"1m30s"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A condition on requests. Every field that is set must match; an empty
/// match is invalid (the webhook rejects it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestMatch {
    /// Matches when every condition matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object_array")]
    pub all: Option<Vec<RequestMatch>>,

    /// Matches when at least one condition matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object_array")]
    pub any: Option<Vec<RequestMatch>>,

    /// Matches the HTTP method (`GET`, `POST`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,

    /// Matches when the inner condition does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object")]
    pub not: Option<Box<RequestMatch>>,

    /// Matches the request path against a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_regex: Option<String>,
}

/// A response class: responses matching `condition` are failures when
/// `isFailure` is set (and successes otherwise).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResponseClass {
    /// Which responses belong to this class.
    pub condition: ResponseMatch,

    /// Whether responses of this class count as failures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_failure: bool,
}

/// A condition on responses. Every field that is set must match.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResponseMatch {
    /// Matches when every condition matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object_array")]
    pub all: Option<Vec<ResponseMatch>>,

    /// Matches when at least one condition matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object_array")]
    pub any: Option<Vec<ResponseMatch>>,

    /// Matches the HTTP status code against an inclusive range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Range>,

    /// Matches when the inner condition does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserved_object")]
    pub not: Option<Box<ResponseMatch>>,
}

/// An inclusive range of status codes; `0` (or absent) means unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Range {
    /// Lowest matching status, 100-599.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min: u32,
    /// Highest matching status, 100-599.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max: u32,
}

/// A retry budget: retries may add at most `retryRatio` of the original
/// request rate (over a `ttl` window), plus `minRetriesPerSecond`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryBudget {
    /// Extra load retries may add, as a ratio of original requests (`0.2`).
    pub retry_ratio: f32,
    /// Retries always allowed per second, regardless of the ratio.
    pub min_retries_per_second: u32,
    /// The window over which requests are counted, in Go duration syntax.
    pub ttl: String,
}

/// A weighted alternative destination (traffic split).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightedDst {
    /// `host` or `host:port` of the destination.
    pub authority: String,
    /// The relative weight, a Kubernetes quantity (`1`, `500m`).
    #[schemars(schema_with = "quantity")]
    pub weight: Quantity,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An array of objects whose content the apiserver keeps as is.
fn preserved_object_array(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// An object whose content the apiserver keeps as is.
fn preserved_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A Kubernetes quantity: an integer or a string in quantity syntax.
fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [{ "type": "integer" }, { "type": "string" }],
        "x-kubernetes-int-or-string": true,
        "pattern": QUANTITY_PATTERN,
    })
}

/// The syntax of a Kubernetes quantity, as the apiserver checks it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

impl ServiceProfile {
    /// The CRD's name.
    pub const CRD_NAME: &'static str = "serviceprofiles.linkerd.io";
}

impl RequestMatch {
    /// A short description used in logs.
    pub fn describe(&self) -> Cow<'static, str> {
        match (&self.method, &self.path_regex) {
            (Some(m), Some(p)) => format!("{m} {p}").into(),
            (None, Some(p)) => p.clone().into(),
            (Some(m), None) => m.clone().into(),
            (None, None) => "compound condition".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_full_profile() {
        let profile: ServiceProfile = serde_json::from_value(serde_json::json!({
            "apiVersion": "linkerd.io/v1alpha2",
            "kind": "ServiceProfile",
            "metadata": {"name": "books.default.svc.cluster.local", "namespace": "default"},
            "spec": {
                "routes": [{
                    "name": "GET /books/{id}",
                    "condition": {
                        "method": "GET",
                        "pathRegex": "/books/[^/]*",
                        "not": {"any": [{"method": "HEAD"}]},
                    },
                    "responseClasses": [{
                        "condition": {"status": {"min": 500, "max": 599}, "not": {"status": {"min": 501}}},
                        "isFailure": true,
                    }],
                    "isRetryable": true,
                    "timeout": "300ms",
                }],
                "retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 10, "ttl": "10s"},
                "dstOverrides": [{"authority": "books-v2.default.svc.cluster.local:8080", "weight": 1}],
                "opaquePorts": ["3306"],
            },
        }))
        .expect("profile");
        let route = &profile.spec.routes[0];
        assert_eq!(route.condition.method.as_deref(), Some("GET"));
        let not = route.condition.not.as_ref().expect("not");
        assert_eq!(not.any.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            route.response_classes[0].condition.status,
            Some(Range { min: 500, max: 599 })
        );
        assert_eq!(route.timeout.as_deref(), Some("300ms"));
        let budget = profile.spec.retry_budget.as_ref().expect("budget");
        assert_eq!(budget.min_retries_per_second, 10);
        assert_eq!(profile.spec.dst_overrides[0].weight, Quantity("1".into()));
        assert_eq!(route.condition.describe(), "GET /books/[^/]*");

        // Serialization round-trips and omits unset fields.
        let json = serde_json::to_value(&profile).expect("serialize");
        assert!(json["spec"]["routes"][0]["condition"].get("all").is_none());
        let again: ServiceProfile = serde_json::from_value(json).expect("round trip");
        assert_eq!(again.spec, profile.spec);
    }

    #[test]
    fn routes_are_optional_in_v1alpha2() {
        let spec: ServiceProfileSpec = serde_json::from_str("{}").expect("empty spec");
        assert_eq!(spec, ServiceProfileSpec::default());
    }
}
