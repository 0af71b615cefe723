//! Names no object can have: a lookup for one is settled without asking
//! the API server, and client text never reaches an API URL unchecked.
//!
//! Every namespaced object lives in a namespace whose name is a DNS-1123
//! label, and its own name is at least a DNS-1123 subdomain (Services and
//! namespaces are labels, pods and custom resources subdomains: the wider
//! rule is the safe one here).

use super::Query;

/// The longest DNS-1123 label.
const LABEL_MAX: usize = 63;

/// The longest DNS-1123 subdomain.
const SUBDOMAIN_MAX: usize = 253;

/// Whether `s` is a DNS-1123 label: 1 to 63 lower-case letters, digits and
/// `-`, starting and ending with a letter or digit.
pub fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= LABEL_MAX
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// Whether `s` is a DNS-1123 subdomain: at most 253 characters of labels
/// joined by `.`.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX && s.split('.').all(is_dns1123_label)
}

/// Whether an object answering `query` could exist at all. Selector
/// queries are built by the callers from parsed values (addresses, a fixed
/// label); only their namespace is client text.
pub fn could_exist(query: &Query) -> bool {
    match query {
        Query::Named { namespace, name } => {
            is_dns1123_label(namespace) && is_dns1123_subdomain(name)
        }
        Query::Selected { namespace, .. } => namespace.as_deref().is_none_or(is_dns1123_label),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        for good in ["a", "web", "web-1", "0", "a".repeat(63).as_str()] {
            assert!(is_dns1123_label(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Web",
            "a.b",
            "a_b",
            "a b",
            "a%2Fb",
            "../x",
            "a".repeat(64).as_str(),
        ] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn subdomains() {
        assert!(is_dns1123_subdomain("web-0.db"));
        assert!(!is_dns1123_subdomain("web..db"));
        assert!(!is_dns1123_subdomain(".web"));
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(long.len(), 255);
        assert!(!is_dns1123_subdomain(&long));
    }

    #[test]
    fn queries_with_impossible_names_cannot_exist() {
        let named = |namespace: &str, name: &str| Query::Named {
            namespace: namespace.into(),
            name: name.into(),
        };
        assert!(could_exist(&named("default", "web")));
        assert!(!could_exist(&named("default", "Web")));
        assert!(!could_exist(&named("de/fault", "web")));
        assert!(!could_exist(&named("default", "web?watch=1")));
        let selected = |namespace: Option<&str>| Query::Selected {
            namespace: namespace.map(str::to_string),
            fields: "metadata.name=x".into(),
            labels: None,
        };
        assert!(could_exist(&selected(None)));
        assert!(could_exist(&selected(Some("ns"))));
        assert!(!could_exist(&selected(Some("NS"))));
    }
}
