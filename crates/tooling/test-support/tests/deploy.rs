//! The kustomizations of `deploy/` build with the pinned kubectl, and what
//! they build is accepted by a real kube-apiserver (server-side dry run):
//! `deploy/` itself and every overlay. The rendered objects are checked for
//! what the pod needs to start as the Linkerd 2.20 chart starts it. (The
//! swap into an installed Linkerd is tested in `swap.rs`.)

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;
use test_support::{SharedCluster, TestEnv};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy")
}

/// `kubectl kustomize <dir>` (stdout only), as JSON objects.
fn kustomize(cluster: &SharedCluster, dir: &str) -> (String, Vec<Value>) {
    let out = Command::new(cluster.kubectl_path())
        .arg("kustomize")
        .arg(deploy_dir().join(dir))
        .output()
        .expect("running kubectl kustomize");
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("rendered YAML"))
        .collect();
    (yaml, objects)
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn containers<'a>(pod: &'a Value, list: &str) -> Vec<&'a Value> {
    pod[list].as_array().into_iter().flatten().collect()
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    containers(pod, "containers")
        .into_iter()
        .chain(containers(pod, "initContainers"))
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// What every variant must have: the chart's arguments, probes, ports and
/// security settings, the hand-mounted token, labelled objects, no RBAC
/// wildcard.
fn check_common(dir: &str, objects: &[Value]) {
    let sa = find(objects, "ServiceAccount", "linkerd-destination");
    assert_eq!(
        sa["metadata"]["labels"]["linkerd.io/control-plane-ns"], "linkerd",
        "{dir}"
    );
    assert_eq!(
        sa["metadata"]["labels"]["linkerd.io/control-plane-component"],
        "destination"
    );
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        if kind == "ClusterRole" || kind == "Role" {
            for rule in o["rules"].as_array().into_iter().flatten() {
                for field in ["apiGroups", "resources", "verbs"] {
                    assert!(
                        !strings(&rule[field]).contains(&"*"),
                        "{dir}: wildcard in {}",
                        o["metadata"]["name"]
                    );
                }
            }
        }
    }
    for svc in [
        "linkerd-dst",
        "linkerd-dst-headless",
        "linkerd-sp-validator",
        "linkerd-policy",
        "linkerd-policy-validator",
    ] {
        let svc = find(objects, "Service", svc);
        assert_eq!(
            svc["spec"]["selector"]["linkerd.io/control-plane-component"],
            "destination"
        );
    }
    find(objects, "PodDisruptionBudget", "linkerd-dst");
    for hook in [
        "linkerd-sp-validator-webhook-config",
        "linkerd-policy-validator-webhook-config",
    ] {
        // The caBundle belongs to `cargo xtask certs` or cert-manager:
        // a manifest holding one would reset it on every apply.
        let hook = find(objects, "ValidatingWebhookConfiguration", hook);
        assert!(hook["webhooks"][0]["clientConfig"]["caBundle"].is_null());
    }

    let deployment = find(objects, "Deployment", "linkerd-destination");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["serviceAccountName"], "linkerd-destination");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let token = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "kube-api-access")
        .expect("kube-api-access volume");
    assert_eq!(
        token["projected"]["sources"][0]["serviceAccountToken"]["path"],
        "token"
    );

    let destination = container(pod, "destination");
    assert!(destination["command"].is_null(), "the image runs args[0]");
    assert_eq!(
        strings(&destination["args"])[..2],
        ["destination", "-addr=:8086"]
    );
    let sp = container(pod, "sp-validator");
    assert_eq!(
        strings(&sp["args"]),
        [
            "sp-validator",
            "-log-level=info",
            "-log-format=plain",
            "-enable-pprof=false"
        ]
    );
    let policy = container(pod, "policy");
    assert_eq!(strings(&policy["command"]), ["/linkerd-policy-controller"]);
    assert_eq!(policy["env"][0]["name"], "HOSTNAME");
    // The EndpointSlice writer's Lease claimant is the pod's name.
    assert_eq!(destination["env"][0]["name"], "HOSTNAME");
    assert_eq!(
        destination["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    check_slice_writer_rbac(dir, objects);
    for (c, live, ready, port) in [
        (destination, "/ping", "/ready", Value::from(9996)),
        (sp, "/ping", "/ready", Value::from(9997)),
        (policy, "/live", "/ready", Value::from("policy-admin")),
    ] {
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], live, "{dir}");
        assert_eq!(c["livenessProbe"]["httpGet"]["port"], port);
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], ready);
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], port);
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsUser"], 2103);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        let mounts: Vec<&str> = c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["name"].as_str())
            .collect();
        assert!(mounts.contains(&"kube-api-access"), "{mounts:?}");
        // Admin ports end in -admin (`linkerd diagnostics controller-metrics`).
        let ports: Vec<&str> = c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(ports.iter().any(|p| p.ends_with("-admin")), "{ports:?}");
        assert!(
            c["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("meridian/controller:")),
            "{}",
            c["image"]
        );
    }
}

