//! The ExternalWorkload EndpointSlice writer end to end: `destination`
//! processes (with `HOSTNAME` set, as in a pod) against the real local
//! control plane, their Lease in the test's namespace. A Service selecting
//! an ExternalWorkload gets our slice with the original's shape, readiness
//! and deletion follow the workload, kube-controller-manager's own slice is
//! left alone, and of two replicas only the Lease holder writes until it is
//! killed, when the other takes over. Started as `deploy/` starts it, under
//! the pod's ServiceAccount, it writes with no more RBAC than
//! `deploy/base/rbac.yaml` grants.

use std::{collections::BTreeMap, time::Duration};

use k8s_api::workload::ExternalWorkload;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Service, discovery::v1::EndpointSlice};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{
    ServerProcess, TestEnv, deploy::destination_pod_command, eventually, free_addr,
};

use crate::common::{LINKERD_LEASES, WRITERS, wait_linkerd_leases_free};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The Lease lasts 30 s unrenewed; a follower checks every 2 s.
const TAKEOVER: Duration = Duration::from_secs(90);
const LEASE: &str = "linkerd-destination-endpoint-write";
const MANAGED_BY: &str = "linkerd-external-workloads-controller";

/// A destination named `hostname`, its Lease in the test's namespace.
async fn start_writer(env: &TestEnv, hostname: &str) -> ServerProcess {
    env.cluster().ensure_crds();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={}", free_addr()),
        format!("--admin-addr={admin}"),
        format!("--controller-namespace={}", env.ns),
    ];
    ServerProcess::start_with_env(
        env!("CARGO_BIN_EXE_destination").as_ref(),
        &args,
        admin,
        &[("HOSTNAME", hostname)],
    )
    .await
}

async fn create_web_service(env: &TestEnv) -> Service {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]
        }
    }))
    .expect("service");
    env.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service")
}

/// An ExternalWorkload `app: web` at `ip`, port `http` 8080, and its
/// `Ready` condition.
async fn create_workload(env: &TestEnv, name: &str, ip: &str, ready: bool) -> ExternalWorkload {
    let ew: ExternalWorkload = serde_json::from_value(json!({
        "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "meshTLS": {
                "identity": format!("spiffe://root.linkerd.cluster.local/{name}"),
                "serverName": format!("{name}.cluster.local")
            },
            "ports": [{"name": "http", "port": 8080}],
            "workloadIPs": [{"ip": ip}]
        }
    }))
    .expect("workload");
    let created = env
        .api::<ExternalWorkload>()
        .create(&PostParams::default(), &ew)
        .await
        .expect("create workload");
    set_ready(env, name, ready).await;
    created
}

async fn set_ready(env: &TestEnv, name: &str, ready: bool) {
    let status = json!({"status": {"conditions": [{
        "type": "Ready",
        "status": if ready { "True" } else { "False" },
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "Probed",
    }]}});
    env.api::<ExternalWorkload>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch workload status");
}

/// Our slices of `web`.
async fn our_slices(env: &TestEnv) -> Vec<EndpointSlice> {
    let lp = ListParams::default().labels(&format!(
        "kubernetes.io/service-name=web,endpointslice.kubernetes.io/managed-by={MANAGED_BY}"
    ));
    env.api::<EndpointSlice>()
        .list(&lp)
        .await
        .expect("list slices")
        .items
}

/// (address, ready, target name) of every endpoint in our slices, sorted.
async fn our_endpoints(env: &TestEnv) -> Vec<(String, bool, String)> {
    let mut eps: Vec<(String, bool, String)> = our_slices(env)
        .await
        .iter()
        .flat_map(|s| s.endpoints.clone().unwrap_or_default())
        .map(|e| {
            let ready = e.conditions.and_then(|c| c.ready).unwrap_or(false);
            let target = e.target_ref.and_then(|t| t.name).unwrap_or_default();
            (e.addresses.join(","), ready, target)
        })
        .collect();
    eps.sort();
    eps
}

async fn wait_endpoints(env: &TestEnv, what: &str, want: &[(&str, bool, &str)]) {
    let want: Vec<(String, bool, String)> = want
        .iter()
        .map(|(a, r, t)| (a.to_string(), *r, t.to_string()))
        .collect();
    eventually(what, TIMEOUT, || {
        let want = want.clone();
        async move {
            let got = our_endpoints(env).await;
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        }
    })
    .await;
}

async fn holder(env: &TestEnv) -> Option<String> {
    holder_in(env, &env.ns).await
}

