//! Strict decoding of a ServiceProfile from JSON, mimicking Go's
//! `encoding/json` with unknown fields disallowed (as the original's
//! `yaml.UnmarshalStrict` did): the first unknown field, wrong type or
//! out-of-range number is reported with Go's message, naming the Go struct
//! and the JSON field path (`Range.spec.routes.responseClasses.condition.status.min`).
//!
//! The result keeps the distinctions the rules need and serde would blur:
//! `null` list elements, absent versus empty lists, and empty strings.
//!
//! Go reports the first error in document order. The apiserver serializes
//! objects with sorted keys, which is also the order of `serde_json::Map`,
//! so "first" means the same thing here.

use std::fmt;

use serde_json::{Map, Value};

use crate::quantity::{self, QuantityError};

/// A decode error; `Display` is Go's message (`json: unknown field "x"`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("json: unknown field {}", go_quote(.0))]
    UnknownField(String),
    #[error("json: cannot unmarshal {value} into {}", Target(.struct_name, .path, .go_type))]
    Type {
        /// `string`, `number`, `number -1`, `bool`, `array` or `object`.
        value: String,
        /// The Go struct holding the field; `None` for the top-level value.
        struct_name: Option<&'static str>,
        /// The JSON field names from the top, without list indexes.
        path: Vec<String>,
        go_type: &'static str,
    },
    /// A `resource.Quantity` that does not parse (Go returns its error as is).
    #[error(transparent)]
    Quantity(#[from] QuantityError),
}

struct Target<'a>(&'a Option<&'static str>, &'a Vec<String>, &'a &'static str);

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(
                f,
                "Go struct field {name}.{} of type {}",
                self.1.join("."),
                self.2
            ),
            None => write!(f, "Go value of type {}", self.2),
        }
    }
}

/// A ServiceProfile as the Go types saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub name: String,
    pub spec: Spec,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spec {
    pub routes: Vec<Option<Route>>,
    pub retry_budget: Option<RetryBudget>,
    pub dst_overrides: Vec<Option<WeightedDst>>,
    pub opaque_ports: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    pub name: String,
    pub condition: Option<RequestMatch>,
    pub response_classes: Vec<Option<ResponseClass>>,
    pub is_retryable: bool,
    pub timeout: String,
}