/// The verbs a ClusterRole or Role grants on `group`/`resource`.
fn granted<'a>(role: &'a Value, group: &str, resource: &str) -> Vec<&'a str> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| strings(&r["apiGroups"]).contains(&group))
        .filter(|r| strings(&r["resources"]).contains(&resource))
        .flat_map(|r| strings(&r["verbs"]))
        .collect()
}

/// The ExternalWorkload EndpointSlice writer: it reads workloads, writes
/// slices cluster-wide, and holds its Lease in the control plane's
/// namespace only (a Role there, bound to the pod's ServiceAccount).
fn check_slice_writer_rbac(dir: &str, objects: &[Value]) {
    let destination = find(objects, "ClusterRole", "linkerd-linkerd-destination");
    let slices = granted(destination, "discovery.k8s.io", "endpointslices");
    for verb in ["get", "list", "watch", "create", "update", "delete"] {
        assert!(
            slices.contains(&verb),
            "{dir}: endpointslices {verb}: {slices:?}"
        );
    }
    let workloads = granted(destination, "workload.linkerd.io", "externalworkloads");
    for verb in ["get", "list", "watch"] {
        assert!(workloads.contains(&verb), "{dir}: externalworkloads {verb}");
    }
    assert!(
        granted(destination, "coordination.k8s.io", "leases").is_empty(),
        "{dir}: no cluster-wide lease rights for the destination"
    );
    let role = find(objects, "Role", "linkerd-destination-endpoint-write");
    assert_eq!(role["metadata"]["namespace"], "linkerd", "{dir}");
    let mut leases = granted(role, "coordination.k8s.io", "leases");
    leases.sort_unstable();
    assert_eq!(leases, ["create", "get", "patch"], "{dir}");
    let binding = find(objects, "RoleBinding", "linkerd-destination-endpoint-write");
    assert_eq!(
        binding["roleRef"]["name"],
        "linkerd-destination-endpoint-write"
    );
    assert_eq!(binding["subjects"][0]["name"], "linkerd-destination");
    assert_eq!(binding["subjects"][0]["namespace"], "linkerd");
}

/// The proxy sidecar: identity, policy workload with its variables
/// defined first, native sidecar after proxy-init.
fn check_proxy(objects: &[Value]) {
    let deployment = find(objects, "Deployment", "linkerd-destination");
    let pod = &deployment["spec"]["template"]["spec"];
    let init: Vec<&str> = containers(pod, "initContainers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(init, ["linkerd-init", "linkerd-proxy"]);
    let proxy = container(pod, "linkerd-proxy");
    assert_eq!(proxy["restartPolicy"], "Always");
    let env = proxy["env"].as_array().expect("proxy env");
    let mut defined = Vec::new();
    for var in env {
        let name = var["name"].as_str().expect("env name");
        let value = var["value"].as_str().unwrap_or_default();
        for used in value.split("$(").skip(1) {
            let used = used.split(')').next().unwrap_or_default();
            assert!(
                defined.contains(&used),
                "{name} uses $({used}) before it is defined"
            );
        }
        defined.push(name);
    }
    let value = |name: &str| {
        env.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        value("LINKERD2_PROXY_POLICY_WORKLOAD")["value"],
        "{\"ns\":\"$(_pod_ns)\", \"pod\":\"$(_pod_name)\"}\n"
    );
    assert_eq!(
        value("LINKERD2_PROXY_INBOUND_PORTS")["value"],
        "8086,8090,8443,9443,9990,9996,9997"
    );
    assert_eq!(
        value("LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS")["valueFrom"]["configMapKeyRef"]["name"],
        "linkerd-identity-trust-roots"
    );
    let token = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "linkerd-identity-token")
        .expect("identity token volume");
    assert_eq!(
        token["projected"]["sources"][0]["serviceAccountToken"]["audience"],
        "identity.l5d.io"
    );
    let ns = find(objects, "Namespace", "linkerd");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
}

