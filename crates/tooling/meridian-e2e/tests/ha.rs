//! High availability for real: `deploy/overlays/ha-one-node` (the ha
//! overlay's three replicas, resources and failurePolicy Fail, with the
//! anti-affinity relaxed for one node) over the installed pod; then one
//! Meridian pod deleted and a rolling restart, while
//!
//! - a client streams `Get` through the `linkerd-dst` Service (a
//!   `kubectl port-forward svc/…`, which picks a ready pod of the Service)
//!   and, when its stream ends, reconnects the same way, as a proxy
//!   reconnects to any address of the Service;
//! - admission requests go through the webhook Services every half second
//!   (`kubectl apply --dry-run=server` of a ServiceProfile and a Server;
//!   with failurePolicy Fail a request no replica answers is refused);
//! - both writers' Leases are polled.
//!
//! Checked: no admission request failed, the client converged after each
//! step, both Leases changed hands (held by pods of the new ReplicaSet at
//! the end), and both writers wrote after each step (an HTTPRoute's status,
//! an ExternalWorkload's EndpointSlice). The suite puts `deploy/` (one
//! replica) back at the end.

#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_api::{
    labels::{ENDPOINT_SLICE_MANAGED_BY, EXTERNAL_WORKLOADS_CONTROLLER, SERVICE_NAME},
    policy::http_route::POLICY_CONTROLLER_NAME,
};
use k8s_openapi::api::{coordination::v1::Lease, discovery::v1::EndpointSlice};
use kube::{
    Api,
    api::{DynamicObject, ListParams},
    discovery::ApiResource,
};
use meridian_e2e::{
    Cluster, DESTINATION_DEPLOYMENT, authority,
    dns::eventually,
    stream::{EndpointStream, connect},
};

const STATUS_LEASE: &str = "policy-controller-write";
const SLICES_LEASE: &str = "linkerd-destination-endpoint-write";

