//! The annotations that tune outbound policy, on Services and routes:
//! `timeout.linkerd.io/*`, `retry.linkerd.io/*` and (Services only)
//! `balancer.linkerd.io/failure-accrual*` and the `balancer.alpha.linkerd.io`
//! success-rate, penalty and `Retry-After` settings. Values follow the original's
//! syntax: durations are a whole number with `ms`, `s`, `m`, `h` or `d`
//! (or a bare `0`).

use std::{collections::BTreeMap, time::Duration};

use k8s_api::labels;

use crate::core::outbound::{
    Backoff, FailureAccrual, GrpcRetryCondition, HttpRetryCondition, LoadBiaser, RouteRetry,
    RouteTimeouts, SuccessRate,
};

/// Object annotations.
pub type Annotations = BTreeMap<String, String>;

/// Why an annotation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAnnotation {
    #[error("{key}: {reason}")]
    Value { key: &'static str, reason: String },
    #[error("unsupported failure accrual mode {0:?}")]
    AccrualMode(String),
}

fn invalid(key: &'static str, reason: impl Into<String>) -> InvalidAnnotation {
    InvalidAnnotation::Value {
        key,
        reason: reason.into(),
    }
}

/// Parses `<n>ms|s|m|h|d` (or `0`); fractions and negatives are refused.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let s = value.trim();
    if s.starts_with('-') {
        return Err(format!("duration {s:?} is negative"));
    }
    let split = s
        .rfind(|c: char| c.is_ascii_digit())
        .ok_or_else(|| format!("{s:?} is not a duration"))?;
    let (magnitude, unit) = s.split_at(split + 1);
    if magnitude.contains('.') {
        return Err(format!("{s:?}: fractional durations are not supported"));
    }
    let magnitude: u64 = magnitude
        .parse()
        .map_err(|_| format!("{s:?} is not a duration"))?;
    let millis_per_unit: u64 = match unit {
        "" if magnitude == 0 => 0,
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "" => return Err(format!("{s:?} has no unit (ms, s, m, h or d)")),
        other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h or d)")),
    };
    magnitude
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} overflows"))
}

fn duration(
    annotations: &Annotations,
    key: &'static str,
) -> Result<Option<Duration>, InvalidAnnotation> {
    annotations
        .get(key)
        .map(|v| parse_duration(v).map_err(|e| invalid(key, e)))
        .transpose()
}

/// `timeout.linkerd.io/{request,response,idle}`.
pub fn timeouts(annotations: &Annotations) -> Result<RouteTimeouts, InvalidAnnotation> {
    Ok(RouteTimeouts {
        response: duration(annotations, labels::TIMEOUT_RESPONSE)?,
        request: duration(annotations, labels::TIMEOUT_REQUEST)?,
        idle: duration(annotations, labels::TIMEOUT_IDLE)?,
    })
}