#[test]
fn the_kustomization_lists_every_crd() {
    let kustomization =
        std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).expect("kustomization");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(deploy_dir().join("crds")).expect("deploy/crds") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".yaml") && !kustomization.contains(&format!("- crds/{name}\n")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "add to deploy/kustomization.yaml: {missing:?}"
    );
}

#[tokio::test]
async fn deploy_manifests_apply_cleanly() {
    let env = TestEnv::new("deploy").await;
    let cluster = env.cluster();
    cluster.ensure_crds();

    // A dry run persists nothing, so the objects in `linkerd` need the
    // namespace to exist for real.
    let (ok, out) = cluster.kubectl(&["create", "namespace", "linkerd"], None);
    assert!(ok || out.contains("AlreadyExists"), "namespace: {out}");

    // Server-side dry run: validated and admitted by the apiserver, not persisted.
    for dir in [
        ".",
        "overlays/no-proxy",
        "overlays/with-proxy",
        "overlays/ha",
        "overlays/ha-one-node",
        "overlays/cert-manager",
    ] {
        let (yaml, objects) = kustomize(cluster, dir);
        check_common(dir, &objects);
        let pod = &find(&objects, "Deployment", "linkerd-destination")["spec"]["template"]["spec"];
        match dir {
            "overlays/with-proxy" | "overlays/ha" => check_proxy(&objects),
            _ => assert!(pod["initContainers"].is_null(), "{dir}: no proxy"),
        }
        let hooks = [
            "linkerd-sp-validator-webhook-config",
            "linkerd-policy-validator-webhook-config",
        ];
        let ha = dir.starts_with("overlays/ha");
        let (replicas, policy) = if ha { (3, "Fail") } else { (1, "Ignore") };
        let deployment = find(&objects, "Deployment", "linkerd-destination");
        assert_eq!(deployment["spec"]["replicas"], replicas, "{dir}");
        for hook in hooks {
            let hook = find(&objects, "ValidatingWebhookConfiguration", hook);
            assert_eq!(hook["webhooks"][0]["failurePolicy"], policy, "{dir}");
            let inject = &hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
            assert_eq!(inject.is_string(), dir == "overlays/cert-manager", "{dir}");
        }
        if ha {
            let anti = &pod["affinity"]["podAntiAffinity"];
            assert!(anti.is_object(), "{dir}");
            // One replica per node is required, except on one node.
            let required = &anti["requiredDuringSchedulingIgnoredDuringExecution"];
            assert_eq!(required.is_array(), dir == "overlays/ha", "{dir}");
            let preferred = anti["preferredDuringSchedulingIgnoredDuringExecution"].to_string();
            assert_eq!(
                preferred.contains("kubernetes.io/hostname"),
                dir == "overlays/ha-one-node",
                "{dir}"
            );
        }
        let crds = objects
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .count();
        assert_eq!(crds > 0, dir == ".", "{dir}: only deploy/ carries the CRDs");

        let (ok, out) = cluster.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&yaml));
        assert!(ok, "{dir}: {out}");
    }

    check_older_versions(&env);
}

