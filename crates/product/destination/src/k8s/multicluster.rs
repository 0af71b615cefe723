//! Services and Secrets → multicluster values: how a Service is discovered
//! ([`discovery`]), and a linked cluster's kubeconfig Secret
//! ([`linked_cluster`]).

use k8s_api::labels;
use k8s_openapi::api::core::v1::{Secret, Service};

use crate::core::discovery::{Discovery, DiscoveryError, Member};

/// How `Get` discovers this Service's endpoints: federated when annotated
/// `remote-discovery` (`svc@cluster,…`) and/or `local-discovery`, else a
/// mirror of a linked cluster's Service when labelled `remote-discovery`,
/// else locally.
pub fn discovery(svc: &Service) -> Result<Discovery, DiscoveryError> {
    let annotations = svc.metadata.annotations.as_ref();
    let remote = annotations.and_then(|a| a.get(labels::REMOTE_DISCOVERY));
    let local = annotations.and_then(|a| a.get(labels::LOCAL_DISCOVERY));
    if remote.is_some() || local.is_some() {
        let mut members: Vec<Member> = remote.map(|list| remote_members(list)).unwrap_or_default();
        if let Some(local) = local.filter(|l| !l.is_empty()) {
            members.push(Member::Local(local.clone()));
        }
        return Ok(Discovery::Federated(members));
    }
    let svc_labels = svc.metadata.labels.as_ref();
    if let Some(cluster) = svc_labels.and_then(|l| l.get(labels::REMOTE_DISCOVERY)) {
        let service = svc_labels
            .and_then(|l| l.get(labels::REMOTE_SERVICE))
            .ok_or(DiscoveryError::MissingRemoteService)?;
        return Ok(Discovery::Remote {
            cluster: cluster.clone(),
            service: service.clone(),
        });
    }
    Ok(Discovery::Local)
}

/// `svc@cluster,…`; entries without exactly one `@` are skipped (logged).
fn remote_members(list: &str) -> Vec<Member> {
    list.split(',')
        .filter_map(|entry| {
            let mut parts = entry.split('@');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(service), Some(cluster), None) => Some(Member::Remote {
                    service: service.to_string(),
                    cluster: cluster.to_string(),
                }),
                _ => {
                    tracing::warn!(
                        entry,
                        "skipping invalid remote discovery entry (want service@cluster)"
                    );
                    None
                }
            }
        })
        .collect()
}

/// A linked cluster as its Secret describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedCluster {
    /// The `multicluster.linkerd.io/cluster-name` label.
    pub name: String,
    /// The kubeconfig to reach its API server.
    pub kubeconfig: String,
    /// Its identity trust domain: the identities of its meshed pods.
    pub trust_domain: String,
    /// Its cluster domain.
    pub cluster_domain: String,
}

/// Why a linked cluster's Secret cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("missing kubeconfig file")]
    MissingKubeconfig,
    #[error("the kubeconfig is not UTF-8")]
    KubeconfigNotUtf8,
    #[error("missing \"{0}\" annotation")]
    MissingAnnotation(&'static str),
}

/// The cluster name of a Secret, if it is a linked cluster's kubeconfig
/// Secret (its type and label; anything else is not ours to read).
pub fn linked_cluster_name(secret: &Secret) -> Option<&str> {
    if secret.type_.as_deref() != Some(labels::REMOTE_KUBECONFIG_SECRET_TYPE) {
        return None;
    }
    secret
        .metadata
        .labels
        .as_ref()?
        .get(labels::MULTICLUSTER_CLUSTER_NAME)
        .map(String::as_str)
}

