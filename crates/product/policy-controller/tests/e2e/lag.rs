//! No answer of the policy controller depends on whether its watches have
//! caught up: a meshed pod or a Service created a moment before a request
//! is answered as it is (asked again and again, right after each create),
//! and an outbound stream opened before its Service exists follows the
//! Service into existence.

use std::{net::IpAddr, time::Duration};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, PostParams};
use linkerd2_proxy_api::{
    inbound::PortSpec,
    net::TcpAddress,
    outbound::{OutboundPolicy, TrafficSpec, proxy_protocol, traffic_spec},
};
use test_support::TestEnv;

use crate::support::start_controller;

/// How many times each kind is created and asked for at once.
const ROUNDS: usize = 50;

const TIMEOUT: Duration = Duration::from_secs(30);

/// A Service `name`, port 80, opaque by annotation: a policy that reads
/// the Service says so (`opaque`), a default one does not (`detect`).
fn opaque_service(name: &str) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "annotations": {k8s_api::labels::OPAQUE_PORTS: "80"}
        },
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}]}
    }))
    .expect("a Service")
}

fn protocol(policy: &OutboundPolicy) -> &'static str {
    match policy.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(proxy_protocol::Kind::Opaque(_)) => "opaque",
        Some(proxy_protocol::Kind::Detect(_)) => "detect",
        Some(_) => "other",
        None => "none",
    }
}

fn by_authority(env: &TestEnv, name: &str) -> TrafficSpec {
    TrafficSpec {
        source_workload: format!("{}:client", env.ns),
        target: Some(traffic_spec::Target::Authority(format!(
            "{name}.{}.svc.cluster.local:80",
            env.ns
        ))),
    }
}

#[tokio::test]
async fn meshed_pods_created_a_moment_ago_have_their_servers() {
    // (The pods are never made Ready: a proxy asks before its pod is.)
    let env = TestEnv::new("plag-pod").await;
    let mut ctl = start_controller(&env, &[]).await;
    for round in 0..ROUNDS {
        let name = format!("pod-{round}");
        let spec = env
            .pod(&name)
            .label("app", "web")
            .port(Some("http"), 8080)
            .meshed("linkerd");
        // Asked right after the create (a proxy asks as soon as it starts,
        // which is after its pod is created, maybe before the watch saw it).
        env.api::<Pod>()
            .create(&PostParams::default(), &spec.build())
            .await
            .expect("create the pod");
        let request = PortSpec {
            workload: format!(r#"{{"ns":"{}","pod":"{name}"}}"#, env.ns),
            port: 8080,
        };
        let answer = ctl.inbound.get_port(request).await;
        assert!(
            answer.is_ok(),
            "round {round}: GetPort right after the pod was created: {answer:?}"
        );
    }
}

#[tokio::test]
async fn services_created_a_moment_ago_have_their_policies() {
    let env = TestEnv::new("plag-svc").await;
    let mut ctl = start_controller(&env, &[]).await;
    let services = env.api::<Service>();
    for round in 0..ROUNDS {
        let name = format!("svc-{round}");
        let created = services
            .create(&PostParams::default(), &opaque_service(&name))
            .await
            .expect("create the Service");
        // By name: the Service's own settings, not a default.
        let policy = ctl
            .outbound
            .get(by_authority(&env, &name))
            .await
            .expect("by name")
            .into_inner();
        assert_eq!(
            protocol(&policy),
            "opaque",
            "round {round}: outbound Get by name right after the create"
        );
        // By ClusterIP: the Service, not `NotFound` (which a proxy does not
        // ask again).
        let ip: IpAddr = created
            .spec
            .and_then(|s| s.cluster_ip)
            .and_then(|ip| ip.parse().ok())
            .expect("a ClusterIP");
        let spec = TrafficSpec {
            source_workload: format!("{}:client", env.ns),
            target: Some(traffic_spec::Target::Addr(TcpAddress {
                ip: Some(ip.into()),
                port: 80,
            })),
        };
        let answer = ctl.outbound.get(spec).await;
        assert!(
            answer
                .as_ref()
                .is_ok_and(|p| protocol(p.get_ref()) == "opaque"),
            "round {round}: outbound Get by ClusterIP right after the create: {answer:?}"
        );
        services
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete the Service");
    }
}

#[tokio::test]
async fn a_service_asked_for_before_it_exists_is_followed_into_existence() {
    let env = TestEnv::new("plag-later").await;
    let mut ctl = start_controller(&env, &[]).await;
    let mut stream = ctl
        .outbound
        .watch(by_authority(&env, "later"))
        .await
        .expect("an open stream, not NotFound")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("a policy within the timeout")
        .expect("healthy")
        .expect("open");
    assert_eq!(protocol(&first), "detect", "the default policy: {first:?}");

    env.api::<Service>()
        .create(&PostParams::default(), &opaque_service("later"))
        .await
        .expect("create the Service");
    let followed = test_support::next_matching(&mut stream, "the Service's policy", TIMEOUT, |p| {
        protocol(p) == "opaque"
    })
    .await;
    assert_eq!(protocol(&followed), "opaque");
}
