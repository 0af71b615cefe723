//! Owners: a pod's owner label follows its ReplicaSet's or Job's own owner,
//! from metadata-only watches; an owner change refreshes its namespace only.

use k8s_openapi::api::{apps::v1::ReplicaSet, batch::v1::Job};
use kube::core::PartialObjectMeta;

use super::*;

fn owned_pod(name: &str, ip: &str, kind: &str, owner: &str) -> Pod {
    let mut pod = pod(name, ip);
    pod.metadata.owner_references = Some(vec![obj(json!({
        "apiVersion": "v1", "kind": kind, "name": owner, "uid": "u1"
    }))]);
    pod
}

fn parent<K>(ns: &str, name: &str, owner: Option<(&str, &str)>) -> PartialObjectMeta<K> {
    let refs: Vec<Value> = owner
        .into_iter()
        .map(|(kind, name)| json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u2"}))
        .collect();
    PartialObjectMeta {
        types: None,
        metadata: obj(json!({"namespace": ns, "name": name, "ownerReferences": refs})),
        _phantom: Default::default(),
    }
}

fn owned(pod: &str, addr: &str, key: &str, name: &str) -> EndpointView {
    EndpointView {
        owner: (key.into(), name.into()),
        ..ep(pod, addr)
    }
}

#[test]
fn a_replica_set_owned_by_a_deployment_labels_its_pods_with_the_deployment() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(owned_pod("web-0", "10.0.0.1", "ReplicaSet", "web-abc"));
    idx.apply(slice("web-s", "web", &[("web-0", "10.0.0.1", true)]));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert_eq!(
        current(&mut rx),
        exists(vec![owned(
            "web-0",
            "10.0.0.1:8080",
            "replicaset",
            "web-abc"
        )]),
        "an unknown ReplicaSet labels as itself"
    );

    idx.apply(parent::<ReplicaSet>(
        NS,
        "web-abc",
        Some(("Deployment", "web")),
    ));
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![owned(
            "web-0",
            "10.0.0.1:8080",
            "deployment",
            "web"
        )]))
    );

    // The same owner again, or an owner in another namespace, touches nothing.
    idx.apply(parent::<ReplicaSet>(
        NS,
        "web-abc",
        Some(("Deployment", "web")),
    ));
    idx.apply(parent::<ReplicaSet>(
        "other",
        "web-abc",
        Some(("Deployment", "x")),
    ));
    assert_eq!(changed(&mut rx), None);

    // A deleted parent keeps its pods' labels until the pods change: the
    // same pod again is no change (nothing the index keeps of it differs);
    // a change to what it keeps (here its ServiceAccount) is.
    delete::<PartialObjectMeta<ReplicaSet>>(&mut idx, "web-abc");
    assert_eq!(changed(&mut rx), None);
    idx.apply(owned_pod("web-0", "10.0.0.1", "ReplicaSet", "web-abc"));
    assert_eq!(changed(&mut rx), None);
    let mut edited = owned_pod("web-0", "10.0.0.1", "ReplicaSet", "web-abc");
    if let Some(spec) = edited.spec.as_mut() {
        spec.service_account_name = Some("web".into());
    }
    idx.apply(edited);
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![owned(
            "web-0",
            "10.0.0.1:8080",
            "replicaset",
            "web-abc"
        )]))
    );
}

#[test]
fn a_job_labels_as_its_owner_else_as_k8s_job() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(owned_pod("job-0", "10.0.0.1", "Job", "nightly-1"));
    idx.apply(slice("web-s", "web", &[("job-0", "10.0.0.1", true)]));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    assert_eq!(
        current(&mut rx),
        exists(vec![owned(
            "job-0",
            "10.0.0.1:8080",
            "k8s_job",
            "nightly-1"
        )])
    );
    idx.apply(parent::<Job>(NS, "nightly-1", Some(("CronJob", "nightly"))));
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![owned(
            "job-0",
            "10.0.0.1:8080",
            "cronjob",
            "nightly"
        )]))
    );
    // The Job losing its owner relabels the pod.
    idx.apply(parent::<Job>(NS, "nightly-1", None));
    assert_eq!(
        changed(&mut rx),
        Some(exists(vec![owned(
            "job-0",
            "10.0.0.1:8080",
            "k8s_job",
            "nightly-1"
        )]))
    );
}