async fn holder_in(env: &TestEnv, namespace: &str) -> Option<String> {
    kube::Api::<Lease>::namespaced(env.client.clone(), namespace)
        .get_opt(LEASE)
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// `workqueue_adds_total{name="endpoints_controller_workqueue"}` of a process.
async fn queue_adds(process: &ServerProcess) -> u64 {
    let (status, body) = process.admin_get("/metrics").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| {
            l.strip_prefix("workqueue_adds_total{name=\"endpoints_controller_workqueue\"} ")
        })
        .unwrap_or_else(|| panic!("no workqueue_adds_total in:\n{body}"))
        .trim()
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn slices_follow_the_selected_workloads() {
    let env = TestEnv::new("ew-slices").await;
    let _turn = WRITERS.lock().await;
    let _writer = start_writer(&env, "dest-solo").await;
    let svc = create_web_service(&env).await;
    let vm = create_workload(&env, "vm", "192.0.2.10", true).await;

    wait_endpoints(
        &env,
        "the workload's ready endpoint",
        &[("192.0.2.10", true, "vm")],
    )
    .await;
    let slices = our_slices(&env).await;
    let [slice] = slices.as_slice() else {
        panic!("one slice: {slices:?}");
    };
    let name = slice.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("linkerd-external-web-"), "{name}");
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("team").map(String::as_str),
        Some("a"),
        "{labels:?}"
    );
    let owners = slice.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].kind, "Service");
    assert_eq!(Some(owners[0].uid.clone()), svc.metadata.uid);
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(owners[0].block_owner_deletion, Some(true));
    let ports = slice.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert_eq!(ports[0].name.as_deref(), Some("http"));
    assert_eq!(ports[0].port, Some(8080));
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    let ep = &slice.endpoints.clone().unwrap_or_default()[0];
    let target = ep.target_ref.clone().expect("targetRef");
    assert_eq!(target.kind.as_deref(), Some("ExternalWorkload"));
    assert_eq!(target.namespace.as_deref(), Some(env.ns.as_str()));
    assert_eq!(target.uid, vm.metadata.uid);
    let managers: Vec<String> = slice
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "linkerd.io/destination"),
        "{managers:?}"
    );

    set_ready(&env, "vm", false).await;
    wait_endpoints(
        &env,
        "the endpoint not ready",
        &[("192.0.2.10", false, "vm")],
    )
    .await;
    set_ready(&env, "vm", true).await;
    wait_endpoints(
        &env,
        "the endpoint ready again",
        &[("192.0.2.10", true, "vm")],
    )
    .await;

    env.api::<ExternalWorkload>()
        .delete("vm", &DeleteParams::default())
        .await
        .expect("delete workload");
    wait_endpoints(&env, "no endpoint once the workload is gone", &[]).await;
    eventually("our slice deleted", TIMEOUT, || async {
        let n = our_slices(&env).await.len();
        if n == 0 {
            Ok(())
        } else {
            Err(format!("{n} slices"))
        }
    })
    .await;

    // kube-controller-manager's slice of the same Service (no pods: no
    // endpoints) is its own; we never touched it.
    let all = env
        .api::<EndpointSlice>()
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .expect("list slices");
    let theirs: BTreeMap<String, String> = all
        .items
        .iter()
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            Some((
                s.metadata.name.clone()?,
                labels
                    .get("endpointslice.kubernetes.io/managed-by")?
                    .clone(),
            ))
        })
        .collect();
    assert!(
        theirs
            .values()
            .all(|m| m == "endpointslice-controller.k8s.io"),
        "only kube-controller-manager's slices remain: {theirs:?}"
    );
}

