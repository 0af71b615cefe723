//! Admission of HTTPLocalRateLimitPolicies and EgressNetworks.

use super::*;

#[test]
fn ratelimit_policies() {
    let server = json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"});
    accepts(
        "HTTPLocalRateLimitPolicy",
        json!({"targetRef": server, "total": {"requestsPerSecond": 100},
            "identity": {"requestsPerSecond": 10},
            "overrides": [{"requestsPerSecond": 50,
                "clientRefs": [{"kind": "ServiceAccount", "name": "api", "namespace": "other"}]}]}),
    );
    rejects(
        "HTTPLocalRateLimitPolicy",
        json!({"targetRef": {"group": "policy.linkerd.io", "kind": "HTTPRoute", "name": "r"}}),
        "is invalid: invalid targetRef kind: policy.linkerd.io/HTTPRoute",
    );
    rejects(
        "HTTPLocalRateLimitPolicy",
        json!({"targetRef": server, "total": {"requestsPerSecond": 10},
            "identity": {"requestsPerSecond": 11}}),
        "is invalid: identity.requestsPerSecond must be less than or equal to total.requestsPerSecond",
    );
    rejects(
        "HTTPLocalRateLimitPolicy",
        json!({"targetRef": server, "overrides": [{"requestsPerSecond": 5,
            "clientRefs": [{"kind": "Namespace", "name": "x"}]}]}),
        "is invalid: overrides.clientRefs must target a ServiceAccount",
    );
}

#[test]
fn egress_networks() {
    accepts("EgressNetwork", json!({"trafficPolicy": "Allow"}));
    accepts(
        "EgressNetwork",
        json!({"trafficPolicy": "Deny",
            "networks": [{"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}]}),
    );
    rejects(
        "EgressNetwork",
        json!({"trafficPolicy": "Allow", "networks": []}),
        "is invalid: networks must not be empty",
    );
    rejects(
        "EgressNetwork",
        json!({"trafficPolicy": "Allow",
            "networks": [{"cidr": "1.0.0.0/8", "except": ["2.0.0.0/8"]}]}),
        "is invalid: except 2.0.0.0/8 is not inside cidr 1.0.0.0/8",
    );
    assert!(
        verdict("EgressNetwork", json!({"trafficPolicy": "Maybe"}))
            .is_err_and(|m| m.contains("could not be parsed")),
    );
}

#[test]
fn egress_network_parents_need_a_port() {
    let portless = json!({"parentRefs": [{"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext"}]});
    let with_port = json!({"parentRefs": [{"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext", "port": 443}]});
    let message = "is invalid: cannot target an EgressNetwork without specifying a port";
    rejects("HTTPRoute", portless.clone(), message);
    accepts("HTTPRoute", with_port.clone());
    for kind in ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"] {
        let mut spec = portless.clone();
        spec["rules"] = json!([{"backendRefs": []}]);
        assert_eq!(
            gateway_verdict(kind, spec, json!({})),
            Err(format!("{kind} \"{NS}/obj\" {message}")),
        );
        let mut spec = with_port.clone();
        spec["rules"] = json!([{"backendRefs": []}]);
        assert_eq!(gateway_verdict(kind, spec, json!({})), Ok(()), "{kind}");
    }
}
