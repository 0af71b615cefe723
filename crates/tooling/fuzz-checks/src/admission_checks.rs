//! The webhooks' outside inputs: AdmissionReview bodies, ServiceProfiles
//! (structure-aware: generated objects with the CRD's field names) and
//! their `pathRegex` patterns.

use admission::{AdmissionReview, Validate};
use arbitrary::{Arbitrary, Result, Unstructured};
use serde_json::{Value, json};
use sp_validator::{ServiceProfileValidator, validate};

/// `AdmissionReview::parse`: an accepted review has a uid, re-serializes
/// and parses to the same review, is answered in its own version with its
/// uid, and both webhooks review it without panicking.
pub fn admission_review(data: &[u8]) {
    let Ok(review) = AdmissionReview::parse(data) else {
        return;
    };
    assert!(!review.request.uid.is_empty());
    let again = json!({
        "apiVersion": review.version.api_version(),
        "kind": "AdmissionReview",
        "request": review.request,
    });
    let bytes = serde_json::to_vec(&again).unwrap();
    let reparsed = AdmissionReview::parse(&bytes).unwrap();
    assert_eq!(reparsed, review);
    let answer = review
        .respond(ServiceProfileValidator.validate(&review.request))
        .to_review_json(review.version);
    assert_eq!(answer["apiVersion"], review.version.api_version());
    assert_eq!(answer["response"]["uid"], review.request.uid.as_str());
    let policy = policy_controller::webhook::PolicyValidator::new(Default::default());
    let verdict = policy.review(&review.request);
    let answer = review.respond_with(verdict).to_review_json(review.version);
    assert_eq!(answer["response"]["uid"], review.request.uid.as_str());
}

/// Strings likely to matter in a profile, or any string.
fn pick(u: &mut Unstructured<'_>, choices: &[&str]) -> Result<String> {
    if u.ratio(3, 4)? {
        Ok((*u.choose(choices)?).to_string())
    } else {
        String::arbitrary(u)
    }
}

