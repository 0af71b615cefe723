//! `deploy/shadow` writes nothing: started from the shadow's container
//! arguments with every right (the admin's kubeconfig: only its flags keep
//! it from writing) and `HOSTNAME` set as in a pod, beside a Server it
//! indexes with a route, and an ExternalWorkload a Service selects, it
//! takes neither Lease, writes no status and no EndpointSlice. The same
//! pair started from `deploy/`'s arguments in the same cluster does all
//! three, so the fixture gives a writer something to write.

use std::time::Duration;

use k8s_openapi::api::{coordination::v1::Lease, discovery::v1::EndpointSlice};
use kube::api::ListParams;
use linkerd2_proxy_api::inbound::{
    PortSpec, inbound_server_policies_client::InboundServerPoliciesClient,
};
use test_support::{TestEnv, eventually, next_matching};

use crate::{
    common::{LEASES, LINKERD_LEASES, WEB_SERVER_AND_ROUTE, WRITERS, wait_linkerd_leases_free},
    planes::{Manifest, Plane, PlaneSpec, start_plane},
};

const FIXTURE: &str = "apiVersion: v1
kind: Service
metadata:
  name: vms
spec:
  selector: {app: vm}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: workload.linkerd.io/v1beta1
kind: ExternalWorkload
metadata:
  name: vm-0
  labels: {app: vm}
spec:
  meshTLS:
    identity: spiffe://root.linkerd.cluster.local/vm-0
    serverName: vm-0.cluster.local
  ports: [{name: http, port: 8080}]
  workloadIPs: [{ip: 192.0.2.20}]
";

/// How long a writer has to act (it leads at once: no Lease is held).
const WAIT: Duration = Duration::from_secs(6);

async fn holder(env: &TestEnv, lease: &str) -> Option<String> {
    kube::Api::<Lease>::namespaced(env.client.clone(), "linkerd")
        .get_opt(lease)
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// The EndpointSlices of `vms` written for its ExternalWorkload.
async fn workload_slices(env: &TestEnv) -> usize {
    let lp = ListParams::default().labels(
        "kubernetes.io/service-name=vms,endpointslice.kubernetes.io/managed-by=linkerd-external-workloads-controller",
    );
    env.api::<EndpointSlice>()
        .list(&lp)
        .await
        .expect("list slices")
        .items
        .len()
}

/// `resource_status_patches_total` of the plane's policy controller.
async fn status_patches(plane: &Plane) -> f64 {
    let (_, metrics) = plane.policy.admin_get("/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("resource_status_patches_total "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no resource_status_patches_total in\n{metrics}"))
}

fn spec(env: &TestEnv, manifest: Manifest, hostname: &str) -> PlaneSpec {
    let mut spec = PlaneSpec::new(manifest, env.cluster().kubeconfig().to_path_buf());
    spec.hostname = Some(hostname.to_string());
    spec
}

#[tokio::test]
async fn the_shadow_writes_nothing_and_takes_no_lease() {
    let env = TestEnv::new("shadow").await;
    // No other EndpointSlice writer runs meanwhile, nor any plane whose
    // Leases are in `linkerd`.
    let _turn = WRITERS.lock().await;
    let _leases = LINKERD_LEASES.lock().await;
    env.cluster().ensure_crds();
    env.cluster().install_shadow_rbac();
    let yaml = format!("{WEB_SERVER_AND_ROUTE}---\n{FIXTURE}");
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
    let web = env
        .pod("web-0")
        .label("app", "web")
        .port(Some("http"), 8080)
        .meshed("linkerd");
    env.create_ready_pod(&web).await;

    wait_linkerd_leases_free(&env).await;
    let shadow_name = format!("shadow-{}", env.ns);
    let shadow = start_plane(&env, spec(&env, Manifest::Shadow, &shadow_name)).await;
    // It indexed the Server (the route's parent).
    let mut grpc = InboundServerPoliciesClient::connect(format!("http://{}", shadow.policy_addr))
        .await
        .expect("connect");
    let workload = format!("{{\"ns\":\"{}\", \"pod\":\"web-0\"}}\n", env.ns);
    let mut stream = grpc
        .watch_port(PortSpec {
            workload,
            port: 8080,
        })
        .await
        .expect("WatchPort")
        .into_inner();
    next_matching(
        &mut stream,
        "the Server on the shadow's answer",
        Duration::from_secs(30),
        |server: &linkerd2_proxy_api::inbound::Server| {
            server.labels.get("name").map(String::as_str) == Some("web-http")
        },
    )
    .await;
    tokio::time::sleep(WAIT).await;
    for lease in LEASES {
        let held = holder(&env, lease).await;
        assert_ne!(held.as_deref(), Some(shadow_name.as_str()), "{lease}");
    }
    assert_eq!(workload_slices(&env).await, 0);
    assert_eq!(status_patches(&shadow).await, 0.0);
    drop(shadow);

    // The serving pod's arguments, the same rights and wait: it writes.
    let serving_name = format!("serving-{}", env.ns);
    let serving = start_plane(&env, spec(&env, Manifest::Deploy, &serving_name)).await;
    eventually(
        "the serving plane's Leases, slice and status",
        WAIT * 2,
        || async {
            let holders = [holder(&env, LEASES[0]).await, holder(&env, LEASES[1]).await];
            let slices = workload_slices(&env).await;
            let patches = status_patches(&serving).await;
            if holders
                .iter()
                .all(|h| h.as_deref() == Some(serving_name.as_str()))
                && slices == 1
                && patches >= 1.0
            {
                Ok(())
            } else {
                Err(format!(
                    "holders {holders:?}, slices {slices}, status patches {patches}"
                ))
            }
        },
    )
    .await;
}
