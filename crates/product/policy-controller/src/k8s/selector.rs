//! Label selectors (`matchLabels` AND `matchExpressions` with In, NotIn,
//! Exists, DoesNotExist), evaluated against an object's labels.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::InvalidResource;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// A parsed label selector. The empty selector selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    labels: Labels,
    expressions: Vec<Expression>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expression {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|e| e.matches(labels))
    }
}

impl TryFrom<&LabelSelector> for Selector {
    type Error = InvalidResource;

    fn try_from(selector: &LabelSelector) -> Result<Self, Self::Error> {
        let expressions = selector
            .match_expressions
            .iter()
            .flatten()
            .map(|req| {
                let values = || req.values.iter().flatten().cloned().collect();
                let key = req.key.clone();
                match req.operator.as_str() {
                    "In" => Ok(Expression::In(key, values())),
                    "NotIn" => Ok(Expression::NotIn(key, values())),
                    "Exists" => Ok(Expression::Exists(key)),
                    "DoesNotExist" => Ok(Expression::DoesNotExist(key)),
                    other => Err(InvalidResource::SelectorOperator(other.to_string())),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            labels: selector.match_labels.clone().unwrap_or_default(),
            expressions,
        })
    }
}

impl Expression {
    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn empty_selects_all() {
        let s = Selector::try_from(&LabelSelector::default()).expect("valid");
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn labels_and_expressions_must_all_match() {
        let s = Selector::try_from(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                req("tier", "In", &["front", "edge"]),
                req("env", "NotIn", &["prod"]),
                req("team", "Exists", &[]),
                req("legacy", "DoesNotExist", &[]),
            ]),
        })
        .expect("valid");
        let base = [("app", "web"), ("tier", "front"), ("team", "x")];
        assert!(s.matches(&labels(&base)));
        assert!(s.matches(&labels(&[base[0], base[1], base[2], ("env", "dev")])));
        assert!(!s.matches(&labels(&[base[0], base[1], base[2], ("env", "prod")])));
        assert!(!s.matches(&labels(&[base[0], base[1], base[2], ("legacy", "")])));
        assert!(!s.matches(&labels(&[base[0], ("tier", "back"), base[2]])));
        assert!(!s.matches(&labels(&[base[0], base[1]])));
        assert!(!s.matches(&labels(&[("app", "api"), base[1], base[2]])));
    }

    #[test]
    fn unknown_operators_are_invalid() {
        let sel = LabelSelector {
            match_expressions: Some(vec![req("a", "Gt", &["1"])]),
            ..Default::default()
        };
        assert!(Selector::try_from(&sel).is_err());
    }
}
