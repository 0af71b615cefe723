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

/// An identity string that is neither DNS-like (`*`, `*.a.b`, `a.b`; lower
/// case labels) nor a SPIFFE ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid identity {0:?}: expected a DNS-like name (lower-case labels, optionally starting with \"*\") or a SPIFFE ID (spiffe://trust-domain/path)"
)]
pub struct InvalidIdentity(pub String);

/// Checks the syntax of a configured identity: DNS-like labels (the first
/// may be `*`) or a SPIFFE ID.
pub fn check_identity(s: &str) -> Result<(), InvalidIdentity> {
    if is_dns_like(s) || is_spiffe_id(s) {
        Ok(())
    } else {
        Err(InvalidIdentity(s.to_string()))
    }
}

/// `(\*|label)(\.label)*` with `label = [a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns_like(s: &str) -> bool {
    let is_label = |l: &str| {
        let b = l.as_bytes();
        let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                inner(first) && inner(last) && b.iter().all(|c| inner(c) || *c == b'-')
            }
            _ => false,
        }
    };
    s.split('.')
        .enumerate()
        .all(|(i, l)| (i == 0 && l == "*") || is_label(l))
}

/// `spiffe://<trust domain>[/<segment>…]`: a trust domain of lower-case
/// letters, digits, `.`, `-` and `_`; non-empty path segments of letters,
/// digits, `.`, `-` and `_`, other than `.` and `..`.
fn is_spiffe_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("spiffe://") else {
        return false;
    };
    let (domain, path) = rest
        .split_once('/')
        .map_or((rest, None), |(d, p)| (d, Some(p)));
    let domain_ok = !domain.is_empty()
        && domain
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-_".contains(&c));
    let path_ok = path.is_none_or(|p| {
        p.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b".-_".contains(&c))
        })
    });
    domain_ok && path_ok
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
    fn identity_syntax_is_dns_like_or_spiffe() {
        for ok in [
            "*",
            "*.ns.serviceaccount.identity.linkerd.cluster.local",
            "web.ns.serviceaccount.identity.linkerd.cluster.local",
            "a",
            "spiffe://example.org",
            "spiffe://example.org/ns/web/sa_1",
        ] {
            assert_eq!(check_identity(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Web.ns",
            "a..b",
            "-a.b",
            "a.*",
            "*.",
            "a_b",
            "spiffe://",
            "spiffe://Example.org",
            "spiffe://example.org/",
            "spiffe://example.org/a//b",
            "spiffe://example.org/../x",
            "http://example.org/x",
        ] {
            assert_eq!(
                check_identity(bad),
                Err(InvalidIdentity(bad.to_string())),
                "{bad}"
            );
        }
        assert_eq!(
            check_identity("Web").expect_err("invalid").to_string(),
            "invalid identity \"Web\": expected a DNS-like name (lower-case labels, optionally starting with \"*\") or a SPIFFE ID (spiffe://trust-domain/path)"
        );
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
