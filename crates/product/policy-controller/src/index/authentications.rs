//! The MeshTLS and Network authentications of every namespace, as the
//! inbound index keeps them to resolve AuthorizationPolicies (which may
//! reference them across namespaces; [`crate::k8s::authz`] reads them).

use std::collections::HashMap;

use crate::{
    core::{ClientAuthentication, ClientAuthorization, ClusterInfo, IdentityMatch, NetworkMatch},
    k8s::{
        InvalidResource,
        authz::{AuthenticationRef, PolicySpec, set_once},
    },
};

/// The MeshTLS and Network authentications of every namespace (they may be
/// referenced across namespaces).
#[derive(Debug, Default)]
pub struct Authentications {
    by_ns: HashMap<String, NsAuthentications>,
}

#[derive(Debug, Default)]
struct NsAuthentications {
    mesh_tls: HashMap<String, Vec<IdentityMatch>>,
    network: HashMap<String, Vec<NetworkMatch>>,
}

impl Authentications {
    /// Per namespace, its MeshTLSAuthentications and NetworkAuthentications.
    pub fn counts(&self) -> impl Iterator<Item = (&str, usize, usize)> {
        self.by_ns
            .iter()
            .map(|(ns, a)| (ns.as_str(), a.mesh_tls.len(), a.network.len()))
    }

    /// Sets (or with `None`, removes) a MeshTLSAuthentication; returns
    /// whether anything changed.
    pub fn set_mesh_tls(&mut self, ns: &str, name: &str, ids: Option<Vec<IdentityMatch>>) -> bool {
        let changed = match ids {
            Some(ids) => {
                let entry = self.by_ns.entry(ns.to_string()).or_default();
                entry.mesh_tls.insert(name.to_string(), ids.clone()) != Some(ids)
            }
            None => self
                .by_ns
                .get_mut(ns)
                .is_some_and(|e| e.mesh_tls.remove(name).is_some()),
        };
        self.prune(ns);
        changed
    }

    /// Sets (or with `None`, removes) a NetworkAuthentication; returns
    /// whether anything changed.
    pub fn set_network(&mut self, ns: &str, name: &str, nets: Option<Vec<NetworkMatch>>) -> bool {
        let changed = match nets {
            Some(nets) => {
                let entry = self.by_ns.entry(ns.to_string()).or_default();
                entry.network.insert(name.to_string(), nets.clone()) != Some(nets)
            }
            None => self
                .by_ns
                .get_mut(ns)
                .is_some_and(|e| e.network.remove(name).is_some()),
        };
        self.prune(ns);
        changed
    }

    fn prune(&mut self, ns: &str) {
        if self
            .by_ns
            .get(ns)
            .is_some_and(|e| e.mesh_tls.is_empty() && e.network.is_empty())
        {
            self.by_ns.remove(ns);
        }
    }

    fn mesh_tls(&self, ns: &str, name: &str) -> Option<&Vec<IdentityMatch>> {
        self.by_ns.get(ns)?.mesh_tls.get(name)
    }

    fn network(&self, ns: &str, name: &str) -> Option<&Vec<NetworkMatch>> {
        self.by_ns.get(ns)?.network.get(name)
    }

    /// Resolves a policy of namespace `ns` into the clients it authorizes.
    /// A missing referent, or more than one identity source (MeshTLS or
    /// ServiceAccount) or network source, is an error: the policy is
    /// ignored until something changes.
    pub fn resolve(
        &self,
        policy: &PolicySpec,
        ns: &str,
        cluster: &ClusterInfo,
    ) -> Result<ClientAuthorization, InvalidResource> {
        let mut identities: Option<Vec<IdentityMatch>> = None;
        let mut networks: Option<Vec<NetworkMatch>> = None;
        for authn in &policy.authentications {
            match authn {
                AuthenticationRef::MeshTls { namespace, name } => {
                    let ref_ns = namespace.as_deref().unwrap_or(ns);
                    let ids = self.mesh_tls(ref_ns, name).ok_or_else(|| {
                        InvalidResource::MissingAuthentication {
                            kind: "MeshTLSAuthentication",
                            namespace: ref_ns.to_string(),
                            name: name.clone(),
                        }
                    })?;
                    set_once(&mut identities, ids.clone(), "identity")?;
                }
                AuthenticationRef::ServiceAccount { namespace, name } => {
                    let ref_ns = namespace.as_deref().unwrap_or(ns);
                    let id = cluster.service_account_identity(name, ref_ns);
                    set_once(&mut identities, vec![id], "identity")?;
                }
                AuthenticationRef::Network { namespace, name } => {
                    let ref_ns = namespace.as_deref().unwrap_or(ns);
                    let nets = self.network(ref_ns, name).ok_or_else(|| {
                        InvalidResource::MissingAuthentication {
                            kind: "NetworkAuthentication",
                            namespace: ref_ns.to_string(),
                            name: name.clone(),
                        }
                    })?;
                    set_once(&mut networks, nets.clone(), "network")?;
                }
            }
        }
        Ok(ClientAuthorization {
            networks: networks.unwrap_or_else(NetworkMatch::all),
            authentication: identities
                .map(ClientAuthentication::TlsAuthenticated)
                .unwrap_or(ClientAuthentication::Unauthenticated),
        })
    }
}