/// Older API versions the original serves still apply.
fn check_older_versions(env: &TestEnv) {
    let cluster = env.cluster();
    let older = format!(
        "apiVersion: policy.linkerd.io/v1beta1\nkind: Server\nmetadata:\n  name: old\n  namespace: {ns}\nspec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  port: 8080\n---\napiVersion: policy.linkerd.io/v1alpha1\nkind: HTTPRoute\nmetadata:\n  name: old\n  namespace: {ns}\nspec:\n  parentRefs: [{{group: policy.linkerd.io, kind: Server, name: old}}]\n",
        ns = env.ns
    );
    let (ok, out) = cluster.kubectl(&["apply", "-f", "-"], Some(&older));
    assert!(ok, "older versions: {out}");
    let (ok, out) = cluster.kubectl(
        &[
            "get",
            "servers.v1beta3.policy.linkerd.io",
            "old",
            "-n",
            &env.ns,
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok && out.contains("server.policy.linkerd.io/old"), "{out}");
}

/// `deploy/shadow`: only the shadow's namespace, ServiceAccount, read-only
/// roles and Deployment; the serving pod's containers and arguments plus
/// the flags that keep it from writing; no webhook, Service, PDB, Lease
/// right or Linkerd label; read rights for everything the serving pod
/// reads; accepted by the API server.
#[tokio::test]
async fn the_shadow_is_the_pod_writing_nothing() {
    let env = TestEnv::new("deploy-shadow").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    let (yaml, objects) = kustomize(cluster, "shadow");
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Namespace",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );
    for role in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for verb in strings(&rule["verbs"]) {
                assert!(["get", "list", "watch"].contains(&verb), "{role}");
            }
        }
    }
    // Everything the serving pod reads, the shadow reads.
    let (_, base) = kustomize(cluster, "base");
    let shadow_role = find(&objects, "ClusterRole", "meridian-shadow");
    for name in ["linkerd-linkerd-destination", "linkerd-policy"] {
        for rule in find(&base, "ClusterRole", name)["rules"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !strings(&rule["verbs"]).contains(&"list") {
                continue;
            }
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    let verbs = granted(shadow_role, group, resource);
                    assert!(
                        ["get", "list", "watch"].iter().all(|v| verbs.contains(v)),
                        "{group}/{resource}: {verbs:?}"
                    );
                }
            }
        }
    }
    let secrets = find(&objects, "Role", "meridian-shadow-remote-discovery");
    assert_eq!(secrets["metadata"]["namespace"], "linkerd");
    assert_eq!(granted(secrets, "", "secrets"), ["get", "list", "watch"]);

    let ns = find(&objects, "Namespace", "meridian-shadow");
    assert_eq!(
        ns["metadata"]["labels"]["config.linkerd.io/admission-webhooks"],
        "disabled"
    );
    assert_eq!(
        ns["metadata"]["annotations"]["linkerd.io/inject"],
        "disabled"
    );
    let deployment = find(&objects, "Deployment", "meridian-shadow");
    assert_eq!(deployment["metadata"]["namespace"], "meridian-shadow");
    for labels in [
        &deployment["metadata"]["labels"],
        &deployment["spec"]["selector"]["matchLabels"],
        &deployment["spec"]["template"]["metadata"]["labels"],
    ] {
        let keys: Vec<&String> = labels.as_object().expect("labels").keys().collect();
        assert!(
            keys.iter().all(|k| !k.starts_with("linkerd.io/")),
            "{keys:?}"
        );
    }
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "meridian-shadow");
    let names: Vec<&str> = containers(pod, "containers")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["destination", "policy"]);
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(volumes, ["kube-api-access"]);
    for (container, flags) in [
        ("destination", &["--endpoint-slice-writer-disabled"][..]),
        (
            "policy",
            &[
                "--admission-controller-disabled",
                "--status-writer-disabled",
            ],
        ),
    ] {
        let mut want = test_support::deploy::destination_pod_command(container);
        want.extend(flags.iter().map(|f| f.to_string()));
        assert_eq!(cluster.shadow_pod_command(container), want, "{container}");
    }

    // The Role lives in `linkerd`, the rest in meridian-shadow: both
    // exist for real before a dry run.
    for namespace in ["linkerd", "meridian-shadow"] {
        let (ok, out) = cluster.kubectl(&["create", "namespace", namespace], None);
        assert!(ok || out.contains("AlreadyExists"), "namespace: {out}");
    }
    let (ok, out) = cluster.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&yaml));
    assert!(ok, "shadow: {out}");
}
