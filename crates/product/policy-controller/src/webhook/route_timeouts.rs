//! The rule timeouts of a `policy.linkerd.io` HTTPRoute, checked at
//! admission whatever the route's parents: neither timeout may be negative
//! and `backendRequest` may not exceed `request`. The inbound index has no
//! use for timeouts, so this is an admission-only rule, as in the original
//! (whose Gateway API HTTPRoute leaves the same rule to its CRD's schema).

use k8s_api::{go_duration::parse_go_duration, policy::HttpRouteSpec};

/// Why a rule's timeouts are refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidTimeouts {
    #[error("invalid {field} timeout {value:?}: {reason}")]
    Unparsable {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("{0} timeout must not be negative")]
    Negative(&'static str),
    #[error(
        "backendRequest timeout ({backend_request}) must not be greater than request timeout ({request})"
    )]
    BackendLongerThanRequest {
        backend_request: String,
        request: String,
    },
}

/// Checks every rule's `timeouts`.
pub fn check(spec: &HttpRouteSpec) -> Result<(), InvalidTimeouts> {
    for timeouts in spec
        .rules
        .iter()
        .flatten()
        .filter_map(|r| r.timeouts.as_ref())
    {
        let backend_request = parse("backendRequest", timeouts.backend_request.as_deref())?;
        let request = parse("request", timeouts.request.as_deref())?;
        if let (Some((req, req_text)), Some((backend, backend_text))) = (request, backend_request)
            && backend > req
        {
            return Err(InvalidTimeouts::BackendLongerThanRequest {
                backend_request: backend_text.to_string(),
                request: req_text.to_string(),
            });
        }
    }
    Ok(())
}

/// A non-negative duration in nanoseconds, with the text it came from.
fn parse<'a>(
    field: &'static str,
    value: Option<&'a str>,
) -> Result<Option<(i128, &'a str)>, InvalidTimeouts> {
    let Some(value) = value else {
        return Ok(None);
    };
    let nanos = parse_go_duration(value).map_err(|e| InvalidTimeouts::Unparsable {
        field,
        value: value.to_string(),
        reason: e.to_string(),
    })?;
    if nanos < 0 {
        return Err(InvalidTimeouts::Negative(field));
    }
    Ok(Some((i128::from(nanos), value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(timeouts: serde_json::Value) -> HttpRouteSpec {
        serde_json::from_value(serde_json::json!({"rules": [{}, {"timeouts": timeouts}]}))
            .expect("spec")
    }

    #[test]
    fn backend_request_may_not_exceed_request() {
        assert_eq!(
            check(&spec(
                serde_json::json!({"request": "2s", "backendRequest": "2000ms"})
            )),
            Ok(())
        );
        assert_eq!(
            check(&spec(serde_json::json!({"backendRequest": "1h"}))),
            Ok(())
        );
        assert_eq!(
            check(&spec(
                serde_json::json!({"request": "1s", "backendRequest": "1m"})
            )),
            Err(InvalidTimeouts::BackendLongerThanRequest {
                backend_request: "1m".into(),
                request: "1s".into()
            })
        );
        // A zero request timeout is compared like any other, as in the original.
        assert!(
            check(&spec(
                serde_json::json!({"request": "0s", "backendRequest": "1s"})
            ))
            .is_err()
        );
    }

    #[test]
    fn negative_or_malformed_timeouts_are_refused() {
        assert_eq!(
            check(&spec(serde_json::json!({"request": "-1s"}))),
            Err(InvalidTimeouts::Negative("request"))
        );
        assert_eq!(
            check(&spec(
                serde_json::json!({"request": "-1s", "backendRequest": "-1s"})
            )),
            Err(InvalidTimeouts::Negative("backendRequest"))
        );
        assert!(matches!(
            check(&spec(serde_json::json!({"request": "soon"}))),
            Err(InvalidTimeouts::Unparsable {
                field: "request",
                ..
            })
        ));
    }
}