/// `retry.linkerd.io/{limit,timeout}` and the conditions of `key`, parsed
/// by `condition`. No annotation at all: no retries. A limit of `0` or a
/// timeout of `0` count as unset; an unset limit is 1.
fn retry<C>(
    annotations: &Annotations,
    key: &'static str,
    condition: impl Fn(&str) -> Option<C>,
) -> Result<Option<RouteRetry<C>>, InvalidAnnotation> {
    let limit = annotations
        .get(labels::RETRY_LIMIT)
        .map(|v| {
            v.trim()
                .parse::<u16>()
                .map_err(|e| invalid(labels::RETRY_LIMIT, e.to_string()))
        })
        .transpose()?
        .filter(|n| *n != 0);
    let timeout = duration(annotations, labels::RETRY_TIMEOUT)?.filter(|d| !d.is_zero());
    let conditions = annotations
        .get(key)
        .map(|v| {
            v.split(',')
                .map(|c| {
                    condition(c.trim())
                        .ok_or_else(|| invalid(key, format!("invalid retry condition {c:?}")))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    if limit.is_none() && timeout.is_none() && conditions.is_none() {
        return Ok(None);
    }
    Ok(Some(RouteRetry {
        limit: limit.unwrap_or(1),
        timeout,
        conditions,
    }))
}

/// HTTP retries: `retry.linkerd.io/http` lists `5xx`, `gateway-error`,
/// statuses and inclusive ranges (`500-504`).
pub fn http_retry(
    annotations: &Annotations,
) -> Result<Option<RouteRetry<HttpRetryCondition>>, InvalidAnnotation> {
    fn status(s: &str) -> Option<u32> {
        s.parse().ok().filter(|c| (100..600).contains(c))
    }
    retry(annotations, labels::RETRY_HTTP, |c| {
        let range = |status_min, status_max| HttpRetryCondition {
            status_min,
            status_max,
        };
        if c.eq_ignore_ascii_case("5xx") {
            return Some(range(500, 599));
        }
        if c.eq_ignore_ascii_case("gateway-error") {
            return Some(range(502, 504));
        }
        if let Some(code) = status(c) {
            return Some(range(code, code));
        }
        let (lo, hi) = c.split_once('-')?;
        let (lo, hi) = (status(lo)?, status(hi)?);
        (lo <= hi).then(|| range(lo, hi))
    })
}

/// gRPC retries: `retry.linkerd.io/grpc` lists `cancelled`,
/// `deadline-exceeded`, `internal`, `resource-exhausted`, `unavailable`.
pub fn grpc_retry(
    annotations: &Annotations,
) -> Result<Option<RouteRetry<GrpcRetryCondition>>, InvalidAnnotation> {
    retry(annotations, labels::RETRY_GRPC, |c| {
        Some(match c.to_ascii_lowercase().as_str() {
            "cancelled" => GrpcRetryCondition::Cancelled,
            "deadline-exceeded" => GrpcRetryCondition::DeadlineExceeded,
            "internal" => GrpcRetryCondition::Internal,
            "resource-exhausted" => GrpcRetryCondition::ResourceExhausted,
            "unavailable" => GrpcRetryCondition::Unavailable,
            _ => return None,
        })
    })
}

/// Failure accrual of a Service: `balancer.linkerd.io/failure-accrual`
/// `consecutive` (max failures 7, min penalty 1s, max penalty 1m, jitter
/// ratio 0.5) or `unified` (the same, plus the success rate: threshold
/// 0.8, window 10s, 5 requests).
pub fn failure_accrual(
    annotations: &Annotations,
) -> Result<Option<FailureAccrual>, InvalidAnnotation> {
    let Some(mode) = annotations.get(labels::FAILURE_ACCRUAL) else {
        return Ok(None);
    };
    match mode.as_str() {
        "consecutive" => {
            let (max_failures, backoff) = consecutive(annotations)?;
            Ok(Some(FailureAccrual::Consecutive {
                max_failures,
                backoff,
            }))
        }
        "unified" => {
            let (max_failures, backoff) = consecutive(annotations)?;
            Ok(Some(FailureAccrual::Unified {
                max_failures,
                backoff,
                success_rate: success_rate(annotations)?,
            }))
        }
        _ => Err(InvalidAnnotation::AccrualMode(mode.clone())),
    }
}

fn number<T: std::str::FromStr<Err: std::fmt::Display>>(
    annotations: &Annotations,
    key: &'static str,
) -> Result<Option<T>, InvalidAnnotation> {
    annotations
        .get(key)
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|e| invalid(key, e.to_string()))
        })
        .transpose()
}

fn consecutive(annotations: &Annotations) -> Result<(u32, Backoff), InvalidAnnotation> {
    let max_failures = number(annotations, labels::FAILURE_ACCRUAL_MAX_FAILURES)?.unwrap_or(7);
    let max_penalty = duration(annotations, labels::FAILURE_ACCRUAL_MAX_PENALTY)?
        .unwrap_or(Duration::from_secs(60));
    let min_penalty = duration(annotations, labels::FAILURE_ACCRUAL_MIN_PENALTY)?
        .unwrap_or(Duration::from_secs(1));
    let jitter: f32 = number(annotations, labels::FAILURE_ACCRUAL_JITTER_RATIO)?.unwrap_or(0.5);
    if min_penalty > max_penalty {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_MIN_PENALTY,
            format!("min penalty {min_penalty:?} exceeds max penalty {max_penalty:?}"),
        ));
    }
    if max_penalty.is_zero() {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_MAX_PENALTY,
            "must not be zero",
        ));
    }
    if !(0.0..=100.0).contains(&jitter) {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_JITTER_RATIO,
            "must be between 0 and 100",
        ));
    }
    Ok((
        max_failures,
        Backoff {
            min_penalty,
            max_penalty,
            jitter,
        },
    ))
}