fn maybe(
    u: &mut Unstructured<'_>,
    object: &mut serde_json::Map<String, Value>,
    key: &str,
    value: impl FnOnce(&mut Unstructured<'_>) -> Result<Value>,
) -> Result<()> {
    if u.arbitrary()? {
        object.insert(key.into(), value(u)?);
    }
    Ok(())
}

/// A field the CRD schema requires: the apiserver refuses an object
/// without it before any webhook sees it.
fn always(
    u: &mut Unstructured<'_>,
    object: &mut serde_json::Map<String, Value>,
    key: &str,
    value: impl FnOnce(&mut Unstructured<'_>) -> Result<Value>,
) -> Result<()> {
    object.insert(key.into(), value(u)?);
    Ok(())
}

fn list(
    u: &mut Unstructured<'_>,
    max: u32,
    mut item: impl FnMut(&mut Unstructured<'_>) -> Result<Value>,
) -> Result<Value> {
    let n = u.int_in_range(0..=max)?;
    (0..n)
        .map(|_| item(u))
        .collect::<Result<Vec<_>>>()
        .map(Value::Array)
}

const REGEXES: &[&str] = &[
    "/books/[^/]+",
    "/a",
    ".*",
    "^/x$",
    "(",
    "[z-a]",
    "/\\d+",
    "\\pL",
    "(?i)GET",
    "",
];

fn request_match(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let mut m = serde_json::Map::new();
    maybe(u, &mut m, "method", |u| {
        pick(u, &["GET", "POST", "", "get"]).map(Value::from)
    })?;
    maybe(u, &mut m, "pathRegex", |u| {
        pick(u, REGEXES).map(Value::from)
    })?;
    if depth < 3 {
        maybe(u, &mut m, "all", |u| {
            list(u, 2, |u| request_match(u, depth + 1))
        })?;
        maybe(u, &mut m, "any", |u| {
            list(u, 2, |u| request_match(u, depth + 1))
        })?;
        maybe(u, &mut m, "not", |u| request_match(u, depth + 1))?;
    }
    Ok(Value::Object(m))
}

fn number(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => json!(u.int_in_range(0..=700u32)?),
        1 => json!(u32::arbitrary(u)?),
        2 => json!(i64::arbitrary(u)?),
        _ => json!(float(u)?),
    })
}

/// A finite float (JSON has no NaN or infinity).
fn float(u: &mut Unstructured<'_>) -> Result<f64> {
    let f = f64::from(f32::arbitrary(u)?);
    Ok(if f.is_finite() { f } else { 0.0 })
}

fn response_match(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let mut m = serde_json::Map::new();
    maybe(u, &mut m, "status", |u| {
        let mut range = serde_json::Map::new();
        maybe(u, &mut range, "min", number)?;
        maybe(u, &mut range, "max", number)?;
        Ok(Value::Object(range))
    })?;
    if depth < 3 {
        maybe(u, &mut m, "all", |u| {
            list(u, 2, |u| response_match(u, depth + 1))
        })?;
        maybe(u, &mut m, "any", |u| {
            list(u, 2, |u| response_match(u, depth + 1))
        })?;
        maybe(u, &mut m, "not", |u| response_match(u, depth + 1))?;
    }
    Ok(Value::Object(m))
}

const DURATIONS: &[&str] = &["1s", "500ms", "10s", "0", "-1s", "1h2m", "x", "", "1.5s"];
const QUANTITIES: &[&str] = &[
    "1", "500m", "0", "1k", "1.5", "100", "-1", "1P", "1Ei", "x", "",
];

fn route(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut r = serde_json::Map::new();
    always(u, &mut r, "name", |u| {
        pick(u, &["GET /books", "r", ""]).map(Value::from)
    })?;
    always(u, &mut r, "condition", |u| request_match(u, 0))?;
    maybe(u, &mut r, "responseClasses", |u| {
        list(u, 2, |u| {
            let mut c = serde_json::Map::new();
            always(u, &mut c, "condition", |u| response_match(u, 0))?;
            maybe(u, &mut c, "isFailure", |u| {
                Ok(Value::from(bool::arbitrary(u)?))
            })?;
            Ok(Value::Object(c))
        })
    })?;
    maybe(u, &mut r, "isRetryable", |u| {
        Ok(Value::from(bool::arbitrary(u)?))
    })?;
    maybe(u, &mut r, "timeout", |u| {
        pick(u, DURATIONS).map(Value::from)
    })?;
    Ok(Value::Object(r))
}

/// A ServiceProfile with the CRD's field names and fuzzed values; the
/// fields `deploy/crds/serviceprofiles.yaml` requires are always there.
fn service_profile_object(u: &mut Unstructured<'_>) -> Result<Value> {
    let name = pick(
        u,
        &["web.ns.svc.cluster.local", "web", "Web_1", "a.b", "1.2.3.4"],
    )?;
    let mut spec = serde_json::Map::new();
    maybe(u, &mut spec, "routes", |u| list(u, 3, route))?;
    maybe(u, &mut spec, "retryBudget", |u| {
        let mut b = serde_json::Map::new();
        always(u, &mut b, "retryRatio", |u| Ok(json!(float(u)?)))?;
        always(u, &mut b, "minRetriesPerSecond", number)?;
        always(u, &mut b, "ttl", |u| pick(u, DURATIONS).map(Value::from))?;
        Ok(Value::Object(b))
    })?;
    maybe(u, &mut spec, "dstOverrides", |u| {
        list(u, 3, |u| {
            let mut d = serde_json::Map::new();
            always(u, &mut d, "authority", |u| {
                pick(
                    u,
                    &["web.ns.svc.cluster.local:80", "web", "[::1]:80", "a:0", ""],
                )
                .map(Value::from)
            })?;
            always(u, &mut d, "weight", |u| {
                Ok(if u.arbitrary()? {
                    Value::from(pick(u, QUANTITIES)?)
                } else {
                    number(u)?
                })
            })?;
            Ok(Value::Object(d))
        })
    })?;
    Ok(json!({
        "apiVersion": "linkerd.io/v1alpha2",
        "kind": "ServiceProfile",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }))
}

/// ServiceProfile validation, from generated profiles (first byte even) or
/// raw JSON. A generated profile (which has the fields the CRD requires,
/// as every object the webhook sees does) that the sp-validator admits,
/// the destination reads: it deserializes as `k8s_api::ServiceProfile`
/// and converts to rules.
pub fn service_profile(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let object = if mode % 2 == 0 {
        match service_profile_object(&mut Unstructured::new(rest)) {
            Ok(object) => object,
            Err(_) => return,
        }
    } else {
        match serde_json::from_slice::<Value>(rest) {
            Ok(object) => object,
            Err(_) => return,
        }
    };
    let verdict = validate::validate(&object);
    if verdict.is_ok() && mode % 2 == 0 {
        let profile: k8s_api::service_profile::ServiceProfile =
            serde_json::from_value(object.clone())
                .unwrap_or_else(|e| panic!("admitted but unreadable: {e}: {object}"));
        if let Err(error) = destination::k8s::profiles::profile_rules(&profile, 80) {
            panic!("admitted but refused by the destination: {error}: {object}");
        }
    }
}

/// The sp-validator's `pathRegex` check accepts exactly what
/// `regex::Regex::new` compiles (the proxy's own check).
pub fn sp_regex(data: &[u8]) {
    let Some(pattern) = crate::text(data) else {
        return;
    };
    if pattern.len() > 256 {
        return;
    }
    let ours = validate::check_regex(pattern);
    let theirs = regex::Regex::new(pattern);
    assert_eq!(
        ours.is_ok(),
        theirs.is_ok(),
        "{pattern:?}: check_regex {ours:?}, Regex::new {theirs:?}"
    );
}
