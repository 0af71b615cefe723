//! `Destination.GetProfile` end to end: ServiceProfiles applied with kubectl
//! to the real local control plane reach open `GetProfile` streams of a
//! `destination` process; edits and deletions too.

use std::time::Duration;

use crate::common::{authority, create_service, http_service, ready_pod, start_destination};
use k8s_openapi::{api::core::v1::Service, apimachinery::pkg::util::intstr::IntOrString};
use kube::api::{Patch, PatchParams};
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, destination_client::DestinationClient,
};
use test_support::{TestEnv, free_addr};
use tonic::{Code, Streaming, transport::Channel};

const TIMEOUT: Duration = Duration::from_secs(30);

async fn open(
    client: &mut DestinationClient<Channel>,
    path: &str,
    token: &str,
) -> Result<Streaming<DestinationProfile>, tonic::Status> {
    let request = GetDestination {
        scheme: "k8s".into(),
        path: path.into(),
        context_token: token.into(),
    };
    Ok(client.get_profile(request).await?.into_inner())
}

/// [`open`], which must succeed: a Service created a moment before is
/// answered as it is, whether or not the destination's watch has seen it.
async fn open_stream(
    client: &mut DestinationClient<Channel>,
    path: &str,
    token: &str,
) -> Streaming<DestinationProfile> {
    open(client, path, token).await.expect("the stream opens")
}

async fn next(stream: &mut Streaming<DestinationProfile>) -> DestinationProfile {
    tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("a profile within the timeout")
        .expect("stream healthy")
        .expect("stream open")
}

fn route_names(profile: &DestinationProfile) -> Vec<String> {
    profile
        .routes
        .iter()
        .map(|r| r.metrics_labels.get("route").cloned().unwrap_or_default())
        .collect()
}

fn sp_yaml(env_ns: &str, name: &str, routes: &[&str]) -> String {
    let routes: String = routes
        .iter()
        .map(|r| {
            format!(
                "  - name: {r}\n    condition:\n      method: GET\n      pathRegex: /{r}\n    isRetryable: true\n    timeout: 250ms\n"
            )
        })
        .collect();
    format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: {name}\n  namespace: {env_ns}\nspec:\n  routes:\n{routes}"
    )
}

#[tokio::test]
async fn profiles_follow_create_edit_and_delete() {
    let env = TestEnv::new("prof").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "web").await;
    let mut client = crate::common::client(dst.addr).await;
    let fqn = format!("web.{}.svc.cluster.local", env.ns);
    let mut stream = open_stream(&mut client, &authority(&env, "web", 80), "").await;

    let default = next(&mut stream).await;
    assert_eq!(default.fully_qualified_name, fqn);
    assert!(default.routes.is_empty());
    assert!(default.retry_budget.is_some());
    assert!(!default.opaque_protocol);

    let cluster = env.cluster();
    let (ok, out) = cluster.kubectl(
        &["apply", "-f", "-"],
        Some(&sp_yaml(&env.ns, &fqn, &["books"])),
    );
    assert!(ok, "{out}");
    let created = next(&mut stream).await;
    assert_eq!(route_names(&created), ["books"]);
    assert!(created.routes[0].is_retryable);
    assert_eq!(
        created.routes[0].timeout,
        Some(prost_types::Duration {
            seconds: 0,
            nanos: 250_000_000
        })
    );

    let (ok, out) = cluster.kubectl(
        &["apply", "-f", "-"],
        Some(&sp_yaml(&env.ns, &fqn, &["books", "authors"])),
    );
    assert!(ok, "{out}");
    assert_eq!(route_names(&next(&mut stream).await), ["books", "authors"]);

    // An edit that changes nothing the proxy sees sends nothing.
    let (ok, out) = cluster.kubectl(
        &[
            "annotate",
            "serviceprofile",
            &fqn,
            "-n",
            &env.ns,
            "note=unrelated",
        ],
        None,
    );
    assert!(ok, "{out}");

    // The Service's opaque-ports annotation flips opaque_protocol.
    env.api::<Service>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"config.linkerd.io/opaque-ports": "80"}}
            })),
        )
        .await
        .expect("annotate service");
    let opaque = next(&mut stream).await;
    assert!(
        opaque.opaque_protocol,
        "the annotation edit is the next message"
    );
    assert_eq!(route_names(&opaque), ["books", "authors"]);

    let (ok, out) = cluster.kubectl(&["delete", "serviceprofile", &fqn, "-n", &env.ns], None);
    assert!(ok, "{out}");
    let deleted = next(&mut stream).await;
    assert!(deleted.routes.is_empty(), "back to the default profile");
}