/// What the streaming client went through.
#[derive(Default)]
struct ClientLog {
    /// Streams opened (the first, then one per reconnect).
    opened: usize,
    /// Why each stream ended.
    ends: Vec<String>,
    /// Port-forwards or connections that did not come up, and `Get`s
    /// refused on a connection that did (each retried).
    failed_attempts: Vec<String>,
    /// What the open stream holds now (empty while reconnecting).
    current: BTreeSet<SocketAddr>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Streams `Get` for `path` through the `linkerd-dst` Service forever,
/// reconnecting when a stream ends.
async fn stream_through_the_service(cluster: Cluster, path: String, log: Arc<Mutex<ClientLog>>) {
    let cp = cluster.control_plane_ns.clone();
    loop {
        lock(&log).current.clear();
        let forward = match cluster.try_port_forward(&cp, "svc/linkerd-dst", 8086) {
            Ok(f) => f,
            Err(e) => {
                lock(&log).failed_attempts.push(e);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut client = match connect(forward.local).await {
            Ok(c) => c,
            Err(e) => {
                lock(&log).failed_attempts.push(e);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut stream = match EndpointStream::open(&mut client, &path).await {
            Ok(s) => s,
            Err(status) => {
                lock(&log).failed_attempts.push(format!("Get: {status:?}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        lock(&log).opened += 1;
        loop {
            match stream.next(Duration::from_secs(3600)).await {
                Ok(()) => lock(&log).current = stream.current.clone(),
                Err(e) => {
                    lock(&log).ends.push(e);
                    break;
                }
            }
        }
        drop(forward);
        // As a proxy: retry soon.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Admission requests through the webhook Services every half second:
/// (requests, failures with their output).
async fn admit_continuously(cluster: Cluster, ns: String, log: Arc<Mutex<(usize, Vec<String>)>>) {
    let objects = format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: web.{ns}.svc.cluster.local\n  namespace: {ns}\nspec:\n  routes:\n    - name: GET /\n      condition: {{method: GET, pathRegex: /}}\n---\napiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  port: http\n"
    );
    loop {
        // (kubectl blocks: off the runtime's other tasks.)
        let (ok, out) = tokio::task::block_in_place(|| {
            cluster.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&objects))
        });
        {
            let mut log = lock(&log);
            log.0 += 1;
            if !ok {
                log.1.push(out);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Polls both Leases; records each holder change.
async fn watch_leases(cluster: Cluster, log: Arc<Mutex<Vec<(&'static str, String)>>>) {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &cluster.control_plane_ns);
    let mut last: [Option<String>; 2] = [None, None];
    loop {
        for (i, lease) in [STATUS_LEASE, SLICES_LEASE].into_iter().enumerate() {
            if let Ok(Some(l)) = api.get_opt(lease).await {
                let holder = l.spec.and_then(|s| s.holder_identity);
                if holder != last[i] {
                    last[i] = holder.clone();
                    lock(&log).push((lease, holder.unwrap_or_else(|| "released".into())));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn holder(cluster: &Cluster, lease: &str) -> String {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &cluster.control_plane_ns);
    eventually(&format!("Lease {lease} held"), || async {
        api.get_opt(lease)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|l| l.spec?.holder_identity)
            .ok_or_else(|| "no holder".to_string())
    })
    .await
}

/// The Meridian pods now (not being deleted).
async fn meridian_pods(cluster: &Cluster) -> BTreeSet<String> {
    let out = cluster.kubectl_ok(
        &[
            "get",
            "pods",
            "-n",
            &cluster.control_plane_ns,
            "-l",
            "linkerd.io/control-plane-component=destination",
            "-o",
            "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{\"\\n\"}{end}",
        ],
        None,
    );
    let deleting: BTreeSet<String> = out.lines().map(str::to_string).collect();
    let all = cluster.kubectl_ok(
        &[
            "get",
            "pods",
            "-n",
            &cluster.control_plane_ns,
            "-l",
            "linkerd.io/control-plane-component=destination",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
        ],
        None,
    );
    all.lines()
        .map(str::to_string)
        .filter(|p| !deleting.contains(p))
        .collect()
}

/// Writes what both writers must act on (`n`-th time): an HTTPRoute with
/// the Service `web` as parent, and an ExternalWorkload selected by the
/// Service `ext`; waits until the route's status accepts it and an
/// EndpointSlice of `ext` holds the workload's address.
async fn writers_write(cluster: &Cluster, ns: &str, n: usize) {
    let ip = format!("10.98.0.{}", n + 1);
    let objects = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: route-{n}\n  namespace: {ns}\nspec:\n  parentRefs: [{{group: core, kind: Service, name: web, port: 80}}]\n  rules: [{{matches: [{{path: {{type: PathPrefix, value: /r{n}}}}}], backendRefs: [{{name: web, port: 80}}]}}]\n---\napiVersion: workload.linkerd.io/v1beta1\nkind: ExternalWorkload\nmetadata:\n  name: ew-{n}\n  namespace: {ns}\n  labels: {{app: ext}}\nspec:\n  meshTLS:\n    identity: spiffe://root.linkerd.cluster.local/ew-{n}\n    serverName: ew-{n}.cluster.local\n  ports: [{{name: http, port: 8080}}]\n  workloadIPs: [{{ip: {ip}}}]\n"
    );
    cluster.kubectl_ok(&["apply", "-f", "-"], Some(&objects));
    cluster.kubectl_ok(
        &[
            "patch",
            "externalworkload",
            &format!("ew-{n}"),
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"Probed"}]}}"#,
        ],
        None,
    );
    let routes = Api::<DynamicObject>::namespaced_with(
        cluster.client.clone(),
        ns,
        &ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "HTTPRoute".into(),
            plural: "httproutes".into(),
        },
    );
    eventually(&format!("route-{n}'s status written"), || async {
        let route = routes
            .get(&format!("route-{n}"))
            .await
            .map_err(|e| e.to_string())?;
        let accepted = route.data["status"]["parents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["controllerName"] == POLICY_CONTROLLER_NAME)
            .any(|p| {
                p["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Accepted" && c["status"] == "True")
                })
            });
        if accepted {
            Ok(())
        } else {
            Err(format!("status {}", route.data["status"]))
        }
    })
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), ns);
    let selector =
        format!("{ENDPOINT_SLICE_MANAGED_BY}={EXTERNAL_WORKLOADS_CONTROLLER},{SERVICE_NAME}=ext");
    eventually(&format!("ew-{n}'s EndpointSlice written"), || async {
        let found = slices
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?
            .items;
        let has = found
            .iter()
            .flat_map(|s| s.endpoints.iter().flatten())
            .any(|e| e.addresses.contains(&ip));
        if has {
            Ok(())
        } else {
            Err(format!("{} slices without {ip}", found.len()))
        }
    })
    .await;
}

/// Waits until the streaming client holds `truth`.
async fn client_converges(log: &Mutex<ClientLog>, truth: &BTreeSet<SocketAddr>, step: &str) {
    eventually(&format!("the client converges after {step}"), || async {
        let log = lock(log);
        if log.current == *truth {
            Ok(())
        } else {
            Err(format!(
                "holds {:?}, want {truth:?}; {} streams opened, ends {:?}, failed attempts {:?}",
                log.current, log.opened, log.ends, log.failed_attempts
            ))
        }
    })
    .await;
}

fn apply_deploy(cluster: &Cluster, dir: &str) {
    cluster.kubectl_ok(
        &["apply", "--server-side", "--force-conflicts", "-k", dir],
        None,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn three_replicas_survive_a_lost_pod_and_a_rolling_restart() {
    let cluster = Cluster::from_env().await;
    let cp = cluster.control_plane_ns.clone();
    apply_deploy(&cluster, "deploy/overlays/ha-one-node");
    cluster
        .wait_deployment_ready(&cp, DESTINATION_DEPLOYMENT)
        .await;
    let pods = meridian_pods(&cluster).await;
    println!("ha: {} Meridian pods: {pods:?}", pods.len());
    assert_eq!(pods.len(), 3, "{pods:?}");

    let ns = cluster.namespace("e2e-ha").await;
    cluster.run_http_workload(&ns.name, "web", 2, &[]).await;
    cluster.kubectl_ok(
        // (Selects `app=ext`: the ExternalWorkloads.)
        &[
            "create",
            "service",
            "clusterip",
            "ext",
            "--tcp=80:8080",
            "-n",
            &ns.name,
        ],
        None,
    );
    let truth = || async {
        cluster
            .ready_pod_ips(&ns.name, "app=web")
            .await
            .into_iter()
            .map(|ip| SocketAddr::new(ip, 8080))
            .collect::<BTreeSet<_>>()
    };

    let client_log = Arc::new(Mutex::new(ClientLog::default()));
    let admissions = Arc::new(Mutex::new((0, Vec::new())));
    let leases = Arc::new(Mutex::new(Vec::new()));
    let tasks = [
        tokio::spawn(stream_through_the_service(
            Cluster::from_env().await,
            authority(&ns.name, "web", 80),
            client_log.clone(),
        )),
        tokio::spawn(admit_continuously(
            Cluster::from_env().await,
            ns.name.clone(),
            admissions.clone(),
        )),
        tokio::spawn(watch_leases(Cluster::from_env().await, leases.clone())),
    ];
    client_converges(&client_log, &truth().await, "the start").await;
    writers_write(&cluster, &ns.name, 0).await;
    let first_status = holder(&cluster, STATUS_LEASE).await;
    let first_slices = holder(&cluster, SLICES_LEASE).await;
    println!("ha: Lease holders: status {first_status}, EndpointSlices {first_slices}");

    // One pod deleted: the status writer's Lease holder.
    cluster.kubectl_ok(
        &["delete", "pod", "-n", &cp, &first_status, "--wait=false"],
        None,
    );
    cluster.kubectl_ok(
        &["scale", "-n", &ns.name, "deploy/web", "--replicas=3"],
        None,
    );
    cluster.wait_deployment_ready(&ns.name, "web").await;
    cluster
        .wait_deployment_ready(&cp, DESTINATION_DEPLOYMENT)
        .await;
    eventually("the status Lease changes hands", || async {
        let now = holder(&cluster, STATUS_LEASE).await;
        if now == first_status {
            Err(format!("still {now}"))
        } else {
            Ok(())
        }
    })
    .await;
    client_converges(&client_log, &truth().await, "the pod deletion").await;
    writers_write(&cluster, &ns.name, 1).await;

    // A rolling restart: every pod replaced, one at a time.
    let before: BTreeSet<String> = meridian_pods(&cluster).await;
    cluster.kubectl_ok(
        &[
            "rollout",
            "restart",
            "-n",
            &cp,
            &format!("deploy/{DESTINATION_DEPLOYMENT}"),
        ],
        None,
    );
    cluster.kubectl_ok(
        &["scale", "-n", &ns.name, "deploy/web", "--replicas=1"],
        None,
    );
    cluster.kubectl_ok(
        &[
            "rollout",
            "status",
            "-n",
            &cp,
            &format!("deploy/{DESTINATION_DEPLOYMENT}"),
            "--timeout=300s",
        ],
        None,
    );
    cluster.wait_deployment_ready(&ns.name, "web").await;
    let after = meridian_pods(&cluster).await;
    assert!(after.is_disjoint(&before), "{before:?} → {after:?}");
    for lease in [STATUS_LEASE, SLICES_LEASE] {
        eventually(&format!("{lease} held by a new pod"), || async {
            let now = holder(&cluster, lease).await;
            if after.contains(&now) {
                Ok(())
            } else {
                Err(format!("held by {now}; pods {after:?}"))
            }
        })
        .await;
    }
    client_converges(&client_log, &truth().await, "the rolling restart").await;
    writers_write(&cluster, &ns.name, 2).await;

    for task in &tasks {
        task.abort();
    }
    let (requests, failures) = lock(&admissions).clone();
    let history = lock(&leases).clone();
    {
        let log = lock(&client_log);
        println!(
            "ha: client: {} streams opened, ends {:?}, failed attempts {:?}",
            log.opened, log.ends, log.failed_attempts
        );
    }
    println!(
        "ha: admission requests {requests}, failed {}",
        failures.len()
    );
    println!("ha: Lease holders in turn: {history:?}");
    apply_deploy(&cluster, "deploy");
    cluster
        .wait_deployment_ready(&cp, DESTINATION_DEPLOYMENT)
        .await;
    assert!(
        failures.is_empty(),
        "admission requests failed: {failures:?}"
    );
    assert!(requests > 0);
}
