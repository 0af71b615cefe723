//! References from one policy object to another, with the bounds the
//! CRD schemas put on their group, kind, name and namespace.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An API group: empty (core) or a DNS subdomain.
const GROUP_PATTERN: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A kind: letters, digits and dashes, starting with a letter.
const KIND_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";

/// A reference to an object in the referring object's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalTargetRef {
    /// API group; empty means the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = GROUP_PATTERN))]
    pub group: Option<String>,
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND_PATTERN))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A reference to an object, possibly in another namespace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedTargetRef {
    /// API group; empty means the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = GROUP_PATTERN))]
    pub group: Option<String>,
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND_PATTERN))]
    pub kind: String,
    /// Optional for identity references (a Namespace); every required
    /// authentication names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
    /// Defaults to the referring object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub namespace: Option<String>,
}

/// Schema transform for a list of [`NamespacedTargetRef`]s whose every
/// entry must name its referent.
pub(crate) fn names_required(schema: &mut schemars::Schema) {
    let Some(required) = schema
        .get_mut("items")
        .and_then(|items| items.as_object_mut())
        .map(|items| {
            items
                .entry("required")
                .or_insert_with(|| serde_json::json!([]))
        })
        .and_then(|r| r.as_array_mut())
    else {
        return;
    };
    if !required.iter().any(|r| r == "name") {
        required.push("name".into());
    }
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