/// Reads a linked cluster's Secret (call after [`linked_cluster_name`]).
pub fn linked_cluster(name: &str, secret: &Secret) -> Result<LinkedCluster, LinkError> {
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|d| d.get(labels::REMOTE_KUBECONFIG_KEY))
        .ok_or(LinkError::MissingKubeconfig)?;
    let kubeconfig =
        String::from_utf8(kubeconfig.0.clone()).map_err(|_| LinkError::KubeconfigNotUtf8)?;
    let annotation = |key: &'static str| {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
            .ok_or(LinkError::MissingAnnotation(key))
    };
    // The original checks the cluster domain first.
    let cluster_domain = annotation(labels::MULTICLUSTER_CLUSTER_DOMAIN)?;
    let trust_domain = annotation(labels::MULTICLUSTER_TRUST_DOMAIN)?;
    Ok(LinkedCluster {
        name: name.to_string(),
        kubeconfig,
        trust_domain,
        cluster_domain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::from_json;
    use serde_json::json;

    fn svc(labels: serde_json::Value, annotations: serde_json::Value) -> Service {
        from_json(json!({
            "metadata": {"name": "web", "namespace": "ns", "labels": labels, "annotations": annotations},
            "spec": {"ports": [{"port": 80}]}
        }))
    }

    #[test]
    fn plain_services_are_local() {
        assert_eq!(discovery(&svc(json!({}), json!({}))), Ok(Discovery::Local));
    }

    #[test]
    fn mirrors_name_their_cluster_and_remote_service() {
        let mirror = svc(
            json!({"multicluster.linkerd.io/remote-discovery": "east", "multicluster.linkerd.io/remote-service": "web"}),
            json!({}),
        );
        assert_eq!(
            discovery(&mirror),
            Ok(Discovery::Remote {
                cluster: "east".into(),
                service: "web".into()
            })
        );
        let broken = svc(
            json!({"multicluster.linkerd.io/remote-discovery": "east"}),
            json!({}),
        );
        let error = discovery(&broken).expect_err("no remote service");
        assert_eq!(
            error.to_string(),
            "Remote discovery service missing remote service name"
        );
    }

    #[test]
    fn federated_services_list_their_members() {
        let federated = svc(
            json!({}),
            json!({
                "multicluster.linkerd.io/remote-discovery": "web@east,web@west,bogus,a@b@c",
                "multicluster.linkerd.io/local-discovery": "web-local"
            }),
        );
        assert_eq!(
            discovery(&federated),
            Ok(Discovery::Federated(vec![
                Member::Remote {
                    service: "web".into(),
                    cluster: "east".into()
                },
                Member::Remote {
                    service: "web".into(),
                    cluster: "west".into()
                },
                Member::Local("web-local".into()),
            ]))
        );
        // The annotations win over the mirror labels; an empty local name is none.
        let both = svc(
            json!({"multicluster.linkerd.io/remote-discovery": "east"}),
            json!({"multicluster.linkerd.io/local-discovery": ""}),
        );
        assert_eq!(discovery(&both), Ok(Discovery::Federated(Vec::new())));
    }

    fn secret(extra: serde_json::Value) -> Secret {
        let mut base = json!({
            "metadata": {"name": "cluster-credentials-east", "namespace": "linkerd",
                         "labels": {"multicluster.linkerd.io/cluster-name": "east"},
                         "annotations": {"multicluster.linkerd.io/trust-domain": "east.local",
                                         "multicluster.linkerd.io/cluster-domain": "cluster.local"}},
            "type": "mirror.linkerd.io/remote-kubeconfig",
            // "apiVersion: v1" in base64.
            "data": {"kubeconfig": "YXBpVmVyc2lvbjogdjE="}
        });
        if let (Some(b), serde_json::Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        from_json(base)
    }

    #[test]
    fn linked_cluster_secrets() {
        let ok = secret(json!({}));
        assert_eq!(linked_cluster_name(&ok), Some("east"));
        assert_eq!(
            linked_cluster("east", &ok),
            Ok(LinkedCluster {
                name: "east".into(),
                kubeconfig: "apiVersion: v1".into(),
                trust_domain: "east.local".into(),
                cluster_domain: "cluster.local".into(),
            })
        );
        assert_eq!(
            linked_cluster_name(&secret(json!({"type": "Opaque"}))),
            None
        );
        let no_data = secret(json!({"data": {}}));
        assert_eq!(
            linked_cluster("east", &no_data).map_err(|e| e.to_string()),
            Err("missing kubeconfig file".to_string())
        );
        let mut no_trust = secret(json!({}));
        if let Some(a) = no_trust.metadata.annotations.as_mut() {
            a.remove("multicluster.linkerd.io/trust-domain");
        }
        assert_eq!(
            linked_cluster("east", &no_trust).map_err(|e| e.to_string()),
            Err("missing \"multicluster.linkerd.io/trust-domain\" annotation".to_string())
        );
    }
}
