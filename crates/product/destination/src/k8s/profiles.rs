//! ServiceProfile → [`ProfileRules`]: the routes, retry budget and traffic
//! split it gives one Service port, validated as the original does (an
//! invalid profile is an error and the stream keeps its previous profile;
//! an invalid route timeout is only ignored).

use k8s_api::{
    go_duration::parse_go_duration,
    service_profile::{self as sp, ServiceProfile},
};

use crate::core::profile::{
    ProfileRules, RequestMatch, ResponseClass, ResponseMatch, RetryBudget, RouteRule, WeightedDst,
};

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

/// The rules `profile` gives the Service port `port`.
pub fn profile_rules(profile: &ServiceProfile, port: u16) -> Result<ProfileRules, ProfileError> {
    let spec = &profile.spec;
    Ok(ProfileRules {
        source: (
            profile.metadata.namespace.clone().unwrap_or_default(),
            profile.metadata.name.clone().unwrap_or_default(),
        ),
        routes: spec.routes.iter().map(route).collect::<Result<_, _>>()?,
        retry_budget: spec.retry_budget.as_ref().map(retry_budget).transpose()?,
        dst_overrides: spec
            .dst_overrides
            .iter()
            .map(|dst| weighted_dst(dst, port))
            .collect(),
    })
}

fn route(spec: &sp::RouteSpec) -> Result<RouteRule, ProfileError> {
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
                condition,
                is_failure: class.is_failure,
            })
        })
        .collect::<Result<Vec<_>, ProfileError>>()?;
    let timeout = spec
        .timeout
        .as_deref()
        .filter(|t| !t.is_empty())
        .and_then(|t| match parse_go_duration(t) {
            Ok(nanos) => Some(nanos),
            Err(error) => {
                tracing::warn!(route = %spec.name, %error, "ignoring an invalid route timeout");
                None
            }
        });
    Ok(RouteRule {
        name: spec.name.clone(),
        condition,
        response_classes,
        is_retryable: spec.is_retryable,
        timeout_nanos: timeout,
    })
}

/// A request match; `None` when no field is set. Several fields are
/// combined with `All`, in the order all, any, method, not, pathRegex.
fn request_match(m: &sp::RequestMatch) -> Option<RequestMatch> {
    let mut parts = Vec::new();
    if let Some(all) = &m.all {
        parts.push(RequestMatch::All(
            all.iter().filter_map(request_match).collect(),
        ));
    }
    if let Some(any) = &m.any {
        parts.push(RequestMatch::Any(
            any.iter().filter_map(request_match).collect(),
        ));
    }
    if let Some(method) = m.method.as_deref().filter(|s| !s.is_empty()) {
        parts.push(RequestMatch::Method(method.to_ascii_uppercase()));
    }
    if let Some(not) = m.not.as_deref().and_then(request_match) {
        parts.push(RequestMatch::Not(Box::new(not)));
    }
    if let Some(regex) = m.path_regex.as_deref().filter(|s| !s.is_empty()) {
        parts.push(RequestMatch::Path(regex.to_string()));
    }
    combine(parts, RequestMatch::All)
}

/// A response match; `None` when no field is set. Fields in the order
/// all, any, status, not.
fn response_match(
    m: &sp::ResponseMatch,
    route: &str,
) -> Result<Option<ResponseMatch>, ProfileError> {
    // The set matches of a list, leaving out elements with no field set.
    let seq = |list: &[sp::ResponseMatch]| -> Result<Vec<ResponseMatch>, ProfileError> {
        let mut matches = Vec::with_capacity(list.len());
        for m in list {
            matches.extend(response_match(m, route)?);
        }
        Ok(matches)
    };
    let mut parts = Vec::new();
    if let Some(all) = &m.all {
        parts.push(ResponseMatch::All(seq(all)?));
    }
    if let Some(any) = &m.any {
        parts.push(ResponseMatch::Any(seq(any)?));
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
        parts.push(ResponseMatch::Status {
            min: range.min,
            max: range.max,
        });
    }
    if let Some(not) = m.not.as_deref()
        && let Some(not) = response_match(not, route)?
    {
        parts.push(ResponseMatch::Not(Box::new(not)));
    }
    Ok(combine(parts, ResponseMatch::All))
}

/// One part as is; several wrapped in `All`; none → `None`.
fn combine<M>(mut parts: Vec<M>, all: impl Fn(Vec<M>) -> M) -> Option<M> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(all(parts)),
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
        ttl_nanos: nanos,
    })
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
    }
}

fn has_port(authority: &str) -> bool {
    authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}
