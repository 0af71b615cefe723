//! The ServiceProfile rules: first the original's checks in its order and
//! with its messages (strict decode, name, routes, conditions, retry
//! budget), then Meridian's additions (`pathRegex` must compile,
//! `dstOverrides` must be well formed). The first failing rule wins.

use serde_json::Value;

use crate::{
    decode::{self, Profile, RequestMatch, ResponseMatch, go_quote},
    duration::parse_go_duration,
    quantity,
};

/// Prefix of decode errors, as the original wrapped them.
pub const DECODE_PREFIX: &str =
    "failed to validate ServiceProfile: error unmarshaling JSON: while decoding JSON: ";

const MIN_STATUS: u32 = 100;
const MAX_STATUS: u32 = 599;

/// Why a ServiceProfile is rejected; `Display` is the denial message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Validates a ServiceProfile given as the JSON of `request.object`.
pub fn validate(object: &Value) -> Result<(), Invalid> {
    let profile = decode::decode(object).map_err(|e| Invalid(format!("{DECODE_PREFIX}{e}")))?;
    let fail = |what: String| Invalid(format!("ServiceProfile {} {what}", go_quote(&profile.name)));
    reference_rules(&profile).map_err(fail)?;
    additional_rules(&profile).map_err(fail)
}

/// The original's rules after decoding; errors lack the `ServiceProfile "x" ` prefix.
fn reference_rules(profile: &Profile) -> Result<(), String> {
    if let Some(problem) = dns1123_subdomain(&profile.name) {
        return Err(format!("has invalid name: {problem}"));
    }
    for route in &profile.spec.routes {
        let Some(route) = route else {
            return Err("has a null route".into());
        };
        if route.name.is_empty() {
            return Err("has a route with no name".into());
        }
        if !route.timeout.is_empty() {
            parse_go_duration(&route.timeout)
                .map_err(|e| format!("has a route with an invalid timeout: {e}"))?;
        }
        let Some(condition) = &route.condition else {
            return Err("has a route with no condition".into());
        };
        request_match(condition)
            .map_err(|e| format!("has a route with an invalid condition: {e}"))?;
        for class in &route.response_classes {
            let Some(class) = class else {
                return Err("has a null response class".into());
            };
            let Some(condition) = &class.condition else {
                return Err("has a response class with no condition".into());
            };
            response_match(condition)
                .map_err(|e| format!("has a response class with an invalid condition: {e}"))?;
        }
    }
    if let Some(budget) = &profile.spec.retry_budget {
        if budget.retry_ratio < 0.0 {
            return Err(format!(
                "RetryBudget RetryRatio must be non-negative: {:.6}",
                budget.retry_ratio
            ));
        }
        if budget.ttl.is_empty() {
            return Err("RetryBudget missing TTL field".into());
        }
        parse_go_duration(&budget.ttl).map_err(|e| format!("RetryBudget: {e}"))?;
    }
    Ok(())
}

fn request_match(m: &RequestMatch) -> Result<(), String> {
    let mut set = false;
    for (name, list) in [("all", &m.all), ("any", &m.any)] {
        if let Some(list) = list {
            set = true;
            for child in list {
                let child = child
                    .as_ref()
                    .ok_or_else(|| format!("null condition {name:?}"))?;
                request_match(child)?;
            }
        }
    }
    set |= !m.method.is_empty();
    if let Some(not) = &m.not {
        set = true;
        request_match(not)?;
    }
    set |= !m.path_regex.is_empty();
    if set {
        Ok(())
    } else {
        Err("A request match must have a field set".into())
    }
}

fn response_match(m: &ResponseMatch) -> Result<(), String> {
    let mut set = false;
    for (name, list) in [("all", &m.all), ("any", &m.any)] {
        if let Some(list) = list {
            set = true;
            for child in list {
                let child = child
                    .as_ref()
                    .ok_or_else(|| format!("null condition {name:?}"))?;
                response_match(child)?;
            }
        }
    }
    if let Some(status) = m.status {
        let outside = |n: u32| n != 0 && !(MIN_STATUS..=MAX_STATUS).contains(&n);
        if outside(status.min) {
            return Err(format!(
                "Range minimum must be between {MIN_STATUS} and {MAX_STATUS}, inclusive"
            ));
        }
        if outside(status.max) {
            return Err(format!(
                "Range maximum must be between {MIN_STATUS} and {MAX_STATUS}, inclusive"
            ));
        }
        if status.min != 0 && status.max != 0 && status.max < status.min {
            return Err("Range maximum cannot be smaller than minimum".into());
        }
        set = true;
    }
    if let Some(not) = &m.not {
        set = true;
        response_match(not)?;
    }
    if set {
        Ok(())
    } else {
        Err("A response match must have a field set".into())
    }
}