/// `None` lists were absent or null; `Some(vec![])` was `[]` and counts as set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestMatch {
    pub all: Option<Vec<Option<RequestMatch>>>,
    pub not: Option<Box<RequestMatch>>,
    pub any: Option<Vec<Option<RequestMatch>>>,
    pub path_regex: String,
    pub method: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseClass {
    pub condition: Option<ResponseMatch>,
    pub is_failure: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseMatch {
    pub all: Option<Vec<Option<ResponseMatch>>>,
    pub not: Option<Box<ResponseMatch>>,
    pub any: Option<Vec<Option<ResponseMatch>>>,
    pub status: Option<Range>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    pub min: u32,
    pub max: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetryBudget {
    pub retry_ratio: f32,
    pub min_retries_per_second: u32,
    pub ttl: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct WeightedDst {
    pub authority: String,
    /// The weight as written (`"0"` when absent or null).
    pub weight: String,
}

/// Decoding state: the JSON field path and the Go struct being filled.
struct Cx {
    path: Vec<String>,
    struct_name: Option<&'static str>,
}

type Result<T> = std::result::Result<T, DecodeError>;

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Cx {
    fn type_error(&self, value: String, go_type: &'static str) -> DecodeError {
        DecodeError::Type {
            value,
            struct_name: self.struct_name,
            path: self.path.clone(),
            go_type,
        }
    }

    fn mismatch(&self, value: &Value, go_type: &'static str) -> DecodeError {
        self.type_error(kind(value).to_string(), go_type)
    }

    /// Decodes a JSON object into a Go struct named `name`, whose JSON field
    /// names are `fields`; `set` is called with each field's index and value.
    fn object(
        &mut self,
        value: &Value,
        name: &'static str,
        go_type: &'static str,
        fields: &[&'static str],
        mut set: impl FnMut(&mut Self, usize, &Value) -> Result<()>,
    ) -> Result<bool> {
        let map: &Map<String, Value> = match value {
            Value::Null => return Ok(false),
            Value::Object(map) => map,
            other => return Err(self.mismatch(other, go_type)),
        };
        let outer = self.struct_name.replace(name);
        for (key, field_value) in map {
            // Go matches field names exactly, then case-insensitively.
            let index = fields
                .iter()
                .position(|f| f == key)
                .or_else(|| fields.iter().position(|f| f.eq_ignore_ascii_case(key)));
            let Some(index) = index else {
                return Err(DecodeError::UnknownField(key.clone()));
            };
            self.path.push(fields[index].to_string());
            self.struct_name = Some(name);
            set(self, index, field_value)?;
            self.path.pop();
        }
        self.struct_name = outer;
        Ok(true)
    }

    fn string(&self, value: &Value, out: &mut String) -> Result<()> {
        match value {
            Value::Null => Ok(()),
            Value::String(s) => {
                out.clone_from(s);
                Ok(())
            }
            other => Err(self.mismatch(other, "string")),
        }
    }

    fn boolean(&self, value: &Value, out: &mut bool) -> Result<()> {
        match value {
            Value::Null => Ok(()),
            Value::Bool(b) => {
                *out = *b;
                Ok(())
            }
            other => Err(self.mismatch(other, "bool")),
        }
    }

    fn uint32(&self, value: &Value, out: &mut u32) -> Result<()> {
        match value {
            Value::Null => Ok(()),
            Value::Number(n) => {
                *out = n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| self.type_error(format!("number {n}"), "uint32"))?;
                Ok(())
            }
            other => Err(self.mismatch(other, "uint32")),
        }
    }

    fn float32(&self, value: &Value, out: &mut f32) -> Result<()> {
        match value {
            Value::Null => Ok(()),
            Value::Number(n) => {
                let wide = n.as_f64().unwrap_or(f64::INFINITY);
                if !wide.is_finite() || wide.abs() > f64::from(f32::MAX) {
                    return Err(self.type_error(format!("number {n}"), "float32"));
                }
                #[allow(clippy::cast_possible_truncation)]
                {
                    *out = wide as f32;
                }
                Ok(())
            }
            other => Err(self.mismatch(other, "float32")),
        }
    }

    /// A list of pointers: `null` elements stay `None`.
    fn list<T>(
        &mut self,
        value: &Value,
        list_type: &'static str,
        mut element: impl FnMut(&mut Self, &Value) -> Result<Option<T>>,
    ) -> Result<Option<Vec<Option<T>>>> {
        match value {
            Value::Null => Ok(None),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(element(self, item)?);
                }
                Ok(Some(out))
            }
            other => Err(self.mismatch(other, list_type)),
        }
    }
}

/// Decodes `request.object` strictly.
pub fn decode(object: &Value) -> Result<Profile> {
    let mut cx = Cx {
        path: Vec::new(),
        struct_name: None,
    };
    let mut profile = Profile::default();
    cx.object(
        object,
        "ServiceProfile",
        "v1alpha2.ServiceProfile",
        &["apiVersion", "kind", "metadata", "spec"],
        |cx, field, value| match field {
            0 | 1 => cx.string(value, &mut String::new()),
            2 => metadata(cx, value, &mut profile.name),
            _ => spec(cx, value, &mut profile.spec),
        },
    )?;
    Ok(profile)
}

/// Only `metadata.name` is read. The apiserver hands us well-formed
/// metadata, and its set of fields grows with Kubernetes versions.
fn metadata(cx: &mut Cx, value: &Value, name: &mut String) -> Result<()> {
    match value {
        Value::Null => Ok(()),
        Value::Object(map) => match map.get("name") {
            Some(value) => {
                cx.path.push("name".into());
                let outer = cx.struct_name.replace("ObjectMeta");
                cx.string(value, name)?;
                cx.struct_name = outer;
                cx.path.pop();
                Ok(())
            }
            None => Ok(()),
        },
        other => Err(cx.mismatch(other, "v1.ObjectMeta")),
    }
}

fn spec(cx: &mut Cx, value: &Value, spec: &mut Spec) -> Result<()> {
    cx.object(
        value,
        "ServiceProfileSpec",
        "v1alpha2.ServiceProfileSpec",
        &["routes", "retryBudget", "dstOverrides", "opaquePorts"],
        |cx, field, value| {
            match field {
                0 => {
                    spec.routes = cx
                        .list(value, "[]*v1alpha2.RouteSpec", route)?
                        .unwrap_or_default();
                }
                1 => spec.retry_budget = retry_budget(cx, value)?,
                2 => {
                    spec.dst_overrides = cx
                        .list(value, "[]*v1alpha2.WeightedDst", weighted_dst)?
                        .unwrap_or_default();
                }
                _ => spec.opaque_ports = opaque_ports(cx, value)?,
            }
            Ok(())
        },
    )?;
    Ok(())
}

fn route(cx: &mut Cx, value: &Value) -> Result<Option<Route>> {
    let mut route = Route::default();
    let present = cx.object(
        value,
        "RouteSpec",
        "v1alpha2.RouteSpec",
        &[
            "name",
            "condition",
            "responseClasses",
            "isRetryable",
            "timeout",
        ],
        |cx, field, value| {
            match field {
                0 => cx.string(value, &mut route.name)?,
                1 => route.condition = request_match(cx, value)?,
                2 => {
                    route.response_classes = cx
                        .list(value, "[]*v1alpha2.ResponseClass", response_class)?
                        .unwrap_or_default();
                }
                3 => cx.boolean(value, &mut route.is_retryable)?,
                _ => cx.string(value, &mut route.timeout)?,
            }
            Ok(())
        },
    )?;
    Ok(present.then_some(route))
}

fn request_match(cx: &mut Cx, value: &Value) -> Result<Option<RequestMatch>> {
    let mut m = RequestMatch::default();
    let present = cx.object(
        value,
        "RequestMatch",
        "v1alpha2.RequestMatch",
        &["all", "not", "any", "pathRegex", "method"],
        |cx, field, value| {
            match field {
                0 => m.all = cx.list(value, "[]*v1alpha2.RequestMatch", request_match)?,
                1 => m.not = request_match(cx, value)?.map(Box::new),
                2 => m.any = cx.list(value, "[]*v1alpha2.RequestMatch", request_match)?,
                3 => cx.string(value, &mut m.path_regex)?,
                _ => cx.string(value, &mut m.method)?,
            }
            Ok(())
        },
    )?;
    Ok(present.then_some(m))
}

fn response_class(cx: &mut Cx, value: &Value) -> Result<Option<ResponseClass>> {
    let mut class = ResponseClass::default();
    let present = cx.object(
        value,
        "ResponseClass",
        "v1alpha2.ResponseClass",
        &["condition", "isFailure"],
        |cx, field, value| {
            match field {
                0 => class.condition = response_match(cx, value)?,
                _ => cx.boolean(value, &mut class.is_failure)?,
            }
            Ok(())
        },
    )?;
    Ok(present.then_some(class))
}

fn response_match(cx: &mut Cx, value: &Value) -> Result<Option<ResponseMatch>> {
    let mut m = ResponseMatch::default();
    let present = cx.object(
        value,
        "ResponseMatch",
        "v1alpha2.ResponseMatch",
        &["all", "not", "any", "status"],
        |cx, field, value| {
            match field {
                0 => m.all = cx.list(value, "[]*v1alpha2.ResponseMatch", response_match)?,
                1 => m.not = response_match(cx, value)?.map(Box::new),
                2 => m.any = cx.list(value, "[]*v1alpha2.ResponseMatch", response_match)?,
                _ => m.status = range(cx, value)?,
            }
            Ok(())
        },
    )?;
    Ok(present.then_some(m))
}

fn range(cx: &mut Cx, value: &Value) -> Result<Option<Range>> {
    let mut r = Range::default();
    let present = cx.object(
        value,
        "Range",
        "v1alpha2.Range",
        &["min", "max"],
        |cx, field, value| match field {
            0 => cx.uint32(value, &mut r.min),
            _ => cx.uint32(value, &mut r.max),
        },
    )?;
    Ok(present.then_some(r))
}

fn retry_budget(cx: &mut Cx, value: &Value) -> Result<Option<RetryBudget>> {
    let mut b = RetryBudget::default();
    let present = cx.object(
        value,
        "RetryBudget",
        "v1alpha2.RetryBudget",
        &["retryRatio", "minRetriesPerSecond", "ttl"],
        |cx, field, value| match field {
            0 => cx.float32(value, &mut b.retry_ratio),
            1 => cx.uint32(value, &mut b.min_retries_per_second),
            _ => cx.string(value, &mut b.ttl),
        },
    )?;
    Ok(present.then_some(b))
}

fn weighted_dst(cx: &mut Cx, value: &Value) -> Result<Option<WeightedDst>> {
    let mut dst = WeightedDst {
        authority: String::new(),
        weight: "0".into(),
    };
    let present = cx.object(
        value,
        "WeightedDst",
        "v1alpha2.WeightedDst",
        &["authority", "weight"],
        |cx, field, value| match field {
            0 => cx.string(value, &mut dst.authority),
            _ => {
                // resource.Quantity parses its own JSON: strings and numbers
                // by their text, anything else fails the syntax check.
                let text = match value {
                    Value::Null => return Ok(()),
                    Value::String(s) => s.trim().to_string(),
                    other => other.to_string(),
                };
                quantity::parse(&text)?;
                dst.weight = text;
                Ok(())
            }
        },
    )?;
    Ok(present.then_some(dst))
}

/// Go's type is `map[uint32]struct{}`: the list form the CRD describes does
/// not decode, an object keyed by port numbers does.
fn opaque_ports(cx: &mut Cx, value: &Value) -> Result<Vec<u32>> {
    const MAP_TYPE: &str = "map[uint32]struct {}";
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(map) => {
            let mut ports = Vec::with_capacity(map.len());
            for (key, entry) in map {
                let port = key
                    .parse::<u32>()
                    .map_err(|_| cx.type_error(format!("number {key}"), "uint32"))?;
                match entry {
                    Value::Null => {}
                    Value::Object(fields) => {
                        if let Some(field) = fields.keys().next() {
                            return Err(DecodeError::UnknownField(field.clone()));
                        }
                    }
                    other => return Err(cx.mismatch(other, "struct {}")),
                }
                ports.push(port);
            }
            Ok(ports)
        }
        other => Err(cx.mismatch(other, MAP_TYPE)),
    }
}