/// The proxy refuses (and so invalidates the whole policy for) a window
/// under 10ms or more than a million minimum requests, when the success
/// rate is on.
fn success_rate(annotations: &Annotations) -> Result<SuccessRate, InvalidAnnotation> {
    let threshold: f64 =
        number(annotations, labels::FAILURE_ACCRUAL_SUCCESS_RATE_THRESHOLD)?.unwrap_or(0.8);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_SUCCESS_RATE_THRESHOLD,
            format!("must be between 0.0 and 1.0, got {threshold}"),
        ));
    }
    let window = duration(annotations, labels::FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW)?
        .unwrap_or(Duration::from_secs(10));
    let min_requests: u32 = number(
        annotations,
        labels::FAILURE_ACCRUAL_SUCCESS_RATE_MIN_REQUESTS,
    )?
    .unwrap_or(5);
    if window.is_zero() {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW,
            "must be greater than zero",
        ));
    }
    if threshold != 0.0 && window < Duration::from_millis(10) {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW,
            format!("must be at least 10ms, got {window:?}"),
        ));
    }
    if threshold != 0.0 && min_requests > 1_000_000 {
        return Err(invalid(
            labels::FAILURE_ACCRUAL_SUCCESS_RATE_MIN_REQUESTS,
            format!("cannot exceed 1000000, got {min_requests}"),
        ));
    }
    Ok(SuccessRate {
        threshold,
        window,
        min_requests,
    })
}

/// A boolean annotation with Go's `strconv.ParseBool` tokens (absent:
/// false).
pub fn flag(annotations: &Annotations, key: &'static str) -> Result<bool, InvalidAnnotation> {
    match annotations.get(key).map(|v| v.trim()) {
        None | Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some(other) => Err(invalid(
            key,
            format!("{other:?} is not a boolean such as true or false"),
        )),
    }
}

/// The balancer's failure penalty: `penalize-failures` with the penalty
/// (5s) and the `Retry-After` ceiling (5m).
pub fn load_biaser(annotations: &Annotations) -> Result<Option<LoadBiaser>, InvalidAnnotation> {
    if !flag(annotations, labels::PENALIZE_FAILURES)? {
        return Ok(None);
    }
    let penalty =
        duration(annotations, labels::LOAD_BIASER_PENALTY)?.unwrap_or(Duration::from_secs(5));
    if penalty.as_millis() > u128::from(u32::MAX) {
        return Err(invalid(
            labels::LOAD_BIASER_PENALTY,
            "exceeds the largest supported value (about 49.7 days)",
        ));
    }
    let max_retry_after = duration(annotations, labels::LOAD_BIASER_MAX_RETRY_AFTER)?
        .unwrap_or(Duration::from_secs(300));
    Ok(Some(LoadBiaser {
        penalty,
        max_retry_after,
    }))
}

/// The settings annotations give the policy of a Service or an
/// EgressNetwork: failure accrual, honoring `Retry-After`, the HTTP and gRPC
/// retries and the timeouts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutboundSettings {
    pub accrual: Option<FailureAccrual>,
    /// `balancer.alpha.linkerd.io/failure-accrual-honor-retry-after`.
    pub honor_retry_after: bool,
    pub http_retry: Option<RouteRetry<HttpRetryCondition>>,
    pub grpc_retry: Option<RouteRetry<GrpcRetryCondition>>,
    pub timeouts: RouteTimeouts,
}