#[tokio::test]
async fn the_client_namespace_profile_wins() {
    let env = TestEnv::new("prof-ns").await;
    let client_env = TestEnv::new("prof-client").await;
    let dst = start_destination(&env, free_addr()).await;
    create_service(&env, "api", vec![(8080, IntOrString::Int(8080))], false).await;
    let fqn = format!("api.{}.svc.cluster.local", env.ns);
    let cluster = env.cluster();
    let (ok, out) = cluster.kubectl(
        &["apply", "-f", "-"],
        Some(&sp_yaml(&env.ns, &fqn, &["server-side"])),
    );
    assert!(ok, "{out}");
    let (ok, out) = cluster.kubectl(
        &["apply", "-f", "-"],
        Some(&sp_yaml(&client_env.ns, &fqn, &["client-side"])),
    );
    assert!(ok, "{out}");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut client = crate::common::client(dst.addr).await;
    let token = format!(
        r#"{{"ns":"{}","nodeName":"node-1","pod":"c"}}"#,
        client_env.ns
    );
    let mut from_client_ns = open_stream(&mut client, &authority(&env, "api", 8080), &token).await;
    assert_eq!(
        route_names(&next(&mut from_client_ns).await),
        ["client-side"]
    );
    let mut anonymous = open(&mut client, &authority(&env, "api", 8080), "")
        .await
        .expect("open");
    assert_eq!(route_names(&next(&mut anonymous).await), ["server-side"]);
}

#[tokio::test]
async fn ports_ips_and_errors() {
    let env = TestEnv::new("prof-misc").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "web").await;
    let ip = ready_pod(&env, "web", "web-0").await;
    let mut client = crate::common::client(dst.addr).await;

    // A port the Service does not declare: as the original (2.20), the
    // Service port's profile (the Service is not looked up).
    let mut undeclared = open_stream(&mut client, &authority(&env, "web", 9999), "").await;
    let profile = next(&mut undeclared).await;
    assert_eq!(
        profile.fully_qualified_name,
        format!("web.{}.svc.cluster.local", env.ns)
    );
    assert!(profile.endpoint.is_none());

    // A pod IP: an endpoint profile with the pod's labels.
    let mut by_ip = open(&mut client, &format!("{ip}:8080"), "")
        .await
        .expect("open");
    let profile = next(&mut by_ip).await;
    let endpoint = profile.endpoint.expect("an endpoint");
    assert_eq!(
        endpoint.metric_labels.get("pod").map(String::as_str),
        Some("web-0")
    );
    assert_eq!(endpoint.metric_labels.get("namespace"), Some(&env.ns));
    assert!(endpoint.tls_identity.is_some(), "the pod is meshed");
    assert!(profile.fully_qualified_name.is_empty());

    // An unknown IP: the bare address.
    let mut unknown = open(&mut client, "192.0.2.10:80", "").await.expect("open");
    let bare = next(&mut unknown).await.endpoint.expect("an endpoint");
    assert!(bare.metric_labels.is_empty());

    // A Service that does not exist: its default profile on an open stream
    // (the original's answer), which follows the Service into existence
    // (`crate::lag`).
    let mut missing = open_stream(&mut client, &authority(&env, "nope", 80), "").await;
    let default = next(&mut missing).await;
    assert_eq!(
        default.fully_qualified_name,
        format!("nope.{}.svc.cluster.local", env.ns)
    );
    assert!(default.retry_budget.is_some() && default.routes.is_empty());
    for bad in [
        "web.ns.svc.other.domain:80",
        "web.ns.svc.cluster.local:0",
        "::::",
    ] {
        let status = open(&mut client, bad, "").await.expect_err(bad);
        assert_eq!(status.code(), Code::InvalidArgument, "{bad}: {status:?}");
    }
    // And it keeps serving.
    let mut again = open(&mut client, &authority(&env, "web", 80), "")
        .await
        .expect("open");
    assert!(next(&mut again).await.routes.is_empty());
}

#[tokio::test]
async fn instance_names_resolve_to_their_pod() {
    let env = TestEnv::new("prof-inst").await;
    let dst = start_destination(&env, free_addr()).await;
    create_service(&env, "db", vec![(5432, IntOrString::Int(5432))], true).await;
    let spec = env
        .pod("db-0")
        .label("app", "db")
        .port(Some("pg"), 5432)
        .hostname("db-0", "db")
        .meshed("linkerd");
    let (_, ip) = env.create_ready_pod(&spec).await;
    let mut client = crate::common::client(dst.addr).await;
    let path = format!("db-0.db.{}.svc.cluster.local:5432", env.ns);
    // The EndpointSlice carrying the hostname may take a moment to appear.
    let profile = test_support::eventually("the instance to resolve", TIMEOUT, || {
        let mut client = client.clone();
        let path = path.clone();
        async move {
            match open(&mut client, &path, "").await {
                Ok(mut stream) => Ok(next(&mut stream).await),
                Err(status) => Err(format!("{status:?}")),
            }
        }
    })
    .await;
    let endpoint = profile.endpoint.expect("an endpoint");
    assert_eq!(
        endpoint.metric_labels.get("pod").map(String::as_str),
        Some("db-0")
    );
    let addr = endpoint.addr.expect("addr");
    assert_eq!(addr.port, 5432);
    assert_eq!(
        std::net::IpAddr::try_from(addr.ip.expect("ip")).expect("ip"),
        std::net::IpAddr::from(ip)
    );

    let missing = format!("db-9.db.{}.svc.cluster.local:5432", env.ns);
    let status = open(&mut client, &missing, "")
        .await
        .expect_err("no such instance");
    // The original's answer, which a proxy retries until the instance exists.
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(
        status.message(),
        format!(
            "no pod found in EndpointSlices of Service {}/db for hostname db-9",
            env.ns
        )
    );
}