/// Meridian's additions, checked after every original rule passed.
fn additional_rules(profile: &Profile) -> Result<(), String> {
    for route in profile.spec.routes.iter().flatten() {
        if let Some(condition) = &route.condition {
            check_regexes(condition).map_err(|(regex, error)| {
                format!(
                    "has a route {} with an invalid pathRegex {}: {error}",
                    go_quote(&route.name),
                    go_quote(regex)
                )
            })?;
        }
    }
    for dst in &profile.spec.dst_overrides {
        let Some(dst) = dst else {
            return Err("has a null dstOverride".into());
        };
        if dst.authority.is_empty() {
            return Err("has a dstOverride with no authority".into());
        }
        authority(&dst.authority).map_err(|reason| {
            format!(
                "has a dstOverride with an invalid authority {}: {reason}",
                go_quote(&dst.authority)
            )
        })?;
        // The decoder already checked the syntax.
        if quantity::parse(&dst.weight).is_ok_and(|q| q.negative) {
            return Err(format!(
                "has a dstOverride with a negative weight {}",
                go_quote(&dst.weight)
            ));
        }
    }
    Ok(())
}

/// Checks every `pathRegex` in a condition tree (the proxy compiles them
/// with the `regex` crate); returns the first that fails and why.
fn check_regexes(m: &RequestMatch) -> Result<(), (&str, String)> {
    if !m.path_regex.is_empty() {
        check_regex(&m.path_regex).map_err(|reason| (m.path_regex.as_str(), reason))?;
    }
    let children = m.all.iter().chain(m.any.iter()).flatten().flatten();
    for child in children.chain(m.not.as_deref()) {
        check_regexes(child)?;
    }
    Ok(())
}

/// Whether the `regex` crate accepts `pattern`: the same parser, syntax
/// defaults and size limit, and the same two NFAs (forward and reverse:
/// the reverse one can exceed the limit alone, e.g. `\w{500}`), but no
/// full DFA. The `regex` crate would also determinize small patterns into
/// a DFA, which made up most of the webhook's CPU time and decides nothing
/// about validity; the lazy DFA it builds instead costs nothing up front.
pub fn check_regex(pattern: &str) -> Result<(), String> {
    // Profiles are re-applied far more often than their patterns change:
    // remember recent verdicts (bounded; forgotten wholesale when full).
    const REMEMBERED: usize = 4096;
    static VERDICTS: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<String, Result<(), String>>>,
    > = std::sync::LazyLock::new(Default::default);
    let remembered = VERDICTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(pattern)
        .cloned();
    if let Some(verdict) = remembered {
        return verdict;
    }
    let verdict = compile_check(pattern);
    let mut verdicts = VERDICTS.lock().unwrap_or_else(|p| p.into_inner());
    if verdicts.len() >= REMEMBERED {
        verdicts.clear();
    }
    verdicts.insert(pattern.to_string(), verdict.clone());
    verdict
}

fn compile_check(pattern: &str) -> Result<(), String> {
    use regex_automata::meta;
    let config = meta::Config::new()
        .nfa_size_limit(Some(10 * (1 << 20)))
        .dfa(false)
        // The lazy DFA is what makes the builder compile the reverse NFA,
        // whose size `regex::Regex::new` also checks.
        .hybrid(true)
        .onepass(false)
        .backtrack(false);
    meta::Builder::new()
        .configure(config)
        .build(pattern)
        .map(drop)
        .map_err(|e| match (e.syntax_error(), e.size_limit()) {
            (Some(syntax), _) => first_error_line(&syntax.to_string()),
            // The `regex` crate's words for `CompiledTooBig`.
            (None, Some(limit)) => format!("compiled regex exceeds size limit of {limit} bytes"),
            (None, None) => e.to_string(),
        })
}

/// The one-line reason of a regex error (its `Display` draws the pattern).
fn first_error_line(text: &str) -> String {
    text.lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or(text)
        .to_string()
}

/// `host` or `host:port`: a DNS name or IP address (IPv6 in brackets), and
/// a port from 1 to 65535.
pub fn authority(authority: &str) -> Result<(), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or_else(|| "missing ']' after an IPv6 address".to_string())?;
        ip.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("{} is not an IPv6 address", go_quote(ip)))?;
        match after {
            "" => return Ok(()),
            _ => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return Err("unexpected text after ']'".into()),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(authority), None),
        }
    };
    if let Some(host) = host {
        let name = host.strip_suffix('.').unwrap_or(host);
        if name.is_empty() {
            return Err("missing host".into());
        }
        if dns1123_subdomain(&name.to_ascii_lowercase()).is_some() {
            return Err(format!(
                "host {} is not a DNS name or IP address",
                go_quote(host)
            ));
        }
    }
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p != 0);
        if !valid {
            return Err(format!(
                "port {} is not a number from 1 to 65535",
                go_quote(port)
            ));
        }
    }
    Ok(())
}

