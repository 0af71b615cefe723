//! Authorization resources as the index uses them: ServerAuthorizations
//! (resolved at once), AuthorizationPolicies (resolved against the
//! authentications when a server is built, `crate::index::authentications`),
//! MeshTLSAuthentications and NetworkAuthentications. The spec conversions
//! are public so that the admission webhook applies the same rules (all but
//! "authorizes no clients", which the original leaves to its index).

use k8s_api::policy::{
    AuthorizationPolicySpec, MeshTlsAuthenticationSpec, NetworkAuthenticationSpec,
    ServerAuthorizationSpec, network::Network, target_ref::NamespacedTargetRef,
};

use super::{
    InvalidResource,
    selector::{Labels, Selector},
};
use crate::core::{
    ClientAuthentication, ClientAuthorization, ClusterInfo, GroupKindName, IdentityMatch,
    NetworkMatch, check_identity,
};

const POLICY_GROUP: &str = k8s_api::policy::GROUP;
const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// A ServerAuthorization: which Servers, and which clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAuthz {
    pub servers: ServerSelector,
    pub authz: ClientAuthorization,
}

/// How a ServerAuthorization picks Servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerSelector {
    Name(String),
    /// Over the Servers' labels.
    Selector(Selector),
}

impl ServerSelector {
    pub fn selects(&self, name: &str, labels: &Labels) -> bool {
        match self {
            Self::Name(n) => n == name,
            Self::Selector(s) => s.matches(labels),
        }
    }
}

/// Converts a ServerAuthorization of namespace `ns`.
pub fn server_authorization(
    spec: &ServerAuthorizationSpec,
    ns: &str,
    cluster: &ClusterInfo,
) -> Result<ServerAuthz, InvalidResource> {
    let servers = match (&spec.server.name, &spec.server.selector) {
        (Some(name), _) => ServerSelector::Name(name.clone()),
        (None, Some(selector)) => ServerSelector::Selector(Selector::try_from(selector)?),
        (None, None) => ServerSelector::Selector(Selector::default()),
    };
    let networks = networks(spec.client.networks.iter().flatten())?;
    let unauthenticated = spec.client.unauthenticated == Some(true);
    if unauthenticated && spec.client.mesh_tls.is_some() {
        return Err(InvalidResource::MeshTlsAndUnauthenticated);
    }
    if let Some(mtls) = &spec.client.mesh_tls
        && mtls.unauthenticated_tls == Some(true)
        && (mtls.identities.as_ref().is_some_and(|i| !i.is_empty())
            || mtls
                .service_accounts
                .as_ref()
                .is_some_and(|s| !s.is_empty()))
    {
        return Err(InvalidResource::UnauthenticatedTlsWithIdentities);
    }
    let authentication = if unauthenticated {
        ClientAuthentication::Unauthenticated
    } else if let Some(mtls) = &spec.client.mesh_tls {
        if mtls.unauthenticated_tls == Some(true) {
            ClientAuthentication::TlsUnauthenticated
        } else {
            let ids = mtls
                .identities
                .iter()
                .flatten()
                .map(|id| IdentityMatch::from(id.as_str()));
            let sas = mtls.service_accounts.iter().flatten().map(|sa| {
                let sa_ns = sa.namespace.as_deref().unwrap_or(ns);
                cluster.service_account_identity(&sa.name, sa_ns)
            });
            let identities: Vec<_> = ids.chain(sas).collect();
            if identities.is_empty() {
                return Err(InvalidResource::NoClients);
            }
            ClientAuthentication::TlsAuthenticated(identities)
        }
    } else {
        return Err(InvalidResource::NoClients);
    };
    Ok(ServerAuthz {
        servers,
        authz: ClientAuthorization {
            networks,
            authentication,
        },
    })
}

/// What an AuthorizationPolicy applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyTarget {
    Server(String),
    /// Every Server of the policy's namespace.
    Namespace,
    /// A route (`policy.linkerd.io` or `gateway.networking.k8s.io` HTTPRoute,
    /// or a gateway GRPCRoute).
    Route(GroupKindName),
}

/// An authentication an AuthorizationPolicy requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthenticationRef {
    MeshTls {
        namespace: Option<String>,
        name: String,
    },
    Network {
        namespace: Option<String>,
        name: String,
    },
    ServiceAccount {
        namespace: Option<String>,
        name: String,
    },
}

/// A converted AuthorizationPolicy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    pub target: PolicyTarget,
    pub authentications: Vec<AuthenticationRef>,
}

/// Converts an AuthorizationPolicy spec of namespace `ns`. Unsupported
/// targets and authentication kinds, a Namespace target other than `ns`,
/// more than one MeshTLS, ServiceAccount or Network authentication, or both
/// a MeshTLS and a ServiceAccount authentication are errors.
pub fn authorization_policy(
    spec: &AuthorizationPolicySpec,
    ns: &str,
) -> Result<PolicySpec, InvalidResource> {
    let t = &spec.target_ref;
    let route = |group: &str| {
        PolicyTarget::Route(GroupKindName {
            group: group.to_string(),
            kind: t.kind.clone(),
            name: t.name.clone(),
        })
    };
    let target = if t.targets_kind(POLICY_GROUP, "Server") {
        PolicyTarget::Server(t.name.clone())
    } else if t.targets_kind("core", "Namespace") {
        if t.name != ns {
            return Err(InvalidResource::ForeignNamespaceTarget {
                namespace: ns.to_string(),
                target: t.name.clone(),
            });
        }
        PolicyTarget::Namespace
    } else if t.targets_kind(POLICY_GROUP, "HTTPRoute") {
        route(POLICY_GROUP)
    } else if t.targets_kind(GATEWAY_GROUP, "HTTPRoute")
        || t.targets_kind(GATEWAY_GROUP, "GRPCRoute")
    {
        route(GATEWAY_GROUP)
    } else {
        return Err(InvalidResource::UnsupportedTarget {
            group: t.group.clone().unwrap_or_default(),
            kind: t.kind.clone(),
        });
    };
    let authentications: Vec<_> = spec
        .required_authentication_refs
        .iter()
        .map(authentication_ref)
        .collect::<Result<_, _>>()?;
    check_authentication_counts(&authentications)?;
    Ok(PolicySpec {
        target,
        authentications,
    })
}

