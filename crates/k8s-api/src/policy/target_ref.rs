//! References from one policy object to another.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to an object in the referring object's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalTargetRef {
    /// API group; empty means the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
    pub name: String,
}

/// A reference to an object, possibly in another namespace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedTargetRef {
    /// API group; empty means the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
    /// Optional for some kinds (a Namespace identity reference has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Defaults to the referring object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl LocalTargetRef {
    /// Whether this refers to `group`/`kind` (case-insensitive; an empty
    /// group means `core`).
    pub fn targets_kind(&self, group: &str, kind: &str) -> bool {
        group_matches(self.group.as_deref(), group) && self.kind.eq_ignore_ascii_case(kind)
    }
}

impl NamespacedTargetRef {
    /// Whether this refers to `group`/`kind` (case-insensitive; an empty
    /// group means `core`).
    pub fn targets_kind(&self, group: &str, kind: &str) -> bool {
        group_matches(self.group.as_deref(), group) && self.kind.eq_ignore_ascii_case(kind)
    }
}

fn group_matches(actual: Option<&str>, expected: &str) -> bool {
    let actual = match actual {
        None | Some("") => "core",
        Some(group) => group,
    };
    let expected = if expected.is_empty() {
        "core"
    } else {
        expected
    };
    actual.eq_ignore_ascii_case(expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_case_insensitively_with_core_default() {
        let r = LocalTargetRef {
            group: None,
            kind: "namespace".into(),
            name: "x".into(),
        };
        assert!(r.targets_kind("core", "Namespace"));
        assert!(r.targets_kind("", "Namespace"));
        assert!(!r.targets_kind("policy.linkerd.io", "Namespace"));
    }
}
