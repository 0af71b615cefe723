//! The introspection listener: `/streams` lists a real client's
//! `WatchPort` and `/audit` finds what it was sent equal to the index.

use super::*;

/// `/streams` (on the introspection listener, not the admin port) lists a
/// real client's `WatchPort`, and `/audit` finds what it was sent equal to
/// what the index gives, before and after a Server lands.
#[tokio::test]
async fn open_watches_are_listed_and_audited() {
    let env = TestEnv::new("policy-introspect").await;
    create_web_pod(&env).await;
    let mut controller = start_controller(&env, &[]).await;
    let mut stream = controller
        .inbound
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    next_matching(&mut stream, "the first message", |_| true).await;

    let json = |body: &str| -> serde_json::Value {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    };
    for path in ["/streams", "/audit"] {
        let (status, _) = controller.process.admin_get(path).await;
        assert_eq!(status, 404, "{path} on the admin port");
    }
    let (status, body) = controller
        .process
        .introspection_get("/streams?kind=WatchPort&workload=web")
        .await;
    assert_eq!(status, 200, "{body}");
    let page = json(&body);
    assert_eq!(page["streams"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(page["streams"][0]["target"], "port 8080");
    assert_eq!(page["streams"][0]["updates"], 1);
    assert!(
        page["streams"][0]["workload"]
            .as_str()
            .is_some_and(|w| w.contains(&env.ns)),
        "{body}"
    );
    let (_, body) = controller.process.introspection_get("/audit").await;
    assert_eq!(json(&body)["consistent"], true, "{body}");

    kubectl_apply(&env, &server_yaml("web-http", "  proxyProtocol: HTTP/1\n"));
    next_matching(&mut stream, "the Server", |s| {
        name_of(s) == ("server".into(), "web-http".into())
    })
    .await;
    let (_, body) = controller.process.introspection_get("/audit").await;
    let audit = json(&body);
    assert_eq!(audit["consistent"], true, "{body}");
    assert_eq!(audit["streams"], 1, "{body}");
    let (_, metrics) = controller.process.admin_get("/metrics").await;
    assert!(metrics.contains("policy_audit_runs_total"), "{metrics}");

    drop(stream);
    eventually("the closed stream leaves the list", TIMEOUT, || async {
        let (_, body) = controller.process.introspection_get("/streams").await;
        if json(&body)["open"] == 0 {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}