fn check_authentication_counts(refs: &[AuthenticationRef]) -> Result<(), InvalidResource> {
    let count = |f: fn(&AuthenticationRef) -> bool| refs.iter().filter(|r| f(r)).count();
    let mesh_tls = count(|r| matches!(r, AuthenticationRef::MeshTls { .. }));
    let service_accounts = count(|r| matches!(r, AuthenticationRef::ServiceAccount { .. }));
    let networks = count(|r| matches!(r, AuthenticationRef::Network { .. }));
    let conflict = InvalidResource::ConflictingAuthentications;
    if mesh_tls > 1 {
        return Err(conflict(
            "at most one MeshTLSAuthentication may be required",
        ));
    }
    if service_accounts > 1 {
        return Err(conflict("at most one ServiceAccount may be required"));
    }
    if mesh_tls > 0 && service_accounts > 0 {
        return Err(conflict(
            "a MeshTLSAuthentication and a ServiceAccount may not both be required",
        ));
    }
    if networks > 1 {
        return Err(conflict(
            "at most one NetworkAuthentication may be required",
        ));
    }
    Ok(())
}

fn authentication_ref(r: &NamespacedTargetRef) -> Result<AuthenticationRef, InvalidResource> {
    let name = || {
        r.name
            .clone()
            .ok_or_else(|| InvalidResource::MissingName(r.kind.clone()))
    };
    let namespace = r.namespace.clone();
    if r.targets_kind(POLICY_GROUP, "MeshTLSAuthentication") {
        Ok(AuthenticationRef::MeshTls {
            namespace,
            name: name()?,
        })
    } else if r.targets_kind(POLICY_GROUP, "NetworkAuthentication") {
        Ok(AuthenticationRef::Network {
            namespace,
            name: name()?,
        })
    } else if r.targets_kind("core", "ServiceAccount") {
        Ok(AuthenticationRef::ServiceAccount {
            namespace,
            name: name()?,
        })
    } else {
        Err(InvalidResource::UnsupportedAuthentication {
            group: r.group.clone().unwrap_or_default(),
            kind: r.kind.clone(),
        })
    }
}

pub(crate) fn set_once<T>(
    slot: &mut Option<T>,
    value: T,
    what: &'static str,
) -> Result<(), InvalidResource> {
    if slot.is_some() {
        return Err(InvalidResource::MultipleAuthentications(what));
    }
    *slot = Some(value);
    Ok(())
}

/// Converts a MeshTLSAuthentication of namespace `ns` into identity matches.
pub fn mesh_tls_authentication(
    spec: &MeshTlsAuthenticationSpec,
    ns: &str,
    cluster: &ClusterInfo,
) -> Result<Vec<IdentityMatch>, InvalidResource> {
    let mut ids: Vec<IdentityMatch> = spec
        .identities
        .iter()
        .flatten()
        .map(|id| {
            check_identity(id)?;
            Ok(IdentityMatch::from(id.as_str()))
        })
        .collect::<Result<_, InvalidResource>>()?;
    for r in spec.identity_refs.iter().flatten() {
        if r.targets_kind("core", "ServiceAccount") {
            let name = r
                .name
                .as_deref()
                .ok_or_else(|| InvalidResource::MissingName(r.kind.clone()))?;
            ids.push(cluster.service_account_identity(name, r.namespace.as_deref().unwrap_or(ns)));
        } else if r.targets_kind("core", "Namespace") {
            if r.namespace.is_some() {
                return Err(InvalidResource::NamespaceRefWithNamespace);
            }
            let target = r
                .name
                .as_deref()
                .ok_or_else(|| InvalidResource::MissingName(r.kind.clone()))?;
            ids.push(IdentityMatch::namespace(
                target,
                &cluster.control_plane_ns,
                &cluster.identity_domain,
            ));
        } else {
            return Err(InvalidResource::UnsupportedIdentityRef(r.kind.clone()));
        }
    }
    if ids.is_empty() {
        return Err(InvalidResource::NoClients);
    }
    Ok(ids)
}

/// Converts a NetworkAuthentication into network matches.
pub fn network_authentication(
    spec: &NetworkAuthenticationSpec,
) -> Result<Vec<NetworkMatch>, InvalidResource> {
    let nets = networks(spec.networks.iter())?;
    if nets.is_empty() {
        return Err(InvalidResource::NoNetworks);
    }
    Ok(nets)
}

/// Parses networks; each `except` must lie inside its `cidr` without
/// covering all of it.
pub(crate) fn networks<'a>(
    nets: impl Iterator<Item = &'a Network>,
) -> Result<Vec<NetworkMatch>, InvalidResource> {
    nets.map(|n| {
        let m = NetworkMatch::parse(&n.cidr, n.except.iter().flatten().map(String::as_str))?;
        for except in &m.except {
            if !m.net.contains(except) {
                return Err(InvalidResource::ExceptOutsideCidr {
                    cidr: m.net,
                    except: *except,
                });
            }
            if except.prefix_len() <= m.net.prefix_len() {
                return Err(InvalidResource::ExceptCoversCidr {
                    cidr: m.net,
                    except: *except,
                });
            }
        }
        Ok(m)
    })
    .collect()
}