/// The first problem Kubernetes' `IsDNS1123Subdomain` reports, if any.
pub fn dns1123_subdomain(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    };
    if name.split('.').all(label_ok) {
        None
    } else {
        Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
             and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
             validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NAME: &str = "web.ns.svc.cluster.local";

    fn profile(spec: Value) -> Value {
        json!({
            "apiVersion": "linkerd.io/v1alpha2",
            "kind": "ServiceProfile",
            "metadata": {"name": NAME, "namespace": "ns"},
            "spec": spec,
        })
    }

    fn route(extra: Value) -> Value {
        let mut route = json!({"name": "r", "condition": {"method": "GET"}});
        if let (Some(route), Value::Object(extra)) = (route.as_object_mut(), extra) {
            route.extend(extra);
        }
        route
    }

    fn message(object: Value) -> String {
        validate(&object).expect_err("must be denied").0
    }

    fn denied(spec: Value) -> String {
        let text = message(profile(spec));
        let prefix = format!("ServiceProfile \"{NAME}\" ");
        match text.strip_prefix(&prefix) {
            Some(rest) => rest.to_string(),
            None => text,
        }
    }

    #[test]
    fn accepts_valid_profiles() {
        let valid = [
            json!({}),
            json!({"routes": []}),
            json!({"routes": [route(json!({
                "condition": {"all": [{"method": "GET"}, {"not": {"pathRegex": "/admin/.*"}}], "any": []},
                "responseClasses": [
                    {"condition": {"status": {"min": 500, "max": 599}}, "isFailure": true},
                    {"condition": {"status": {}}},
                    {"condition": {"not": {"status": {"min": 200, "max": 299}}}},
                    {"condition": {"any": [{"status": {"max": 404}}], "all": []}},
                ],
                "isRetryable": true,
                "timeout": "1.5s",
            }))]}),
            json!({"routes": [route(json!({"timeout": "0"})), route(json!({"timeout": "-1s"}))]}),
            json!({"retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 10, "ttl": "10s"}}),
            json!({"retryBudget": {"retryRatio": 0, "minRetriesPerSecond": 0, "ttl": "0"}}),
            json!({"dstOverrides": [
                {"authority": "web-v2.ns.svc.cluster.local:8080", "weight": "500m"},
                {"authority": "web-v1", "weight": 0},
                {"authority": "10.0.0.1:80", "weight": 1},
                {"authority": "[fd00::1]:80", "weight": "1k"},
            ]}),
            json!({"opaquePorts": {"3306": {}}}),
        ];
        for spec in valid {
            assert_eq!(validate(&profile(spec.clone())), Ok(()), "{spec}");
        }
        assert_eq!(
            validate(&json!({"metadata": {"name": "x"}})),
            Ok(()),
            "spec may be absent"
        );
    }

    #[test]
    fn decode_errors_carry_the_prefix() {
        assert_eq!(
            message(profile(json!({"routes": [route(json!({"foo": 1}))]}))),
            format!("{DECODE_PREFIX}json: unknown field \"foo\"")
        );
        assert_eq!(
            message(profile(
                json!({"routes": [route(json!({"responseClasses": [{"condition": {"status": {"min": true}}}]}))]})
            )),
            "failed to validate ServiceProfile: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal bool into Go struct field Range.spec.routes.responseClasses.condition.status.min of type uint32"
        );
        assert_eq!(
            message(profile(json!({"opaquePorts": ["3306"]}))),
            format!(
                "{DECODE_PREFIX}json: cannot unmarshal array into Go struct field ServiceProfileSpec.spec.opaquePorts of type map[uint32]struct {{}}"
            )
        );
        assert_eq!(
            message(profile(
                json!({"dstOverrides": [{"authority": "a", "weight": "heavy"}]})
            )),
            format!(
                "{DECODE_PREFIX}quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        );
    }

    #[test]
    fn invalid_names() {
        let text = message(json!({"metadata": {"name": "Web_1"}}));
        assert_eq!(
            text,
            "ServiceProfile \"Web_1\" has invalid name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        let long = "a".repeat(254);
        assert_eq!(
            message(json!({"metadata": {"name": long}})),
            format!(
                "ServiceProfile \"{long}\" has invalid name: must be no more than 253 characters"
            )
        );
        assert!(
            message(json!({}))
                .starts_with("ServiceProfile \"\" has invalid name: a lowercase RFC 1123")
        );
        for bad in ["a..b", "-a", "a-", ".a", "a."] {
            assert!(dns1123_subdomain(bad).is_some(), "{bad}");
        }
        for good in ["a", "a-b.c", "0.1", NAME] {
            assert_eq!(dns1123_subdomain(good), None, "{good}");
        }
    }

    #[test]
    fn route_rules_in_order() {
        let cases = [
            (json!([null]), "has a null route"),
            (
                json!([{"condition": {"method": "GET"}}]),
                "has a route with no name",
            ),
            (json!([{"name": ""}]), "has a route with no name"),
            (
                json!([route(json!({"timeout": "x", "condition": null}))]),
                "has a route with an invalid timeout: time: invalid duration \"x\"",
            ),
            (
                json!([route(json!({"timeout": "10"}))]),
                "has a route with an invalid timeout: time: missing unit in duration \"10\"",
            ),
            (
                json!([route(json!({"timeout": "1d"}))]),
                "has a route with an invalid timeout: time: unknown unit \"d\" in duration \"1d\"",
            ),
            (json!([{"name": "r"}]), "has a route with no condition"),
            (
                json!([{"name": "r", "condition": null}]),
                "has a route with no condition",
            ),
            (
                json!([route(json!({"condition": {}}))]),
                "has a route with an invalid condition: A request match must have a field set",
            ),
            (
                json!([route(json!({"condition": {"method": "", "pathRegex": ""}}))]),
                "has a route with an invalid condition: A request match must have a field set",
            ),
            (
                json!([route(
                    json!({"condition": {"all": [{"method": "GET"}, {}]}})
                )]),
                "has a route with an invalid condition: A request match must have a field set",
            ),
            (
                json!([route(json!({"condition": {"not": {}}}))]),
                "has a route with an invalid condition: A request match must have a field set",
            ),
            (
                json!([route(json!({"condition": {"all": [null]}}))]),
                "has a route with an invalid condition: null condition \"all\"",
            ),
            (
                json!([route(
                    json!({"condition": {"any": [{"method": "GET"}, null]}})
                )]),
                "has a route with an invalid condition: null condition \"any\"",
            ),
            (
                json!([route(json!({"responseClasses": [null]}))]),
                "has a null response class",
            ),
            (
                json!([route(json!({"responseClasses": [{"isFailure": true}]}))]),
                "has a response class with no condition",
            ),
            (
                json!([route(json!({"responseClasses": [{"condition": {}}]}))]),
                "has a response class with an invalid condition: A response match must have a field set",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"not": {"all": [{}]}}}]})
                )]),
                "has a response class with an invalid condition: A response match must have a field set",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"any": [null]}}]})
                )]),
                "has a response class with an invalid condition: null condition \"any\"",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"status": {"min": 99}}}]})
                )]),
                "has a response class with an invalid condition: Range minimum must be between 100 and 599, inclusive",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"status": {"min": 600, "max": 1}}}]})
                )]),
                "has a response class with an invalid condition: Range minimum must be between 100 and 599, inclusive",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"status": {"max": 600}}}]})
                )]),
                "has a response class with an invalid condition: Range maximum must be between 100 and 599, inclusive",
            ),
            (
                json!([route(
                    json!({"responseClasses": [{"condition": {"all": [{"status": {"min": 500, "max": 400}}]}}]})
                )]),
                "has a response class with an invalid condition: Range maximum cannot be smaller than minimum",
            ),
            // The second route is only checked after the first passes.
            (
                json!([route(json!({})), {"name": "b"}]),
                "has a route with no condition",
            ),
        ];
        for (routes, want) in cases {
            assert_eq!(denied(json!({"routes": routes})), want, "{routes}");
        }
    }

    #[test]
    fn retry_budget_rules() {
        let cases = [
            (
                json!({"retryRatio": -0.2, "minRetriesPerSecond": 1, "ttl": "10s"}),
                "RetryBudget RetryRatio must be non-negative: -0.200000",
            ),
            (
                json!({"retryRatio": 0.2, "minRetriesPerSecond": 1}),
                "RetryBudget missing TTL field",
            ),
            (
                json!({"retryRatio": 0.2, "minRetriesPerSecond": 1, "ttl": "foo"}),
                "RetryBudget: time: invalid duration \"foo\"",
            ),
            (json!({}), "RetryBudget missing TTL field"),
        ];
        for (budget, want) in cases {
            assert_eq!(denied(json!({"retryBudget": budget})), want, "{budget}");
        }
        // Routes are checked first.
        assert_eq!(
            denied(json!({"routes": [null], "retryBudget": {"retryRatio": -1, "ttl": ""}})),
            "has a null route"
        );
    }

    /// Found by the `sp_regex` fuzz target: `\w{500}` fits the limit as a
    /// forward NFA but not as the reverse one `regex::Regex::new` also
    /// builds, so the webhook admitted a pattern the proxy cannot compile.
    #[test]
    fn reverse_nfa_size_counts() {
        for pattern in ["\\w{500}", "\\w{0500}"] {
            assert!(regex::Regex::new(pattern).is_err(), "{pattern}");
            let error = check_regex(pattern).expect_err(pattern);
            assert!(error.contains("exceeds size limit"), "{error}");
        }
        assert_eq!(check_regex("\\w{100}"), Ok(()));
    }

    #[test]
    fn path_regexes_must_compile() {
        assert_eq!(
            denied(
                json!({"routes": [route(json!({"name": "GET /books", "condition": {"pathRegex": "/books/("}}))]})
            ),
            "has a route \"GET /books\" with an invalid pathRegex \"/books/(\": unclosed group"
        );
        assert_eq!(
            denied(
                json!({"routes": [route(json!({"condition": {"all": [{"method": "GET"}, {"not": {"pathRegex": "[z-a]"}}]}}))]})
            ),
            "has a route \"r\" with an invalid pathRegex \"[z-a]\": invalid character class range, the start must be <= the end"
        );
        // Original rules come first: the regex of the first route is not
        // reported while the second route has no name.
        assert_eq!(
            denied(
                json!({"routes": [route(json!({"condition": {"pathRegex": "("}})), {"condition": {"method": "GET"}}]})
            ),
            "has a route with no name"
        );
    }

    #[test]
    fn dst_overrides_must_be_well_formed() {
        let cases = [
            (json!([null]), "has a null dstOverride"),
            (
                json!([{"weight": 1}]),
                "has a dstOverride with no authority",
            ),
            (
                json!([{"authority": "web:http", "weight": 1}]),
                "has a dstOverride with an invalid authority \"web:http\": port \"http\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "web:0", "weight": 1}]),
                "has a dstOverride with an invalid authority \"web:0\": port \"0\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "web:65536", "weight": 1}]),
                "has a dstOverride with an invalid authority \"web:65536\": port \"65536\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "web:", "weight": 1}]),
                "has a dstOverride with an invalid authority \"web:\": port \"\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "web_v2.ns", "weight": 1}]),
                "has a dstOverride with an invalid authority \"web_v2.ns\": host \"web_v2.ns\" is not a DNS name or IP address",
            ),
            (
                json!([{"authority": ":80", "weight": 1}]),
                "has a dstOverride with an invalid authority \":80\": missing host",
            ),
            (
                json!([{"authority": "fd00::1", "weight": 1}]),
                "has a dstOverride with an invalid authority \"fd00::1\": port \":1\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "[fd00::zz]:80", "weight": 1}]),
                "has a dstOverride with an invalid authority \"[fd00::zz]:80\": \"fd00::zz\" is not an IPv6 address",
            ),
            (
                json!([{"authority": "http://web", "weight": 1}]),
                "has a dstOverride with an invalid authority \"http://web\": port \"//web\" is not a number from 1 to 65535",
            ),
            (
                json!([{"authority": "web", "weight": "-1"}]),
                "has a dstOverride with a negative weight \"-1\"",
            ),
            (
                json!([{"authority": "web", "weight": -5}]),
                "has a dstOverride with a negative weight \"-5\"",
            ),
        ];
        for (dsts, want) in cases {
            assert_eq!(denied(json!({"dstOverrides": dsts})), want, "{dsts}");
        }
        assert_eq!(authority("Web.NS.svc.cluster.local.:80"), Ok(()));
    }
}

#[cfg(test)]
mod regex_check_tests {
    use super::check_regex;

    #[test]
    fn accepts_exactly_what_the_regex_crate_compiles() {
        for pattern in [
            "/books/[^/]*",
            r"^/api/v\d+/(users|groups)/\w+$",
            "(",
            "[z-a]",
            r"\w{1000}{1000}",
            r"(?i)ÄÖÜ+",
            "a{5,3}",
            "",
        ] {
            assert_eq!(
                check_regex(pattern).is_ok(),
                regex::Regex::new(pattern).is_ok(),
                "{pattern:?}"
            );
        }
        assert!(
            check_regex(r"\w{1000}{1000}").is_err(),
            "too big to compile"
        );
    }
}
