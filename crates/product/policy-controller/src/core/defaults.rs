//! The six default inbound policies (`--default-policy`, the
//! `config.linkerd.io/default-inbound-policy` annotation and a Server's
//! `accessPolicy`) and the authorizations each expands to.

use std::{fmt, str::FromStr};

use ipnet::IpNet;

use super::{
    AuthorizationRef, Authorizations, ClientAuthentication, ClientAuthorization, IdentityMatch,
    NetworkMatch,
};

/// What clients may do on a port no Server (or authorization) covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DefaultPolicy {
    AllUnauthenticated,
    AllAuthenticated,
    ClusterUnauthenticated,
    ClusterAuthenticated,
    Deny,
    Audit,
}

/// A string that names no default policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid default policy {0:?} (expected one of all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny, audit)"
)]
pub struct InvalidDefaultPolicy(pub String);

impl DefaultPolicy {
    pub const ALL: [DefaultPolicy; 6] = [
        Self::AllUnauthenticated,
        Self::AllAuthenticated,
        Self::ClusterUnauthenticated,
        Self::ClusterAuthenticated,
        Self::Deny,
        Self::Audit,
    ];

    /// The policy's name, as in flags and annotations.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllUnauthenticated => "all-unauthenticated",
            Self::AllAuthenticated => "all-authenticated",
            Self::ClusterUnauthenticated => "cluster-unauthenticated",
            Self::ClusterAuthenticated => "cluster-authenticated",
            Self::Deny => "deny",
            Self::Audit => "audit",
        }
    }

    /// The policy with authentication required (for ports listed in
    /// `config.linkerd.io/proxy-require-identity-inbound-ports`); deny and
    /// audit are unchanged.
    pub fn require_identity(self) -> Self {
        match self {
            Self::AllUnauthenticated => Self::AllAuthenticated,
            Self::ClusterUnauthenticated => Self::ClusterAuthenticated,
            other => other,
        }
    }

    /// The authorizations the policy grants: none for `deny`, one
    /// `Default(<policy name>)` entry otherwise.
    pub fn authorizations(self, cluster_networks: &[IpNet]) -> Authorizations {
        let cluster = || {
            cluster_networks
                .iter()
                .copied()
                .map(NetworkMatch::from)
                .collect()
        };
        let authenticated =
            || ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::Suffix(vec![])]);
        let authz = match self {
            Self::Deny => return Authorizations::new(),
            Self::AllUnauthenticated | Self::Audit => ClientAuthorization::allow_all(),
            Self::AllAuthenticated => ClientAuthorization {
                networks: NetworkMatch::all(),
                authentication: authenticated(),
            },
            Self::ClusterUnauthenticated => ClientAuthorization {
                networks: cluster(),
                authentication: ClientAuthentication::Unauthenticated,
            },
            Self::ClusterAuthenticated => ClientAuthorization {
                networks: cluster(),
                authentication: authenticated(),
            },
        };
        [(AuthorizationRef::Default(self.as_str()), authz)].into()
    }
}

impl FromStr for DefaultPolicy {
    type Err = InvalidDefaultPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| InvalidDefaultPolicy(s.to_string()))
    }
}

impl fmt::Display for DefaultPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("valid net")
    }

    #[test]
    fn names_round_trip_and_bad_names_fail() {
        for p in DefaultPolicy::ALL {
            assert_eq!(p.as_str().parse::<DefaultPolicy>(), Ok(p));
        }
        assert!("allow".parse::<DefaultPolicy>().is_err());
    }

    #[test]
    fn expansion_follows_the_table() {
        let cluster = [net("10.0.0.0/8")];
        let all = NetworkMatch::all();
        let cluster_nets = vec![NetworkMatch::from(net("10.0.0.0/8"))];
        let any_id = ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::Suffix(vec![])]);
        let unauth = ClientAuthentication::Unauthenticated;
        let cases = [
            (DefaultPolicy::AllUnauthenticated, &all, &unauth),
            (DefaultPolicy::AllAuthenticated, &all, &any_id),
            (
                DefaultPolicy::ClusterUnauthenticated,
                &cluster_nets,
                &unauth,
            ),
            (DefaultPolicy::ClusterAuthenticated, &cluster_nets, &any_id),
            (DefaultPolicy::Audit, &all, &unauth),
        ];
        for (policy, networks, authn) in cases {
            let expected: Authorizations = [(
                AuthorizationRef::Default(policy.as_str()),
                ClientAuthorization {
                    networks: networks.clone(),
                    authentication: authn.clone(),
                },
            )]
            .into();
            assert_eq!(policy.authorizations(&cluster), expected, "{policy}");
        }
        assert!(DefaultPolicy::Deny.authorizations(&cluster).is_empty());
    }

    #[test]
    fn require_identity_upgrades_allow_policies_only() {
        use DefaultPolicy::*;
        assert_eq!(AllUnauthenticated.require_identity(), AllAuthenticated);
        assert_eq!(
            ClusterUnauthenticated.require_identity(),
            ClusterAuthenticated
        );
        assert_eq!(AllAuthenticated.require_identity(), AllAuthenticated);
        assert_eq!(Deny.require_identity(), Deny);
        assert_eq!(Audit.require_identity(), Audit);
    }
}
