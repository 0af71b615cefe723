//! Parses `GetDestination.path` into the Service (and optional instance
//! hostname) and port it names: `name.ns.svc.<cluster-domain>[:port]` or
//! `instance.name.ns.svc.<cluster-domain>[:port]`, port 80 when absent.

use std::net::IpAddr;

/// Port used when the authority has none.
pub const DEFAULT_PORT: u16 = 80;

/// A Service named by a `Get` request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceId {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
}

impl std::fmt::Display for ServiceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.name, self.namespace)
    }
}

/// The parsed target of a `Get` request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// The Service.
    pub service: ServiceId,
    /// Endpoint hostname (headless/StatefulSet instance), if the name had one.
    pub instance: Option<String>,
    /// The requested port.
    pub port: u16,
}

/// Why a destination path was rejected. All variants map to gRPC
/// `InvalidArgument`; each Display names the part that was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityError {
    /// `host:port` could not be split (Go `SplitHostPort` rules; IPv6 needs brackets).
    #[error("invalid authority {authority:?}: {reason}")]
    Malformed {
        /// The whole path.
        authority: String,
        /// What the splitter objected to.
        reason: &'static str,
    },
    /// The port is not a number in 1..=65535.
    #[error("invalid port {port:?} in authority {authority:?}: must be a number in 1..65535")]
    InvalidPort {
        /// The whole path.
        authority: String,
        /// The port text.
        port: String,
    },
    /// The host is an IP literal.
    #[error("IP queries not supported by Get API: host={host}")]
    IpQuery {
        /// The IP literal.
        host: String,
    },
    /// The name ends with a dot.
    #[error("name {name:?} must not end with a dot")]
    TrailingDot {
        /// The host name.
        name: String,
    },
    /// The name does not end in `svc.<cluster-domain>`.
    #[error(
        "name {name:?} does not match cluster domain {cluster_domain:?} (expected a suffix of svc.{cluster_domain})"
    )]
    ForeignDomain {
        /// The host name.
        name: String,
        /// The configured cluster domain.
        cluster_domain: String,
    },
    /// Not 2 or 3 labels before `svc.<cluster-domain>`.
    #[error(
        "invalid service name {name:?}: expected <service>.<namespace>.svc.<cluster-domain> or <instance>.<service>.<namespace>.svc.<cluster-domain>"
    )]
    LabelCount {
        /// The host name.
        name: String,
    },
    /// A label before the suffix is empty (`a..svc.cluster.local`).
    #[error("invalid service name {name:?}: empty label")]
    EmptyLabel {
        /// The host name.
        name: String,
    },
}

/// Parses a destination path against the cluster domain.
pub fn parse_target(path: &str, cluster_domain: &str) -> Result<Target, AuthorityError> {
    let (host, port) = split_host_port(path)?;
    if host.parse::<IpAddr>().is_ok() {
        return Err(AuthorityError::IpQuery {
            host: host.to_string(),
        });
    }
    let (service, instance) = parse_service_name(host, cluster_domain)?;
    Ok(Target {
        service,
        instance,
        port,
    })
}

/// Splits `host[:port]` as the original does: no `:` means port 80, otherwise
/// Go's `SplitHostPort` rules (IPv6 hosts need brackets) and a port in 1..=65535.
pub fn split_host_port(authority: &str) -> Result<(&str, u16), AuthorityError> {
    if !authority.contains(':') {
        return Ok((authority, DEFAULT_PORT));
    }
    let malformed = |reason| AuthorityError::Malformed {
        authority: authority.to_string(),
        reason,
    };
    // `contains(':')` above guarantees a colon.
    let colon = authority
        .rfind(':')
        .ok_or_else(|| malformed("missing port"))?;
    let (host, rest_from_host, rest_from_port) =
        if let Some(bracketed) = authority.strip_prefix('[') {
            let close = bracketed
                .find(']')
                .ok_or_else(|| malformed("missing ']' in address"))?
                + 1;
            if close + 1 == authority.len() {
                return Err(malformed("missing port"));
            }
            if close + 1 != colon {
                return Err(if authority.as_bytes().get(close + 1) == Some(&b':') {
                    malformed("too many colons in address")
                } else {
                    malformed("missing port")
                });
            }
            (
                &authority[1..close],
                &authority[1..],
                &authority[close + 1..],
            )
        } else {
            let host = &authority[..colon];
            if host.contains(':') {
                return Err(malformed("too many colons in address"));
            }
            (host, authority, authority)
        };
    if rest_from_host.contains('[') {
        return Err(malformed("unexpected '[' in address"));
    }
    if rest_from_port.contains(']') {
        return Err(malformed("unexpected ']' in address"));
    }
    let port_text = &authority[colon + 1..];
    let port = parse_go_atoi(port_text)
        .filter(|p| (1..=65535).contains(p))
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| AuthorityError::InvalidPort {
            authority: authority.to_string(),
            port: port_text.to_string(),
        })?;
    Ok((host, port))
}

