//! No answer depends on whether the destination's watches have caught up:
//! an object created a moment before a request is answered as it is (the
//! request is asked again and again, right after each create), and a
//! request made before its Service exists opens a stream that follows the
//! Service into existence.

use std::time::Duration;

use k8s_api::labels::OPAQUE_PORTS;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, destination_client::DestinationClient, update,
};
use test_support::{TestEnv, free_addr};
use tonic::{Streaming, transport::Channel};

use crate::common::{EndpointStream, authority, client, start_destination};

/// How many times each kind is created and asked for at once.
const ROUNDS: usize = 50;

const TIMEOUT: Duration = Duration::from_secs(30);

/// A Service `name` (port 80, selecting nothing) whose port 80 is opaque by
/// annotation: a profile that reads the Service says so.
fn opaque_service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some([(OPAQUE_PORTS.to_string(), "80".to_string())].into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("app".to_string(), format!("{name}-none"))].into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn get_profile(
    client: &mut DestinationClient<Channel>,
    path: &str,
) -> Streaming<DestinationProfile> {
    let request = GetDestination {
        scheme: "k8s".into(),
        path: path.into(),
        context_token: String::new(),
    };
    client
        .get_profile(request)
        .await
        .unwrap_or_else(|status| panic!("GetProfile {path}: {status:?}"))
        .into_inner()
}

async fn first(stream: &mut Streaming<DestinationProfile>) -> DestinationProfile {
    tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("a profile within the timeout")
        .expect("stream healthy")
        .expect("stream open")
}

#[tokio::test]
async fn services_created_a_moment_ago_are_answered_as_they_are() {
    let env = TestEnv::new("lag-svc").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    let services = env.api::<Service>();
    for round in 0..ROUNDS {
        let name = format!("svc-{round}");
        let created = services
            .create(&PostParams::default(), &opaque_service(&name))
            .await
            .expect("create the Service");
        // By name, at once: the Service's own annotation, not a default.
        let mut by_name = get_profile(&mut client, &authority(&env, &name, 80)).await;
        let profile = first(&mut by_name).await;
        assert!(
            profile.opaque_protocol,
            "round {round}: GetProfile by name right after the create read the Service: {profile:?}"
        );
        // By ClusterIP, at once: the Service's profile, not a bare address.
        let ip = created
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("a ClusterIP");
        let mut by_ip = get_profile(&mut client, &format!("{ip}:80")).await;
        let profile = first(&mut by_ip).await;
        assert_eq!(
            profile.fully_qualified_name,
            format!("{name}.{}.svc.cluster.local", env.ns),
            "round {round}: GetProfile by ClusterIP right after the create"
        );
        // Get, at once: a Service without endpoints, not a missing one.
        let mut get = EndpointStream::open(&mut client, &authority(&env, &name, 80), "")
            .await
            .expect("Get opens");
        let update = get.next().await;
        assert!(
            matches!(update.update, Some(update::Update::NoEndpoints(ref n)) if n.exists),
            "round {round}: Get right after the create: {update:?}"
        );
        services
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete the Service");
    }
}

#[tokio::test]
async fn pods_created_a_moment_ago_are_answered_as_they_are() {
    let env = TestEnv::new("lag-pod").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    for round in 0..ROUNDS {
        let name = format!("pod-{round}");
        let spec = env
            .pod(&name)
            .label("app", "lag")
            .port(Some("http"), 8080)
            .meshed("linkerd");
        let (_, ip) = env.create_ready_pod(&spec).await;
        let mut by_ip = get_profile(&mut client, &format!("{ip}:8080")).await;
        let profile = first(&mut by_ip).await;
        let pod = profile
            .endpoint
            .as_ref()
            .and_then(|e| e.metric_labels.get("pod"))
            .cloned();
        assert_eq!(
            pod.as_deref(),
            Some(name.as_str()),
            "round {round}: GetProfile by pod IP right after the pod got it: {profile:?}"
        );
    }
}

#[tokio::test]
async fn asked_before_it_exists_then_followed_into_existence() {
    let env = TestEnv::new("lag-later").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    let path = authority(&env, "later", 80);

    let mut profile = get_profile(&mut client, &path).await;
    let default = first(&mut profile).await;
    assert_eq!(
        default.fully_qualified_name,
        format!("later.{}.svc.cluster.local", env.ns),
        "the default profile of the name"
    );
    assert!(!default.opaque_protocol && default.routes.is_empty());
    // `Get` of a Service that does not exist is the original's `NotFound`,
    // once the API server agrees.
    let refused = EndpointStream::open(&mut client, &path, "")
        .await
        .err()
        .expect("Get of a missing Service is refused");
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    assert_eq!(
        refused.message(),
        format!("Service later.{} not found", env.ns)
    );

    env.api::<Service>()
        .create(&PostParams::default(), &opaque_service("later"))
        .await
        .expect("create the Service");
    let opaque = first(&mut profile).await;
    assert!(
        opaque.opaque_protocol,
        "the same stream follows the Service's annotation: {opaque:?}"
    );
    let mut get = EndpointStream::open(&mut client, &path, "")
        .await
        .expect("Get opens once the Service exists");
    get.wait_for("NoEndpoints{exists: true}", |s| {
        s.no_endpoints == Some(true)
    })
    .await;
}