/// The milli-value of a Kubernetes quantity (`1` → 1000, `500m` → 500,
/// `1k` → 1000000, `0.5` → 500, `1Ki` → 1024000), computed exactly and
/// rounded up like Kubernetes' `MilliValue` (`1n` → 1), saturating at
/// `u64::MAX`; `None` if malformed or negative. Accepts exactly what the
/// sp-validator admits: every suffix (`n`, `u`, `m`, `k`, `M`, `G`, `T`,
/// `P`, `E`, `Ki`…`Ei`, `e<exp>`/`E<exp>`) and a sign.
pub fn milli_value(quantity: &str) -> Option<u64> {
    let q = quantity.trim();
    let (negative, unsigned) = match q.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let (exp10, exp2) = quantity_suffix(suffix)?;
    // value × 1000 = digits × 10^exp10 × 2^exp2
    let exp10 = exp10.saturating_add(3 - i64::try_from(frac.len()).ok()?);
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
    let Some(first) = digits.iter().position(|&d| d != 0) else {
        return Some(0); // zero, `-0` included
    };
    if negative {
        return None;
    }
    let digits = &digits[first..];
    // Where the decimal point falls in `digits`.
    let point = i64::try_from(digits.len()).ok()?.saturating_add(exp10);
    if point > 21 {
        return Some(u64::MAX); // at least 10^21
    }
    if point < -25 {
        return Some(1); // below 10^-25 × 2^60 < 1
    }
    let mut whole: u128 = 0;
    let mut fraction: Vec<u8> = Vec::new();
    for i in 0..point.max(0) {
        let d = usize::try_from(i).ok().and_then(|i| digits.get(i));
        whole = whole * 10 + u128::from(d.copied().unwrap_or(0));
    }
    fraction.extend(std::iter::repeat_n(0, usize::try_from(-point).unwrap_or(0)));
    fraction.extend(digits.iter().skip(usize::try_from(point).unwrap_or(0)));
    // Multiply the fraction by 2^exp2, doubling its decimal digits.
    for _ in 0..exp2 {
        let mut carry = 0;
        for d in fraction.iter_mut().rev() {
            let doubled = *d * 2 + carry;
            (*d, carry) = (doubled % 10, doubled / 10);
        }
        whole = whole.saturating_mul(2).saturating_add(u128::from(carry));
    }
    let round_up = u128::from(fraction.iter().any(|&d| d != 0));
    Some(u64::try_from(whole.saturating_add(round_up)).unwrap_or(u64::MAX))
}

/// A quantity suffix as (power of ten, power of two); `None` if unknown.
fn quantity_suffix(suffix: &str) -> Option<(i64, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let (negative, digits) = match exp.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, exp.strip_prefix('+').unwrap_or(exp)),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Any exponent past ±10^18 means "saturated" or "rounds to 1".
            let magnitude = digits.parse::<i64>().unwrap_or(i64::MAX / 2);
            (if negative { -magnitude } else { magnitude }, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::k8s::fixtures::service_profile as profile;

    #[test]
    fn invalid_profiles_are_errors() {
        let empty = profile(json!({"routes": [{"name": "r", "condition": {}}]}));
        assert_eq!(
            profile_rules(&empty, 80),
            Err(ProfileError::EmptyRequestMatch { route: "r".into() })
        );
        let ttl = profile(
            json!({"retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 1, "ttl": "x"}}),
        );
        assert!(matches!(
            profile_rules(&ttl, 80),
            Err(ProfileError::RetryBudgetTtl { .. })
        ));
        let status = profile(
            json!({"routes": [{"name": "r", "condition": {"method": "GET"},
            "responseClasses": [{"condition": {"status": {"min": 600}}}]}]}),
        );
        assert!(matches!(
            profile_rules(&status, 80),
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

    /// Found while writing the `quantity` fuzz target (and confirmed on the
    /// old float code): suffixes the sp-validator admits (`P`, `E`, `Ti`,
    /// `Pi`, `Ei`, `n`, `u`, `-0`) gave weight 0, and float error rounded
    /// 80 of the 10,000 weights `0.000`..`9.999` up by one (`2.007` → 2008).
    #[test]
    fn every_admitted_suffix_has_its_exact_milli_value() {
        assert_eq!(milli_value("1P"), Some(1_000_000_000_000_000_000));
        assert_eq!(milli_value("1Ti"), Some(1_099_511_627_776_000));
        assert_eq!(milli_value("1Ei"), Some(u64::MAX));
        assert_eq!(milli_value("1n"), Some(1));
        assert_eq!(milli_value("3u"), Some(1));
        assert_eq!(milli_value("1.5Ki"), Some(1_536_000));
        assert_eq!(milli_value("0.001Ki"), Some(1_024));
        assert_eq!(milli_value("-0"), Some(0));
        assert_eq!(milli_value("1e-3"), Some(1));
        assert_eq!(milli_value("1e99999999999999999999"), Some(u64::MAX));
        assert_eq!(milli_value("1e-99999999999999999999"), Some(1));
        assert_eq!(milli_value("2.007"), Some(2_007));
        assert_eq!(milli_value("2.015"), Some(2_015));
        assert_eq!(milli_value("1.2.3"), None);
        assert_eq!(milli_value("1+2"), None);
        assert_eq!(milli_value("."), None);
    }
}