/// Decimal integer with an optional sign, like Go's `strconv.Atoi`.
fn parse_go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Splits `[instance.]name.ns.svc.<cluster-domain>` into the Service and instance.
pub fn parse_service_name(
    name: &str,
    cluster_domain: &str,
) -> Result<(ServiceId, Option<String>), AuthorityError> {
    if name.ends_with('.') {
        return Err(AuthorityError::TrailingDot {
            name: name.to_string(),
        });
    }
    let labels: Vec<&str> = name.split('.').collect();
    let suffix: Vec<&str> = std::iter::once("svc")
        .chain(cluster_domain.split('.'))
        .collect();
    if labels.len() < suffix.len() || labels[labels.len() - suffix.len()..] != suffix[..] {
        return Err(AuthorityError::ForeignDomain {
            name: name.to_string(),
            cluster_domain: cluster_domain.to_string(),
        });
    }
    let prefix = &labels[..labels.len() - suffix.len()];
    if prefix.iter().any(|l| l.is_empty()) {
        return Err(AuthorityError::EmptyLabel {
            name: name.to_string(),
        });
    }
    let service = |svc: &str, ns: &str| ServiceId {
        name: svc.to_string(),
        namespace: ns.to_string(),
    };
    match prefix {
        [svc, ns] => Ok((service(svc, ns), None)),
        [instance, svc, ns] => Ok((service(svc, ns), Some((*instance).to_string()))),
        _ => Err(AuthorityError::LabelCount {
            name: name.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CD: &str = "cluster.local";

    fn svc(name: &str, ns: &str) -> ServiceId {
        ServiceId {
            name: name.into(),
            namespace: ns.into(),
        }
    }

    #[test]
    fn service_with_and_without_port() {
        let t = parse_target("web.emojivoto.svc.cluster.local:8080", CD).expect("valid");
        assert_eq!(t.service, svc("web", "emojivoto"));
        assert_eq!(t.instance, None);
        assert_eq!(t.port, 8080);

        let t = parse_target("web.emojivoto.svc.cluster.local", CD).expect("valid");
        assert_eq!(t.port, 80);
    }

    #[test]
    fn instance_name() {
        let t = parse_target("db-0.db.data.svc.cluster.local:5432", CD).expect("valid");
        assert_eq!(t.service, svc("db", "data"));
        assert_eq!(t.instance.as_deref(), Some("db-0"));
        assert_eq!(t.port, 5432);
    }

    #[test]
    fn custom_cluster_domain() {
        let t = parse_target("a.b.svc.corp.example.com:1", "corp.example.com").expect("valid");
        assert_eq!(t.service, svc("a", "b"));
        assert!(matches!(
            parse_target("a.b.svc.cluster.local:1", "corp.example.com"),
            Err(AuthorityError::ForeignDomain { .. })
        ));
    }

    #[test]
    fn ip_queries_are_rejected() {
        for path in ["10.1.2.3:80", "10.1.2.3", "[::1]:80", "[fd00::1]:8080"] {
            let err = parse_target(path, CD).expect_err(path);
            assert!(
                matches!(err, AuthorityError::IpQuery { .. }),
                "{path}: {err}"
            );
            assert!(err.to_string().contains("IP queries not supported"));
        }
    }

    #[test]
    fn bad_ports() {
        for (path, port) in [
            ("web.ns.svc.cluster.local:0", "0"),
            ("web.ns.svc.cluster.local:65536", "65536"),
            ("web.ns.svc.cluster.local:http", "http"),
            ("web.ns.svc.cluster.local:", ""),
            ("web.ns.svc.cluster.local:-1", "-1"),
        ] {
            let err = parse_target(path, CD).expect_err(path);
            assert_eq!(
                err,
                AuthorityError::InvalidPort {
                    authority: path.into(),
                    port: port.into()
                }
            );
            assert!(err.to_string().contains("invalid port"), "{err}");
        }
        // Go's Atoi accepts a plus sign and leading zeros.
        assert_eq!(
            parse_target("web.ns.svc.cluster.local:+080", CD)
                .expect("ok")
                .port,
            80
        );
        assert_eq!(
            parse_target("web.ns.svc.cluster.local:65535", CD)
                .expect("ok")
                .port,
            65535
        );
    }

    #[test]
    fn malformed_authorities() {
        for path in [
            "::1:80",
            "fd00::1",
            "[::1]",
            "[::1]x:80",
            "[::1:80",
            "a:b:80",
            "[a]:[b]:80",
            "a]:80",
        ] {
            let err = parse_target(path, CD).expect_err(path);
            assert!(
                matches!(err, AuthorityError::Malformed { .. }),
                "{path}: {err}"
            );
            assert!(err.to_string().contains(path), "{err}");
        }
    }

    #[test]
    fn bracketed_name_is_split_like_go() {
        let t = parse_target("[web.ns.svc.cluster.local]:81", CD).expect("valid");
        assert_eq!((t.service, t.port), (svc("web", "ns"), 81));
    }

    #[test]
    fn bad_names() {
        assert!(matches!(
            parse_target("linkerd.io:80", CD),
            Err(AuthorityError::ForeignDomain { .. })
        ));
        assert!(matches!(
            parse_target("web.ns.svc.cluster.local.:80", CD),
            Err(AuthorityError::TrailingDot { .. })
        ));
        for path in [
            "ns.svc.cluster.local",
            "svc.cluster.local",
            "a.b.c.d.svc.cluster.local",
            "cluster.local",
        ] {
            let err = parse_target(path, CD).expect_err(path);
            assert!(
                matches!(
                    err,
                    AuthorityError::LabelCount { .. } | AuthorityError::ForeignDomain { .. }
                ),
                "{path}: {err}"
            );
        }
        assert!(matches!(
            parse_target("a.b.c.d.svc.cluster.local", CD),
            Err(AuthorityError::LabelCount { .. })
        ));
        assert!(matches!(
            parse_target("web..svc.cluster.local", CD),
            Err(AuthorityError::EmptyLabel { .. })
        ));
        assert!(matches!(
            parse_target("", CD),
            Err(AuthorityError::ForeignDomain { .. })
        ));
        let err = parse_target("web.ns.svc.other.local", CD).expect_err("foreign");
        assert!(err.to_string().contains("cluster.local"), "{err}");
    }
}