#[tokio::test]
async fn only_the_lease_holder_writes_and_the_other_takes_over() {
    let env = TestEnv::new("ew-lease").await;
    let _turn = WRITERS.lock().await;
    let mut a = start_writer(&env, "dest-a").await;
    let mut b = start_writer(&env, "dest-b").await;
    let first = eventually("a Lease holder", TIMEOUT, || async {
        holder(&env).await.ok_or_else(|| "no holder".to_string())
    })
    .await;
    assert!(first == "dest-a" || first == "dest-b", "{first}");

    create_web_service(&env).await;
    create_workload(&env, "vm1", "192.0.2.11", true).await;
    wait_endpoints(&env, "the leader's slice", &[("192.0.2.11", true, "vm1")]).await;

    let (leader, follower) = if first == "dest-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert!(queue_adds(leader).await > 0, "the leader works its queue");
    assert_eq!(queue_adds(follower).await, 0, "the follower queues nothing");
    assert_eq!(
        holder(&env).await.as_deref(),
        Some(first.as_str()),
        "no flapping"
    );

    // Killed without releasing the Lease: the other waits for it to expire.
    leader.kill();
    let second = if first == "dest-a" {
        "dest-b"
    } else {
        "dest-a"
    };
    eventually("the other replica holding the Lease", TAKEOVER, || async {
        match holder(&env).await {
            Some(h) if h == second => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    create_workload(&env, "vm2", "192.0.2.12", true).await;
    wait_endpoints(
        &env,
        "the new leader's write",
        &[("192.0.2.11", true, "vm1"), ("192.0.2.12", true, "vm2")],
    )
    .await;
    assert!(
        queue_adds(follower).await > 0,
        "the new leader works its queue"
    );

    // A clean stop releases the Lease at once.
    assert!(follower.terminate(Duration::from_secs(20)), "clean exit");
    eventually("the Lease released", TIMEOUT, || async {
        match holder(&env).await {
            None => Ok(()),
            Some(h) => Err(h),
        }
    })
    .await;
}

#[tokio::test]
async fn writes_with_the_deploy_rbac() {
    let env = TestEnv::new("ew-rbac").await;
    let _turn = WRITERS.lock().await;
    // Its Lease is in `linkerd`, where planes of other tests lead too.
    let _leases = LINKERD_LEASES.lock().await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    cluster.install_deploy_rbac();
    wait_linkerd_leases_free(&env).await;
    let kubeconfig = cluster.service_account_kubeconfig("linkerd", "linkerd-destination");
    let mut line = destination_pod_command("destination");
    let (addr, admin) = (free_addr(), free_addr());
    line.extend([
        format!("-addr={addr}"),
        format!("-metrics-addr={admin}"),
        format!("-kubeconfig={}", kubeconfig.display()),
    ]);
    let mut dst = ServerProcess::start_with_env(
        env!("CARGO_BIN_EXE_destination").as_ref(),
        &line,
        admin,
        &[("HOSTNAME", "linkerd-destination-rbac")],
    )
    .await;
    create_web_service(&env).await;
    create_workload(&env, "vm", "192.0.2.20", true).await;
    wait_endpoints(
        &env,
        "a slice written as the ServiceAccount",
        &[("192.0.2.20", true, "vm")],
    )
    .await;
    assert_eq!(
        holder_in(&env, "linkerd").await.as_deref(),
        Some("linkerd-destination-rbac"),
        "the Lease in the controller namespace"
    );
    env.api::<ExternalWorkload>()
        .delete("vm", &DeleteParams::default())
        .await
        .expect("delete workload");
    wait_endpoints(&env, "the slice deleted as the ServiceAccount", &[]).await;
    assert!(dst.terminate(Duration::from_secs(20)), "clean exit");
    assert_eq!(holder_in(&env, "linkerd").await, None, "released on exit");
}

#[tokio::test]
async fn get_follows_the_workloads_readiness_through_our_slices() {
    let env = TestEnv::new("ew-get").await;
    let _turn = WRITERS.lock().await;
    env.cluster().ensure_crds();
    let (addr, admin) = (free_addr(), free_addr());
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={addr}"),
        format!("--admin-addr={admin}"),
        format!("--controller-namespace={}", env.ns),
    ];
    let _dst = ServerProcess::start_with_env(
        env!("CARGO_BIN_EXE_destination").as_ref(),
        &args,
        admin,
        &[("HOSTNAME", "destination-0")],
    )
    .await;
    create_web_service(&env).await;
    create_workload(&env, "vm-1", "192.0.2.31", true).await;

    let mut client = crate::common::client(addr).await;
    let mut stream = crate::common::EndpointStream::open(
        &mut client,
        &crate::common::authority(&env, "web", 80),
        "",
    )
    .await
    .expect("open Get");
    let vm: std::net::SocketAddr = "192.0.2.31:8080".parse().expect("addr");
    stream
        .wait_for("the workload through our slice", |s| {
            s.current.contains_key(&vm)
        })
        .await;
    let wa = &stream.current[&vm];
    assert_eq!(
        wa.metric_labels
            .get("external_workload")
            .map(String::as_str),
        Some("vm-1")
    );

    // Not Ready: our slice marks it so, and Get fails fast.
    set_ready(&env, "vm-1", false).await;
    stream
        .wait_for("no endpoints", |s| s.no_endpoints == Some(true))
        .await;
    set_ready(&env, "vm-1", true).await;
    stream
        .wait_for("ready again", |s| s.current.contains_key(&vm))
        .await;
}
