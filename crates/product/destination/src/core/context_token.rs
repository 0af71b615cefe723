//! Parses `GetDestination.context_token`: the proxy's JSON
//! `{"ns","nodeName","pod"}` (a trailing newline is fine), the legacy
//! `ns:<namespace>` form, and anything else as an empty token. Never an error.

use serde_json::Value;

/// What the client told us about itself. Empty strings mean "not given".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextToken {
    /// The client's namespace (selects the client-namespace ServiceProfile).
    pub ns: String,
    /// The client's node (drives node/zone filtering and `zone_locality`).
    pub node_name: String,
    /// The client pod's name.
    pub pod: String,
}

impl ContextToken {
    /// Parses a token; malformed input yields an empty token and a log line.
    pub fn parse(token: &str) -> Self {
        if token.is_empty() {
            return Self::default();
        }
        match serde_json::from_str::<Value>(token) {
            Ok(value) => match Self::from_json(&value) {
                Some(parsed) => return parsed,
                None => {
                    tracing::warn!(token, "context token is not a JSON object of strings");
                    return Self::default();
                }
            },
            Err(error) => {
                if let Some(ns) = legacy_namespace(token) {
                    tracing::warn!(token, "context token uses the old ns:<namespace> format");
                    return Self {
                        ns: ns.to_string(),
                        ..Self::default()
                    };
                }
                tracing::warn!(token, %error, "context token is invalid");
            }
        }
        Self::default()
    }

    /// Reads the known keys (ASCII case-insensitively, like Go's decoder);
    /// `null` is the empty token, unknown keys are ignored.
    fn from_json(value: &Value) -> Option<Self> {
        let map = match value {
            Value::Null => return Some(Self::default()),
            Value::Object(map) => map,
            _ => return None,
        };
        let mut token = Self::default();
        for (key, value) in map {
            let field = if key.eq_ignore_ascii_case("ns") {
                &mut token.ns
            } else if key.eq_ignore_ascii_case("nodeName") {
                &mut token.node_name
            } else if key.eq_ignore_ascii_case("pod") {
                &mut token.pod
            } else {
                continue;
            };
            match value {
                Value::String(s) => s.clone_into(field),
                Value::Null => {}
                _ => return None,
            }
        }
        Some(token)
    }
}

/// `ns:<namespace>` with exactly one colon.
fn legacy_namespace(token: &str) -> Option<&str> {
    let (prefix, ns) = token.split_once(':')?;
    (prefix == "ns" && !ns.contains(':')).then_some(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_json_with_newline() {
        let t = ContextToken::parse(
            "{\"ns\":\"emojivoto\", \"nodeName\":\"node-1\", \"pod\":\"web-1\"}\n",
        );
        assert_eq!(
            t,
            ContextToken {
                ns: "emojivoto".into(),
                node_name: "node-1".into(),
                pod: "web-1".into()
            }
        );
    }

    #[test]
    fn partial_and_unknown_keys() {
        let t = ContextToken::parse(r#"{"ns":"a","extra":{"x":1}}"#);
        assert_eq!(t.ns, "a");
        assert!(t.node_name.is_empty() && t.pod.is_empty());
        let t = ContextToken::parse(r#"{"NodeName":"n","pod":null}"#);
        assert_eq!(t.node_name, "n");
        assert_eq!(ContextToken::parse("null"), ContextToken::default());
    }

    #[test]
    fn legacy_format() {
        assert_eq!(ContextToken::parse("ns:emojivoto").ns, "emojivoto");
        assert_eq!(ContextToken::parse("ns:").ns, "");
    }

    #[test]
    fn garbage_is_empty() {
        for token in [
            "",
            "garbage",
            "ns:a:b",
            "pod:x",
            "[1,2]",
            "\"ns\"",
            "42",
            r#"{"ns":1}"#,
            r#"{"ns":"a""#,
        ] {
            assert_eq!(
                ContextToken::parse(token),
                ContextToken::default(),
                "{token}"
            );
        }
    }
}