/// Quotes like Go's `%q`/`strconv.Quote` for printable text: `"` and `\`
/// escaped, control characters as escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(object: Value) -> String {
        decode(&object).expect_err("must fail").to_string()
    }

    fn routes(routes: Value) -> Value {
        json!({"metadata": {"name": "x"}, "spec": {"routes": routes}})
    }

    #[test]
    fn decodes_a_full_profile() {
        let profile = decode(&json!({
            "apiVersion": "linkerd.io/v1alpha2",
            "kind": "ServiceProfile",
            "metadata": {"name": "web.ns.svc.cluster.local", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
            "spec": {
                "routes": [null, {
                    "name": "r",
                    "condition": {"all": [], "not": {"method": "GET"}, "pathRegex": "/x"},
                    "responseClasses": [{"condition": {"status": {"min": 500}}, "isFailure": true}],
                    "isRetryable": true,
                    "timeout": "1s",
                }],
                "retryBudget": {"retryRatio": 0.2, "minRetriesPerSecond": 10, "ttl": "10s"},
                "dstOverrides": [{"authority": "a:80", "weight": 1}, {"authority": "b", "weight": " 500m "}],
                "opaquePorts": {"3306": {}},
            },
        }))
        .expect("decodes");
        assert_eq!(profile.name, "web.ns.svc.cluster.local");
        assert_eq!(profile.spec.routes[0], None);
        let route = profile.spec.routes[1].as_ref().expect("route");
        let condition = route.condition.as_ref().expect("condition");
        assert_eq!(condition.all, Some(vec![]));
        assert_eq!(condition.any, None);
        assert_eq!(condition.not.as_ref().expect("not").method, "GET");
        assert_eq!(
            profile
                .spec
                .retry_budget
                .as_ref()
                .expect("rb")
                .min_retries_per_second,
            10
        );
        assert_eq!(
            profile.spec.dst_overrides[0].as_ref().expect("dst").weight,
            "1"
        );
        assert_eq!(
            profile.spec.dst_overrides[1].as_ref().expect("dst").weight,
            "500m"
        );
        assert_eq!(profile.spec.opaque_ports, vec![3306]);
    }

    #[test]
    fn nulls_are_zero_values() {
        let profile =
            decode(&json!({"metadata": null, "spec": {"routes": null, "retryBudget": null}}))
                .expect("decodes");
        assert_eq!(profile, Profile::default());
        let profile = decode(&routes(
            json!([{"name": null, "condition": null, "timeout": null}]),
        ))
        .expect("decodes");
        assert_eq!(profile.spec.routes, vec![Some(Route::default())]);
    }

    #[test]
    fn field_names_match_case_insensitively_like_go() {
        let profile =
            decode(&json!({"metadata": {"name": "x"}, "Spec": {"Routes": [{"NAME": "r"}]}}))
                .expect("decodes");
        assert_eq!(profile.spec.routes[0].as_ref().expect("route").name, "r");
    }

    #[test]
    fn unknown_fields_at_any_depth() {
        assert_eq!(err(json!({"foo": 1})), r#"json: unknown field "foo""#);
        assert_eq!(
            err(json!({"spec": {"foo": 1}})),
            r#"json: unknown field "foo""#
        );
        assert_eq!(
            err(routes(
                json!([{"name": "r", "condition": {"all": [{"not": {"pathregexp": "/"}}]}}])
            )),
            r#"json: unknown field "pathregexp""#
        );
        assert_eq!(
            err(routes(
                json!([{"name": "r", "responseClasses": [{"condition": {"status": {"low": 1}}}]}])
            )),
            r#"json: unknown field "low""#
        );
        assert_eq!(
            err(json!({"spec": {"retryBudget": {"ttl": "1s", "burst": 2}}})),
            r#"json: unknown field "burst""#
        );
        assert_eq!(
            err(json!({"spec": {"opaquePorts": {"80": {"x": true}}}})),
            r#"json: unknown field "x""#
        );
    }

    #[test]
    fn wrong_types_name_the_go_field() {
        let cases = [
            (
                routes(json!([{"responseClasses": [{"condition": {"status": {"min": true}}}]}])),
                "json: cannot unmarshal bool into Go struct field Range.spec.routes.responseClasses.condition.status.min of type uint32",
            ),
            (
                routes(json!([{"responseClasses": [{"condition": {"status": {"max": -1}}}]}])),
                "json: cannot unmarshal number -1 into Go struct field Range.spec.routes.responseClasses.condition.status.max of type uint32",
            ),
            (
                routes(
                    json!([{"responseClasses": [{"condition": {"any": [{"status": {"min": 4294967296u64}}]}}]}]),
                ),
                "json: cannot unmarshal number 4294967296 into Go struct field Range.spec.routes.responseClasses.condition.any.status.min of type uint32",
            ),
            (
                routes(json!([{"responseClasses": [{"condition": {"status": {"min": 1.5}}}]}])),
                "json: cannot unmarshal number 1.5 into Go struct field Range.spec.routes.responseClasses.condition.status.min of type uint32",
            ),
            (
                json!({"spec": {"retryBudget": {"minRetriesPerSecond": -3}}}),
                "json: cannot unmarshal number -3 into Go struct field RetryBudget.spec.retryBudget.minRetriesPerSecond of type uint32",
            ),
            (
                json!({"spec": {"retryBudget": {"retryRatio": "0.2"}}}),
                "json: cannot unmarshal string into Go struct field RetryBudget.spec.retryBudget.retryRatio of type float32",
            ),
            (
                routes(json!([{"name": 1}])),
                "json: cannot unmarshal number into Go struct field RouteSpec.spec.routes.name of type string",
            ),
            (
                routes(json!([{"isRetryable": "yes"}])),
                "json: cannot unmarshal string into Go struct field RouteSpec.spec.routes.isRetryable of type bool",
            ),
            (
                routes(json!([{"condition": {"not": [{"method": "GET"}]}}])),
                "json: cannot unmarshal array into Go struct field RequestMatch.spec.routes.condition.not of type v1alpha2.RequestMatch",
            ),
            (
                routes(json!([{"condition": {"all": {"method": "GET"}}}])),
                "json: cannot unmarshal object into Go struct field RequestMatch.spec.routes.condition.all of type []*v1alpha2.RequestMatch",
            ),
            (
                routes(json!(["r"])),
                "json: cannot unmarshal string into Go struct field ServiceProfileSpec.spec.routes of type v1alpha2.RouteSpec",
            ),
            (
                routes(json!({})),
                "json: cannot unmarshal object into Go struct field ServiceProfileSpec.spec.routes of type []*v1alpha2.RouteSpec",
            ),
            (
                json!({"spec": {"opaquePorts": ["3306"]}}),
                "json: cannot unmarshal array into Go struct field ServiceProfileSpec.spec.opaquePorts of type map[uint32]struct {}",
            ),
            (
                json!({"spec": []}),
                "json: cannot unmarshal array into Go struct field ServiceProfile.spec of type v1alpha2.ServiceProfileSpec",
            ),
            (
                json!({"metadata": {"name": 5}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string",
            ),
            (
                json!("profile"),
                "json: cannot unmarshal string into Go value of type v1alpha2.ServiceProfile",
            ),
        ];
        for (object, want) in cases {
            assert_eq!(err(object.clone()), want, "{object}");
        }
    }

    #[test]
    fn first_error_in_key_order_wins() {
        // `condition` sorts before `name`.
        assert_eq!(
            err(routes(json!([{"name": 1, "condition": {"foo": 1}}]))),
            r#"json: unknown field "foo""#
        );
    }

    #[test]
    fn weights_are_quantities() {
        let bad = [json!("one"), json!(true), json!({}), json!(""), json!("1Q")];
        for weight in bad {
            let object = json!({"spec": {"dstOverrides": [{"authority": "a", "weight": weight}]}});
            let message = err(object);
            assert!(
                message.starts_with("quantities must match")
                    || message.starts_with("unable to parse"),
                "{weight}: {message}"
            );
        }
    }

    #[test]
    fn go_quote_escapes() {
        assert_eq!(go_quote("a\"b\\c\nd\u{1}é"), r#""a\"b\\c\nd\x01é""#);
    }
}
