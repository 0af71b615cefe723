//! ExternalWorkloads end to end: a workload applied with kubectl and an
//! EndpointSlice naming it reach an open `Get` stream with the workload's
//! SPIFFE identity and labels; readiness in the slice and edits of the
//! workload follow; `GetProfile` by the workload's `ip:port` serves its
//! endpoint profile until the workload is deleted.
//!
//! The slices here are written by the test (a foreign `managed-by`), so
//! this checks discovery alone; the destination's own slice writer has its
//! own tests.

use std::net::SocketAddr;

use linkerd2_proxy_api::destination::{GetDestination, protocol_hint, tls_identity};
use test_support::{TestEnv, free_addr};

use crate::common::{EndpointStream, TIMEOUT, authority, client, start_destination};

/// The documentation range: never routed, only ever data here.
const VM_IP: &str = "192.0.2.21";

fn apply(env: &TestEnv, yaml: &str) {
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply: {out}\n{yaml}");
}

fn workload_yaml(identity: &str) -> String {
    format!(
        r#"apiVersion: workload.linkerd.io/v1beta1
kind: ExternalWorkload
metadata:
  name: vm-1
  labels: {{app: vms}}
spec:
  meshTLS:
    identity: "{identity}"
    serverName: vm-1.vms.cluster.local
  ports:
    - {{name: http, port: 8080}}
    - {{name: linkerd-proxy, port: 4200}}
  workloadIPs:
    - ip: {VM_IP}
"#
    )
}

fn slice_yaml(ready: bool) -> String {
    format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: vms-test
  labels:
    kubernetes.io/service-name: vms
    endpointslice.kubernetes.io/managed-by: e2e.meridian.test
addressType: IPv4
ports:
  - {{name: http, port: 8080, protocol: TCP}}
endpoints:
  - addresses: ["{VM_IP}"]
    conditions: {{ready: {ready}}}
    targetRef: {{kind: ExternalWorkload, name: vm-1}}
"#
    )
}

const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: vms
spec:
  ports:
    - {name: http, port: 80, targetPort: http}
"#;

fn uri_identity(wa: &linkerd2_proxy_api::destination::WeightedAddr) -> Option<String> {
    match wa.tls_identity.as_ref()?.strategy.as_ref()? {
        tls_identity::Strategy::UriLikeIdentity(id) => Some(id.uri.clone()),
        tls_identity::Strategy::DnsLikeIdentity(_) => None,
    }
}

#[tokio::test]
async fn workload_endpoints_and_profiles_follow_the_cluster() {
    let env = TestEnv::new("dst-ew").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    apply(&env, SERVICE);
    apply(
        &env,
        &workload_yaml("spiffe://root.linkerd.cluster.local/vm-1"),
    );
    apply(&env, &slice_yaml(true));

    let vm: SocketAddr = format!("{VM_IP}:8080").parse().expect("addr");
    let mut stream = EndpointStream::open(&mut client, &authority(&env, "vms", 80), "")
        .await
        .expect("open Get");
    stream
        .wait_for("the workload's endpoint", |s| s.current.contains_key(&vm))
        .await;
    let wa = &stream.current[&vm];
    assert_eq!(
        uri_identity(wa).as_deref(),
        Some("spiffe://root.linkerd.cluster.local/vm-1")
    );
    assert_eq!(
        wa.metric_labels
            .get("external_workload")
            .map(String::as_str),
        Some("vm-1")
    );
    // Always meshed: H2 is hinted without --enable-h2-upgrade.
    let hint = wa.protocol_hint.expect("a protocol hint");
    assert!(
        matches!(hint.protocol, Some(protocol_hint::Protocol::H2(_))),
        "{hint:?}"
    );

    // An edit of the workload re-adds it with the new identity.
    apply(
        &env,
        &workload_yaml("spiffe://root.linkerd.cluster.local/vm-1-rotated"),
    );
    stream
        .wait_for("the new identity", |s| {
            s.current.get(&vm).and_then(uri_identity).as_deref()
                == Some("spiffe://root.linkerd.cluster.local/vm-1-rotated")
        })
        .await;

    // Not ready in the slice: the Service has no endpoints (fail fast).
    apply(&env, &slice_yaml(false));
    stream
        .wait_for("no endpoints", |s| s.no_endpoints == Some(true))
        .await;
    apply(&env, &slice_yaml(true));
    stream
        .wait_for("ready again", |s| s.current.contains_key(&vm))
        .await;

    // GetProfile by the workload's address.
    let mut profiles = client
        .get_profile(GetDestination {
            scheme: "k8s".into(),
            path: vm.to_string(),
            context_token: String::new(),
        })
        .await
        .expect("open GetProfile")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, profiles.message())
        .await
        .expect("a profile in time")
        .expect("healthy")
        .expect("open");
    let endpoint = first.endpoint.expect("an endpoint profile");
    assert_eq!(
        endpoint
            .metric_labels
            .get("external_workload")
            .map(String::as_str),
        Some("vm-1")
    );
    assert_eq!(endpoint.metric_labels.get("namespace"), Some(&env.ns));
    assert_eq!(
        uri_identity(&endpoint).as_deref(),
        Some("spiffe://root.linkerd.cluster.local/vm-1-rotated")
    );

    // Deleting the workload: its endpoint leaves Get, its profile turns bare.
    let (ok, out) = env
        .cluster()
        .kubectl(&["delete", "-n", &env.ns, "externalworkload", "vm-1"], None);
    assert!(ok, "{out}");
    stream
        .wait_for("the workload gone", |s| s.no_endpoints == Some(true))
        .await;
    let bare = tokio::time::timeout(TIMEOUT, profiles.message())
        .await
        .expect("a profile in time")
        .expect("healthy")
        .expect("open");
    let endpoint = bare.endpoint.expect("a bare endpoint");
    assert!(endpoint.metric_labels.is_empty(), "{endpoint:?}");
    assert!(endpoint.tls_identity.is_none());
}
