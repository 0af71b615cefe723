//! The introspection listener end to end: a real client's `Get` and
//! `GetProfile` streams are listed with what their token said, the target's
//! group shows the endpoints they were sent, and the audit finds the
//! published state consistent with the index. The admin port answers none
//! of these paths.

use std::time::Duration;

use linkerd2_proxy_api::destination::{GetDestination, update};
use serde_json::Value;
use test_support::{TestEnv, eventually, free_addr};

use crate::common::{authority, client, http_service, ready_pod, start_destination};

const TIMEOUT: Duration = Duration::from_secs(30);

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test]
async fn open_streams_their_targets_and_the_audit() {
    let env = TestEnv::new("dst-introspect").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "web").await;
    let ip = ready_pod(&env, "web", "web-0").await;

    let mut grpc = client(dst.addr).await;
    let token = format!(
        r#"{{"ns":"{}","nodeName":"node-1","pod":"client-0"}}"#,
        env.ns
    );
    let path = authority(&env, "web", 80);
    let request = |path: &str| GetDestination {
        scheme: "k8s".into(),
        path: path.into(),
        context_token: token.clone(),
    };
    let mut get = grpc.get(request(&path)).await.expect("Get").into_inner();
    // Read until the pod's endpoint arrives.
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let update = get.message().await.expect("a message").expect("open");
            if let Some(update::Update::Add(set)) = update.update
                && !set.addrs.is_empty()
            {
                return;
            }
        }
    })
    .await
    .expect("the endpoint within the timeout");
    let mut profile = grpc
        .get_profile(request(&path))
        .await
        .expect("GetProfile")
        .into_inner();
    let _ = profile.message().await.expect("a profile");

    for path in ["/streams", "/targets?service=a/b", "/audit"] {
        let (status, _) = dst.process.admin_get(path).await;
        assert_eq!(status, 404, "{path} on the admin port");
    }
    let (status, body) = dst
        .process
        .introspection_get("/streams?pod=client-0&kind=Get")
        .await;
    assert_eq!(status, 200, "{body}");
    let page = json(&body);
    let [stream] = page["streams"].as_array().expect("streams").as_slice() else {
        panic!("one Get stream of client-0 expected: {body}");
    };
    assert_eq!(stream["path"], path.as_str());
    assert_eq!(stream["client_namespace"], env.ns.as_str());
    assert_eq!(stream["client_node"], "node-1");
    assert_eq!(
        stream["follows"],
        format!("Service {}/web:80 (node node-1)", env.ns).as_str()
    );
    assert_eq!(stream["sent_version"], stream["newest_version"], "{body}");
    assert!(
        stream["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:"))
    );

    let (_, body) = dst.process.introspection_get("/streams?pod=client-0").await;
    let kinds: Vec<_> = json(&body)["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .map(|s| s["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds, ["Get", "GetProfile"], "{body}");

    let (status, body) = dst
        .process
        .introspection_get(&format!("/targets?service={}/web", env.ns))
        .await;
    assert_eq!(status, 200, "{body}");
    let target = json(&body);
    assert_eq!(target["exists"], true);
    assert_eq!(
        target["groups"][0]["snapshot"]["endpoints"][0]["addr"],
        format!("{ip}:8080").as_str(),
        "{body}"
    );
    assert_eq!(
        target["profiles"][0]["profile"]["fully_qualified_name"],
        format!("web.{}.svc.cluster.local", env.ns).as_str(),
        "{body}"
    );

    // Consistent now, and after a change has reached the stream.
    eventually("a consistent audit", TIMEOUT, || async {
        let (_, body) = dst.process.introspection_get("/audit").await;
        if json(&body)["consistent"] == true {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    env.delete_pod_now("web-0").await;
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let update = get.message().await.expect("a message").expect("open");
            if matches!(update.update, Some(update::Update::NoEndpoints(_))) {
                return;
            }
        }
    })
    .await
    .expect("NoEndpoints within the timeout");
    let (_, body) = dst.process.introspection_get("/audit").await;
    let audit = json(&body);
    assert_eq!(audit["consistent"], true, "{body}");
    assert!(audit["groups"].as_u64().is_some_and(|g| g >= 1), "{body}");
    let (_, metrics) = dst.process.admin_get("/metrics").await;
    assert!(metrics.contains("audit_runs_total"), "{metrics}");

    drop((get, profile));
    eventually("closed streams leave the list", TIMEOUT, || async {
        let (_, body) = dst.process.introspection_get("/streams?pod=client-0").await;
        if json(&body)["streams"].as_array().is_some_and(Vec::is_empty) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}
