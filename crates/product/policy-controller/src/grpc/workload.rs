//! The `workload` field of a `PortSpec`: JSON (`{"ns":..,"pod":..}` or
//! `{"ns":..,"external_workload":..}`) or the legacy `ns:pod`.

use std::str::FromStr;

use serde::Deserialize;

/// The workload a proxy asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    Pod {
        namespace: String,
        name: String,
    },
    /// An `ExternalWorkload`.
    External {
        namespace: String,
        name: String,
    },
}

/// A workload string that is neither form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidWorkload {
    #[error("invalid workload JSON: {0}")]
    Json(String),
    #[error("workload JSON must name exactly one of pod or external_workload")]
    Kind,
    #[error("workload must be JSON or <namespace>:<pod>, got {0:?}")]
    Legacy(String),
    #[error("workload namespace and name must not be empty")]
    Empty,
}

/// Unknown fields are ignored, so newer proxies can add some.
#[derive(Deserialize)]
struct Json {
    ns: String,
    #[serde(default)]
    pod: Option<String>,
    #[serde(default)]
    external_workload: Option<String>,
}

impl FromStr for Workload {
    type Err = InvalidWorkload;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let workload = if s.starts_with('{') {
            let json: Json =
                serde_json::from_str(s).map_err(|e| InvalidWorkload::Json(e.to_string()))?;
            match (json.pod, json.external_workload) {
                (Some(name), None) => Self::Pod {
                    namespace: json.ns,
                    name,
                },
                (None, Some(name)) => Self::External {
                    namespace: json.ns,
                    name,
                },
                _ => return Err(InvalidWorkload::Kind),
            }
        } else {
            let (namespace, name) = s
                .split_once(':')
                .ok_or_else(|| InvalidWorkload::Legacy(s.to_string()))?;
            Self::Pod {
                namespace: namespace.to_string(),
                name: name.to_string(),
            }
        };
        let (Self::Pod { namespace, name } | Self::External { namespace, name }) = &workload;
        if namespace.is_empty() || name.is_empty() {
            return Err(InvalidWorkload::Empty);
        }
        Ok(workload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str) -> Workload {
        Workload::Pod {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn parses_json_and_legacy_forms() {
        assert_eq!(r#"{"ns":"a","pod":"b"}"#.parse(), Ok(pod("a", "b")));
        assert_eq!("a:b".parse(), Ok(pod("a", "b")));
        assert_eq!(r#"{"ns":"a","pod":"b","new":1}"#.parse(), Ok(pod("a", "b")));
        assert_eq!(
            r#"{"ns":"a","external_workload":"vm"}"#.parse(),
            Ok(Workload::External {
                namespace: "a".into(),
                name: "vm".into()
            })
        );
    }

    #[test]
    fn rejects_malformed_workloads() {
        for bad in [
            "",
            "nocolon",
            ":b",
            "a:",
            "{",
            r#"{"ns":"a"}"#,
            r#"{"ns":"a","pod":"b","external_workload":"c"}"#,
            r#"{"ns":"","pod":"b"}"#,
        ] {
            assert!(bad.parse::<Workload>().is_err(), "{bad:?}");
        }
    }
}
