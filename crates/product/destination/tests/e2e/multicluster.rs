//! Multicluster discovery end to end, with two real control planes: the
//! shared one (local) and a second one this test starts (linked as
//! `east`). The local destination learns of `east` from a kubeconfig
//! Secret in its namespace, exactly as the original's cluster store does.
//!
//! - a remote-discovery mirror Service streams `east`'s endpoints of the
//!   named Service, with `east`'s trust domain in their identities;
//! - a federated Service merges a local member and `east`'s, following
//!   pods scaling in both;
//! - `east`'s API server stops: the local one keeps serving, `/ready` says
//!   degraded; it comes back: the streams converge on what changed;
//! - the Secret is deleted: `east`'s endpoints go away, the mirror is no
//!   longer found.

use std::{collections::BTreeSet, net::SocketAddr, time::Duration};

use k8s_openapi::{
    ByteString,
    api::core::v1::{Secret, Service},
};
use kube::api::{DeleteParams, PostParams};
use linkerd2_proxy_api::destination::tls_identity;
use test_support::{LinkedCluster, NODE_NAME, PodSpecBuilder, TestEnv, eventually, free_addr};
use tonic::Code;

use crate::common::{EndpointStream, authority, client, start_destination_with};

const CLUSTER: &str = "east";
const TRUST_DOMAIN: &str = "east.example";

fn service_yaml(name: &str, selector: &str, labels: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n  annotations: {{{annotations}}}\nspec:\n  selector: {{app: {selector}}}\n  ports:\n    - {{name: http, port: 80, targetPort: http}}\n"
    )
}

async fn create_remote_service(east: &LinkedCluster, name: &str) {
    let mut svc = Service::default();
    svc.metadata.name = Some(name.to_string());
    svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
        selector: Some([("app".to_string(), name.to_string())].into()),
        ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
            name: Some("http".into()),
            port: 80,
            target_port: Some(
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into()),
            ),
            ..Default::default()
        }]),
        ..Default::default()
    });
    east.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("create the linked cluster's service");
}

fn apply(env: &TestEnv, yaml: &str) {
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply: {out}\n{yaml}");
}