impl OutboundSettings {
    /// Reads the settings; a bad annotation is passed to `warn` (what it
    /// sets, the error) and ignored, as the original does.
    pub fn parse(annotations: &Annotations, warn: impl Fn(&str, &dyn std::fmt::Display)) -> Self {
        Self {
            accrual: failure_accrual(annotations)
                .map_err(|e| warn("failure accrual", &e))
                .unwrap_or_default(),
            honor_retry_after: flag(annotations, labels::FAILURE_ACCRUAL_HONOR_RETRY_AFTER)
                .map_err(|e| warn("honor-retry-after", &e))
                .unwrap_or_default(),
            http_retry: http_retry(annotations)
                .map_err(|e| warn("HTTP retry", &e))
                .unwrap_or_default(),
            grpc_retry: grpc_retry(annotations)
                .map_err(|e| warn("gRPC retry", &e))
                .unwrap_or_default(),
            timeouts: timeouts(annotations)
                .map_err(|e| warn("timeouts", &e))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn durations_take_whole_numbers_with_units() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in ["5", "1.5s", "-1s", "10x", "", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn retries_and_timeouts() {
        let a = annotations(&[
            (labels::RETRY_HTTP, "5xx,gateway-error,429,420-430"),
            (labels::RETRY_TIMEOUT, "300ms"),
            (labels::TIMEOUT_REQUEST, "5s"),
        ]);
        let retry = http_retry(&a).expect("valid").expect("some");
        assert_eq!(retry.limit, 1);
        assert_eq!(retry.timeout, Some(Duration::from_millis(300)));
        let ranges: Vec<_> = retry
            .conditions
            .expect("conditions")
            .iter()
            .map(|c| (c.status_min, c.status_max))
            .collect();
        assert_eq!(ranges, [(500, 599), (502, 504), (429, 429), (420, 430)]);
        assert_eq!(
            timeouts(&a).expect("valid").request,
            Some(Duration::from_secs(5))
        );
        assert_eq!(http_retry(&annotations(&[])), Ok(None));
        assert_eq!(
            http_retry(&annotations(&[(labels::RETRY_LIMIT, "0")])),
            Ok(None)
        );
        assert!(http_retry(&annotations(&[(labels::RETRY_HTTP, "600")])).is_err());
        assert!(http_retry(&annotations(&[(labels::RETRY_HTTP, "504-500")])).is_err());
        let grpc = grpc_retry(&annotations(&[
            (labels::RETRY_GRPC, "Unavailable,cancelled"),
            (labels::RETRY_LIMIT, "3"),
        ]))
        .expect("valid")
        .expect("some");
        assert_eq!(grpc.limit, 3);
        assert_eq!(
            grpc.conditions,
            Some(vec![
                GrpcRetryCondition::Unavailable,
                GrpcRetryCondition::Cancelled
            ])
        );
        assert!(grpc_retry(&annotations(&[(labels::RETRY_GRPC, "aborted")])).is_err());
    }

    #[test]
    fn unified_accrual_load_biaser_and_flags() {
        let unified = failure_accrual(&annotations(&[
            (labels::FAILURE_ACCRUAL, "unified"),
            (labels::FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW, "30s"),
        ]));
        assert!(matches!(
            unified,
            Ok(Some(FailureAccrual::Unified { max_failures: 7, success_rate, .. }))
                if success_rate == SuccessRate { threshold: 0.8, window: Duration::from_secs(30), min_requests: 5 }
        ));
        for bad in [
            (labels::FAILURE_ACCRUAL_SUCCESS_RATE_THRESHOLD, "1.5"),
            (labels::FAILURE_ACCRUAL_SUCCESS_RATE_WINDOW, "5ms"),
            (labels::FAILURE_ACCRUAL_SUCCESS_RATE_MIN_REQUESTS, "2000000"),
        ] {
            let a = annotations(&[(labels::FAILURE_ACCRUAL, "unified"), bad]);
            assert!(failure_accrual(&a).is_err(), "{bad:?}");
        }
        assert_eq!(load_biaser(&annotations(&[])), Ok(None));
        assert_eq!(
            load_biaser(&annotations(&[
                (labels::PENALIZE_FAILURES, " true "),
                (labels::LOAD_BIASER_PENALTY, "2s"),
            ])),
            Ok(Some(LoadBiaser {
                penalty: Duration::from_secs(2),
                max_retry_after: Duration::from_secs(300),
            }))
        );
        assert!(load_biaser(&annotations(&[(labels::PENALIZE_FAILURES, "yes")])).is_err());
        assert_eq!(
            flag(
                &annotations(&[(labels::FAILURE_ACCRUAL_HONOR_RETRY_AFTER, "T")]),
                labels::FAILURE_ACCRUAL_HONOR_RETRY_AFTER
            ),
            Ok(true)
        );
    }

    #[test]
    fn failure_accrual_defaults_and_bounds() {
        assert_eq!(failure_accrual(&annotations(&[])), Ok(None));
        let defaults = failure_accrual(&annotations(&[(labels::FAILURE_ACCRUAL, "consecutive")]));
        assert_eq!(
            defaults,
            Ok(Some(FailureAccrual::Consecutive {
                max_failures: 7,
                backoff: Backoff {
                    min_penalty: Duration::from_secs(1),
                    max_penalty: Duration::from_secs(60),
                    jitter: 0.5,
                },
            }))
        );
        let custom = failure_accrual(&annotations(&[
            (labels::FAILURE_ACCRUAL, "consecutive"),
            (labels::FAILURE_ACCRUAL_MAX_FAILURES, "3"),
            (labels::FAILURE_ACCRUAL_MIN_PENALTY, "100ms"),
            (labels::FAILURE_ACCRUAL_MAX_PENALTY, "10s"),
            (labels::FAILURE_ACCRUAL_JITTER_RATIO, "1.5"),
        ]));
        assert!(matches!(
            custom,
            Ok(Some(FailureAccrual::Consecutive { max_failures: 3, backoff })) if backoff.jitter == 1.5
        ));
        for bad in [
            &[(labels::FAILURE_ACCRUAL, "sometimes")][..],
            &[
                (labels::FAILURE_ACCRUAL, "consecutive"),
                (labels::FAILURE_ACCRUAL_MIN_PENALTY, "2m"),
            ],
            &[
                (labels::FAILURE_ACCRUAL, "consecutive"),
                (labels::FAILURE_ACCRUAL_JITTER_RATIO, "-1"),
            ],
        ] {
            assert!(failure_accrual(&annotations(bad)).is_err(), "{bad:?}");
        }
    }
}
