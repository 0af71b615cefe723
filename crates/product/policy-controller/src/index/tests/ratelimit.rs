//! HTTPLocalRateLimitPolicies in the inbound index: applied only once
//! accepted, to the Server they target, with override clients resolved to
//! mesh identities; conversion errors are the admission messages.

use super::*;
use crate::core::{RateLimit, RateLimitOverride};
use crate::k8s::ratelimit::{InvalidRateLimit, check_limits, ratelimit_policy};
use k8s_api::policy::{HTTPLocalRateLimitPolicy, HttpLocalRateLimitPolicySpec};

fn ratelimit(name: &str, created: u64, spec: Value, accepted: bool) -> HTTPLocalRateLimitPolicy {
    let status = if accepted {
        json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "lastTransitionTime": time(0)}]})
    } else {
        json!(null)
    };
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "HTTPLocalRateLimitPolicy",
        "metadata": {"namespace": NS, "name": name, "creationTimestamp": time(created)},
        "spec": spec,
        "status": status,
    }))
}

fn spec(server: &str) -> Value {
    json!({
        "targetRef": {"group": "policy.linkerd.io", "kind": "Server", "name": server},
        "total": {"requestsPerSecond": 100},
        "identity": {"requestsPerSecond": 20},
        "overrides": [{"requestsPerSecond": 50, "clientRefs": [
            {"kind": "ServiceAccount", "name": "api"},
            {"kind": "ServiceAccount", "name": "batch", "namespace": "jobs"},
        ]}],
    })
}

fn http_server() -> Server {
    server(
        "web-http",
        1,
        json!({"podSelector": {}, "port": 8080, "proxyProtocol": "HTTP/1"}),
    )
}

#[test]
fn an_accepted_policy_limits_its_server_with_override_identities() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[("http", 8080)]));
    index.apply(http_server());
    let mut rx = rx(&mut index, "web", 8080);
    assert_eq!(rx.borrow_and_update().ratelimit, None);

    // Not accepted yet (no status): nothing changes.
    index.apply(ratelimit("rl", 1, spec("web-http"), false));
    unchanged(&rx);

    index.apply(ratelimit("rl", 1, spec("web-http"), true));
    let server = changed(&mut rx);
    assert_eq!(
        server.ratelimit,
        Some(RateLimit {
            name: "rl".into(),
            total: Some(100),
            identity: Some(20),
            overrides: vec![RateLimitOverride {
                requests_per_second: 50,
                client_identities: vec![
                    "api.ns.serviceaccount.identity.linkerd.cluster.local".into(),
                    "batch.jobs.serviceaccount.identity.linkerd.cluster.local".into(),
                ],
            }],
        })
    );

    // Another port (another Server, or the default) is not limited.
    assert_eq!(rx_other(&mut index), None);

    k8s_index::Index::<HTTPLocalRateLimitPolicy>::delete(&mut index, key("rl"));
    assert_eq!(changed(&mut rx).ratelimit, None);
}

fn rx_other(index: &mut Index) -> Option<RateLimit> {
    index
        .pod_server_rx(NS, "web", port(9999))
        .expect("known pod")
        .borrow()
        .ratelimit
        .clone()
}

#[test]
fn the_oldest_accepted_policy_wins_and_other_servers_are_untouched() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[("http", 8080), ("admin", 9090)]));
    index.apply(http_server());
    index.apply(server("admin", 2, json!({"podSelector": {}, "port": 9090})));
    let mut web = rx(&mut index, "web", 8080);
    let admin = rx(&mut index, "web", 9090);
    web.mark_unchanged();

    index.apply(ratelimit("newer", 20, spec("web-http"), true));
    index.apply(ratelimit("older", 10, spec("web-http"), true));
    let server = changed(&mut web);
    assert_eq!(server.ratelimit.map(|r| r.name).as_deref(), Some("older"));
    unchanged(&admin);

    k8s_index::Index::<HTTPLocalRateLimitPolicy>::delete(&mut index, key("older"));
    assert_eq!(
        changed(&mut web).ratelimit.map(|r| r.name).as_deref(),
        Some("newer")
    );
}

#[test]
fn conversion_and_admission_refuse_what_the_original_refuses() {
    let check = |v: Value| {
        let spec = serde_json::from_value(v).expect("spec");
        ratelimit_policy(&spec)?;
        check_limits(&spec)
    };
    let server = json!({"group": "policy.linkerd.io", "kind": "Server", "name": "s"});
    assert_eq!(check(json!({"targetRef": server})), Ok(()));
    assert_eq!(
        check(json!({"targetRef": {"kind": "Namespace", "name": "ns"}})),
        Err(InvalidRateLimit::Target("core/Namespace".into()))
    );
    assert_eq!(
        check(json!({"targetRef": server, "total": {"requestsPerSecond": 0}})),
        Err(InvalidRateLimit::Zero("total"))
    );
    assert_eq!(
        check(json!({"targetRef": server, "identity": {"requestsPerSecond": 0}})),
        Err(InvalidRateLimit::Zero("identity"))
    );
    assert_eq!(
        check(
            json!({"targetRef": server, "total": {"requestsPerSecond": 5},
            "identity": {"requestsPerSecond": 6}})
        ),
        Err(InvalidRateLimit::AboveTotal("identity"))
    );
    assert_eq!(
        check(
            json!({"targetRef": server, "total": {"requestsPerSecond": 5},
            "overrides": [{"requestsPerSecond": 6, "clientRefs": []}]})
        ),
        Err(InvalidRateLimit::AboveTotal("override"))
    );
    assert_eq!(
        check(json!({"targetRef": server,
            "overrides": [{"requestsPerSecond": 0, "clientRefs": []}]})),
        Err(InvalidRateLimit::Zero("override"))
    );
    assert_eq!(
        check(
            json!({"targetRef": server, "overrides": [{"requestsPerSecond": 1,
            "clientRefs": [{"group": "policy.linkerd.io", "kind": "MeshTLSAuthentication", "name": "m"}]}]})
        ),
        Err(InvalidRateLimit::ClientRef)
    );
    // The index itself applies out-of-range limits (as the original); only
    // admission refuses them.
    let zero: HttpLocalRateLimitPolicySpec =
        serde_json::from_value(json!({"targetRef": server, "total": {"requestsPerSecond": 0}}))
            .expect("spec");
    assert_eq!(ratelimit_policy(&zero).map(|s| s.total), Ok(Some(0)));
    assert_eq!(
        InvalidRateLimit::AboveTotal("identity").to_string(),
        "identity.requestsPerSecond must be less than or equal to total.requestsPerSecond"
    );
}
