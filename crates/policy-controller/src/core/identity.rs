//! Matching a client's mesh identity: exactly, or by a DNS-like suffix.

use std::{fmt, str::FromStr};

/// Matches a client's mesh TLS identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentityMatch {
    /// The identity equals this name.
    Exact(String),
    /// The identity ends with these labels (in written order); no labels
    /// matches every identity.
    Suffix(Vec<String>),
}

impl IdentityMatch {
    /// `<sa>.<ns>.serviceaccount.identity.<control-plane-ns>.<identity-domain>`.
    pub fn service_account(
        name: &str,
        namespace: &str,
        control_plane_ns: &str,
        identity_domain: &str,
    ) -> Self {
        Self::Exact(format!(
            "{name}.{namespace}.serviceaccount.identity.{control_plane_ns}.{identity_domain}"
        ))
    }

    /// Every service account of `namespace`.
    pub fn namespace(namespace: &str, control_plane_ns: &str, identity_domain: &str) -> Self {
        let suffix =
            format!("{namespace}.serviceaccount.identity.{control_plane_ns}.{identity_domain}");
        Self::Suffix(suffix.split('.').map(str::to_string).collect())
    }
}

impl FromStr for IdentityMatch {
    type Err = std::convert::Infallible;

    /// `*` matches all, `*.a.b` matches the suffix `a.b`, anything else
    /// matches exactly.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "*" {
            return Ok(Self::Suffix(Vec::new()));
        }
        match s.strip_prefix("*.") {
            Some(suffix) => Ok(Self::Suffix(
                suffix.split('.').map(str::to_string).collect(),
            )),
            None => Ok(Self::Exact(s.to_string())),
        }
    }
}

impl From<&str> for IdentityMatch {
    fn from(s: &str) -> Self {
        match s.parse() {
            Ok(m) => m,
            Err(never) => match never {},
        }
    }
}

impl fmt::Display for IdentityMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(name) => f.write_str(name),
            Self::Suffix(parts) if parts.is_empty() => f.write_str("*"),
            Self::Suffix(parts) => write!(f, "*.{}", parts.join(".")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_wildcards_as_suffixes_in_written_order() {
        assert_eq!(IdentityMatch::from("*"), IdentityMatch::Suffix(vec![]));
        assert_eq!(
            IdentityMatch::from("*.ns.serviceaccount"),
            IdentityMatch::Suffix(vec!["ns".into(), "serviceaccount".into()])
        );
        assert_eq!(
            IdentityMatch::from("web.ns.serviceaccount.identity.linkerd.cluster.local"),
            IdentityMatch::Exact("web.ns.serviceaccount.identity.linkerd.cluster.local".into())
        );
        for s in ["*", "*.a.b", "x.y"] {
            assert_eq!(IdentityMatch::from(s).to_string(), s);
        }
    }

    #[test]
    fn service_account_and_namespace_identities() {
        assert_eq!(
            IdentityMatch::service_account("web", "emoji", "linkerd", "cluster.local"),
            IdentityMatch::Exact("web.emoji.serviceaccount.identity.linkerd.cluster.local".into())
        );
        assert_eq!(
            IdentityMatch::namespace("emoji", "linkerd", "cluster.local").to_string(),
            "*.emoji.serviceaccount.identity.linkerd.cluster.local"
        );
    }
}