/// Creates (or replaces) east's kubeconfig Secret with `kubeconfig`.
async fn link(env: &TestEnv, kubeconfig: &str) {
    let mut secret = Secret::default();
    secret.metadata.name = Some(format!("cluster-credentials-{CLUSTER}"));
    secret.metadata.labels = Some(
        [(
            "multicluster.linkerd.io/cluster-name".to_string(),
            CLUSTER.to_string(),
        )]
        .into(),
    );
    secret.metadata.annotations = Some(
        [
            (
                "multicluster.linkerd.io/trust-domain".to_string(),
                TRUST_DOMAIN.to_string(),
            ),
            (
                "multicluster.linkerd.io/cluster-domain".to_string(),
                "cluster.local".to_string(),
            ),
        ]
        .into(),
    );
    secret.type_ = Some("mirror.linkerd.io/remote-kubeconfig".into());
    secret.data = Some(
        [(
            "kubeconfig".to_string(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )]
        .into(),
    );
    let secrets = env.api::<Secret>();
    let name = format!("cluster-credentials-{CLUSTER}");
    match secrets.get_opt(&name).await.expect("read the Secret") {
        Some(existing) => {
            secret.metadata.resource_version = existing.metadata.resource_version;
            secrets
                .replace(&name, &PostParams::default(), &secret)
                .await
                .expect("rotate the kubeconfig Secret");
        }
        None => {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .expect("create the kubeconfig Secret");
        }
    }
}

async fn ready_body(dst: &crate::common::Destination) -> (u16, String) {
    dst.process.admin_get("/ready").await
}

fn addrs(ips: &[std::net::Ipv4Addr]) -> BTreeSet<SocketAddr> {
    ips.iter()
        .map(|ip| SocketAddr::new((*ip).into(), 8080))
        .collect()
}

#[tokio::test]
async fn remote_discovery_and_federated_services_follow_a_linked_cluster() {
    let env = TestEnv::new("dst-mc").await;
    let mut east = LinkedCluster::start(&env).await;
    let meshed = |name: &str, app: &str| {
        PodSpecBuilder::new(name, NODE_NAME)
            .label("app", app)
            .port(Some("http"), 8080)
            // Meshed by this control plane: the identity uses east's trust domain.
            .meshed(&env.ns)
    };
    create_remote_service(&east, "web").await;
    let east_a = east.create_ready_pod(&meshed("web-a", "web")).await;

    // Local: a mirror of east's `web`, a local member and a federated Service.
    apply(
        &env,
        &service_yaml(
            "web-east",
            "none",
            "multicluster.linkerd.io/remote-discovery: east, multicluster.linkerd.io/remote-service: web",
            "",
        ),
    );
    apply(&env, &service_yaml("web-local", "web-local", "", ""));
    apply(
        &env,
        &service_yaml(
            "web-fed",
            "none",
            "",
            "multicluster.linkerd.io/remote-discovery: web@east, multicluster.linkerd.io/local-discovery: web-local",
        ),
    );
    let local_pod = env
        .pod("web-local-0")
        .label("app", "web-local")
        .port(Some("http"), 8080);
    let (_, local_ip) = env.create_ready_pod(&local_pod).await;

    let dst = start_destination_with(
        &env,
        free_addr(),
        &[format!("--controller-namespace={}", env.ns)],
    )
    .await;
    let mut client = client(dst.addr).await;

    // Before the link: the mirror's cluster is unknown.
    let refused = EndpointStream::open(&mut client, &authority(&env, "web-east", 80), "")
        .await
        .err()
        .expect("no linked cluster yet");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert_eq!(refused.message(), "Remote cluster not found: east");

    // The federated Service starts with its local member only…
    let mut federated = EndpointStream::open(&mut client, &authority(&env, "web-fed", 80), "")
        .await
        .expect("open the federated Service");
    federated
        .wait_addrs("the local member", &addrs(&[local_ip]))
        .await;

    // …and the link brings east in, without a restart.
    link(&env, &east.kubeconfig()).await;
    federated
        .wait_addrs("both members", &addrs(&[local_ip, east_a]))
        .await;
    let mut mirror = eventually("the mirror to resolve", Duration::from_secs(30), || {
        let mut client = client.clone();
        let path = authority(&env, "web-east", 80);
        async move {
            EndpointStream::open(&mut client, &path, "")
                .await
                .map_err(|status| status.to_string())
        }
    })
    .await;
    mirror
        .wait_addrs("east's endpoint", &addrs(&[east_a]))
        .await;
    let wa = &mirror.current[&SocketAddr::new(east_a.into(), 8080)];
    let identity = match wa.tls_identity.as_ref().and_then(|t| t.strategy.as_ref()) {
        Some(tls_identity::Strategy::DnsLikeIdentity(id)) => id.name.clone(),
        other => panic!("a DNS-like identity, got {other:?}"),
    };
    assert_eq!(
        identity,
        format!(
            "default.{ns}.serviceaccount.identity.{ns}.{TRUST_DOMAIN}",
            ns = env.ns
        )
    );
    assert_eq!(
        mirror.labels.get("service").map(String::as_str),
        Some("web")
    );
    // A client on the local node (zone-a) sees east's endpoint (zone-b) as
    // remote: the client's zone comes from the local cluster.
    let token = format!(r#"{{"ns":"{}","nodeName":"node-1","pod":"c"}}"#, env.ns);
    let mut zoned = EndpointStream::open(&mut client, &authority(&env, "web-east", 80), &token)
        .await
        .expect("open with a token");
    zoned.wait_addrs("east's endpoint", &addrs(&[east_a])).await;
    assert_eq!(
        zoned.current[&SocketAddr::new(east_a.into(), 8080)]
            .metric_labels
            .get("zone_locality")
            .map(String::as_str),
        Some("remote")
    );
    drop(zoned);

    // East scales up: both streams follow.
    let east_b = east.create_ready_pod(&meshed("web-b", "web")).await;
    mirror
        .wait_addrs("east scaled up", &addrs(&[east_a, east_b]))
        .await;
    federated
        .wait_addrs("east scaled up", &addrs(&[local_ip, east_a, east_b]))
        .await;

    // East's API server stops: local discovery goes on, /ready is degraded.
    east.stop_apiserver();
    let degraded = eventually("/ready to name east", Duration::from_secs(60), || async {
        let (status, body) = dst.process.admin_get("/ready").await;
        if status == 200 && body.contains("degraded: remote cluster east") {
            Ok(body)
        } else {
            Err(format!("{status} {body}"))
        }
    })
    .await;
    assert!(degraded.starts_with("ready"), "{degraded}");
    let local_1 = env
        .create_ready_pod(
            &env.pod("web-local-1")
                .label("app", "web-local")
                .port(Some("http"), 8080),
        )
        .await
        .1;
    federated
        .wait_addrs(
            "the local member scaled while east is down",
            &addrs(&[local_ip, local_1, east_a, east_b]),
        )
        .await;

    // East comes back; a change made since converges.
    east.start_apiserver().await;
    east.delete_pod_now("web-a").await;
    mirror
        .wait_addrs("east scaled down", &addrs(&[east_b]))
        .await;
    federated
        .wait_addrs("east scaled down", &addrs(&[local_ip, local_1, east_b]))
        .await;
    // (No policy controller runs here: the policy link stays degraded.)
    eventually("/ready to drop east", Duration::from_secs(60), || async {
        let (status, body) = dst.process.admin_get("/ready").await;
        if status == 200 && !body.contains("remote cluster") {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    })
    .await;

    let (_, metrics) = dst.process.admin_get("/metrics").await;
    assert!(metrics.contains("cluster_store_size 1"), "{metrics}");
    assert!(
        metrics.contains(r#"remote_cluster_healthy{cluster="east"} 1"#),
        "{metrics}"
    );

    // The kubeconfig is rotated to credentials east refuses: reported, and
    // what east last said keeps being served.
    let refused_token = east
        .kubeconfig()
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("token:") {
                "    token: not-a-token".to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    link(&env, &refused_token).await;
    eventually(
        "/ready to name east's refusal",
        Duration::from_secs(60),
        || async {
            let (status, body) = ready_body(&dst).await;
            if status == 200
                && body.contains("degraded: remote cluster east")
                && body.contains("401")
            {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        },
    )
    .await;
    let east_c = east.create_ready_pod(&meshed("web-c", "web")).await;
    // Rotated back: the watches re-list through the new client and converge.
    link(&env, &east.kubeconfig()).await;
    mirror
        .wait_addrs("the rotation's re-list", &addrs(&[east_b, east_c]))
        .await;

    // The Secret goes: east's endpoints go with it.
    env.api::<Secret>()
        .delete(
            &format!("cluster-credentials-{CLUSTER}"),
            &DeleteParams::default(),
        )
        .await
        .expect("delete the Secret");
    mirror
        .wait_for("east's endpoints gone", |s| {
            s.current.is_empty() && s.no_endpoints.is_some()
        })
        .await;
    federated
        .wait_addrs("only the local member", &addrs(&[local_ip, local_1]))
        .await;
    let (_, metrics) = dst.process.admin_get("/metrics").await;
    assert!(metrics.contains("cluster_store_size 0"), "{metrics}");
    let refused = EndpointStream::open(&mut client, &authority(&env, "web-east", 80), "")
        .await
        .err()
        .expect("unlinked");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");

    // A federated Service that is deleted ends its streams (OK).
    let (ok, out) = env
        .cluster()
        .kubectl(&["delete", "-n", &env.ns, "service", "web-fed"], None);
    assert!(ok, "{out}");
    let ended = tokio::time::timeout(crate::common::TIMEOUT, federated.stream.message()).await;
    assert!(matches!(ended, Ok(Ok(None))), "{ended:?}");
}
