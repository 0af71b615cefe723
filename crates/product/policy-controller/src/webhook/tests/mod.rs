//! Every admission rule, with the exact message users see.

use admission::{AdmissionRequest, Validate};
use serde_json::{Value, json};

use super::PolicyValidator;
use crate::core::ClusterInfo;

const NS: &str = "ns";

fn request(kind: &str, spec: Value) -> AdmissionRequest {
    request_in("policy.linkerd.io", kind, spec, json!({}))
}

fn request_in(group: &str, kind: &str, spec: Value, annotations: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "name": "obj",
        "namespace": NS,
        "operation": "CREATE",
        "object": {
            "apiVersion": format!("{group}/v1"),
            "kind": kind,
            "metadata": {"name": "obj", "namespace": NS, "annotations": annotations},
            "spec": spec,
        },
    }))
    .expect("request")
}

fn verdict(kind: &str, spec: Value) -> Result<(), String> {
    PolicyValidator::new(ClusterInfo::default()).validate(&request(kind, spec))
}

fn accepts(kind: &str, spec: Value) {
    assert_eq!(verdict(kind, spec.clone()), Ok(()), "{kind} {spec}");
}

fn rejects(kind: &str, spec: Value, message: &str) {
    assert_eq!(
        verdict(kind, spec.clone()),
        Err(format!("{kind} \"{NS}/obj\" {message}")),
        "{kind} {spec}"
    );
}

#[test]
fn servers() {
    accepts(
        "Server",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "port": "http",
               "proxyProtocol": "HTTP/1", "accessPolicy": "audit"}),
    );
    accepts("Server", json!({"podSelector": {}, "port": 8080}));
    accepts(
        "Server",
        json!({"externalWorkloadSelector": {"matchLabels": {"app": "vm"}}, "port": 8080}),
    );
    rejects(
        "Server",
        json!({"podSelector": {}, "port": 80, "accessPolicy": "allow"}),
        "is invalid: invalid 'accessPolicy' field: invalid default policy \"allow\" (expected one of all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny, audit)",
    );
    rejects(
        "Server",
        json!({"port": 80}),
        "is invalid: one of podSelector or externalWorkloadSelector must be set",
    );
    rejects(
        "Server",
        json!({"podSelector": {}, "externalWorkloadSelector": {}, "port": 80}),
        "is invalid: podSelector and externalWorkloadSelector may not both be set",
    );
    rejects(
        "Server",
        json!({"externalWorkloadSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}, "port": 80}),
        "is invalid: unsupported label selector operator \"Near\"",
    );
    rejects(
        "Server",
        json!({"podSelector": {}, "port": 70000}),
        "is invalid: port 70000 is not in 1-65535",
    );
    rejects(
        "Server",
        json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}, "port": 80}),
        "is invalid: unsupported label selector operator \"Near\"",
    );
    rejects(
        "Server",
        json!({"podSelector": {}, "port": 80, "proxyProtocol": "HTTP/3"}),
        "could not be parsed: unknown variant `HTTP/3`, expected one of `unknown`, `HTTP/1`, `HTTP/2`, `gRPC`, `opaque`, `TLS`",
    );
}

#[test]
fn server_authorizations() {
    accepts(
        "ServerAuthorization",
        json!({"server": {"name": "web"},
               "client": {"networks": [{"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.3.4"]}],
                          "meshTLS": {"identities": ["*"], "serviceAccounts": [{"name": "api"}]}}}),
    );
    accepts(
        "ServerAuthorization",
        json!({"server": {"selector": {"matchLabels": {"a": "b"}}}, "client": {"meshTLS": {"unauthenticatedTLS": true}}}),
    );
    let cases = [
        (
            json!({"unauthenticated": true, "meshTLS": {"identities": ["a"]}}),
            "is invalid: meshTLS and unauthenticated may not both be set",
        ),
        (
            json!({"meshTLS": {"unauthenticatedTLS": true, "identities": ["a"]}}),
            "is invalid: meshTLS.unauthenticatedTLS may not be set together with identities or serviceAccounts",
        ),
        (
            json!({"meshTLS": {"unauthenticatedTLS": true, "serviceAccounts": [{"name": "a"}]}}),
            "is invalid: meshTLS.unauthenticatedTLS may not be set together with identities or serviceAccounts",
        ),
        (
            json!({"unauthenticated": true, "networks": [{"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}]}),
            "is invalid: except 192.168.0.0/16 is not inside cidr 10.0.0.0/8",
        ),
        (
            json!({"unauthenticated": true, "networks": [{"cidr": "10.0.0.0/16", "except": ["10.0.0.0/8"]}]}),
            "is invalid: except 10.0.0.0/8 is not inside cidr 10.0.0.0/16",
        ),
        (
            json!({"unauthenticated": true, "networks": [{"cidr": "10.0.0.0/16", "except": ["10.0.0.0/16"]}]}),
            "is invalid: except 10.0.0.0/16 covers all of cidr 10.0.0.0/16",
        ),
        (
            json!({"unauthenticated": true, "networks": [{"cidr": "10.0.0.0/33"}]}),
            "is invalid: invalid network \"10.0.0.0/33\": expected a CIDR such as 10.0.0.0/8 or an IP address",
        ),
    ];
    // Authorizing no client is the index's concern (it ignores such an
    // authorization), not admission's, as in the original.
    for client in [
        json!({"meshTLS": {}}),
        json!({"networks": [{"cidr": "10.0.0.0/8"}]}),
    ] {
        accepts(
            "ServerAuthorization",
            json!({"server": {"name": "web"}, "client": client}),
        );
    }
    for (client, message) in cases {
        rejects(
            "ServerAuthorization",
            json!({"server": {"name": "web"}, "client": client}),
            message,
        );
    }
}

fn target(kind: &str, name: &str) -> Value {
    json!({"group": if kind == "Namespace" { "" } else { "policy.linkerd.io" }, "kind": kind, "name": name})
}

fn authn(kind: &str, name: &str) -> Value {
    let group = if kind == "ServiceAccount" {
        ""
    } else {
        "policy.linkerd.io"
    };
    json!({"group": group, "kind": kind, "name": name})
}

#[test]
fn authorization_policies() {
    let policy = |target: Value, refs: Vec<Value>| json!({"targetRef": target, "requiredAuthenticationRefs": refs});
    accepts(
        "AuthorizationPolicy",
        policy(target("Server", "web"), vec![]),
    );
    accepts(
        "AuthorizationPolicy",
        policy(
            target("Namespace", NS),
            vec![
                authn("MeshTLSAuthentication", "ids"),
                authn("NetworkAuthentication", "nets"),
            ],
        ),
    );
    accepts(
        "AuthorizationPolicy",
        policy(
            target("HTTPRoute", "api"),
            vec![authn("ServiceAccount", "client")],
        ),
    );
    let cases = [
        (
            policy(target("Namespace", "other"), vec![]),
            "is invalid: a Namespace target must name the policy's own namespace \"ns\", not \"other\"",
        ),
        (
            policy(
                target("Server", "web"),
                vec![
                    authn("MeshTLSAuthentication", "a"),
                    authn("MeshTLSAuthentication", "b"),
                ],
            ),
            "is invalid: at most one MeshTLSAuthentication may be required",
        ),
        (
            policy(
                target("Server", "web"),
                vec![authn("ServiceAccount", "a"), authn("ServiceAccount", "b")],
            ),
            "is invalid: at most one ServiceAccount may be required",
        ),
        (
            policy(
                target("Server", "web"),
                vec![
                    authn("MeshTLSAuthentication", "a"),
                    authn("ServiceAccount", "b"),
                ],
            ),
            "is invalid: a MeshTLSAuthentication and a ServiceAccount may not both be required",
        ),
        (
            policy(
                target("Server", "web"),
                vec![
                    authn("NetworkAuthentication", "a"),
                    authn("NetworkAuthentication", "b"),
                ],
            ),
            "is invalid: at most one NetworkAuthentication may be required",
        ),
        (
            policy(
                target("Server", "web"),
                vec![json!({"group": "policy.linkerd.io", "kind": "Server", "name": "x"})],
            ),
            "is invalid: unsupported authentication policy.linkerd.io/Server",
        ),
        (
            policy(
                target("Server", "web"),
                vec![json!({"group": "policy.linkerd.io", "kind": "MeshTLSAuthentication"})],
            ),
            "is invalid: a MeshTLSAuthentication reference needs a name",
        ),
        (
            policy(
                json!({"group": "apps", "kind": "Deployment", "name": "web"}),
                vec![],
            ),
            "is invalid: unsupported target apps/Deployment",
        ),
        (
            json!({"targetRef": target("Server", "web")}),
            "could not be parsed: missing field `requiredAuthenticationRefs`",
        ),
    ];
    for (spec, message) in cases {
        rejects("AuthorizationPolicy", spec, message);
    }
}

#[test]
fn mesh_tls_authentications() {
    accepts(
        "MeshTLSAuthentication",
        json!({"identities": ["*", "web.ns.serviceaccount.identity.linkerd.cluster.local", "spiffe://example.org/web"]}),
    );
    accepts(
        "MeshTLSAuthentication",
        json!({"identityRefs": [{"kind": "ServiceAccount", "name": "web"}, {"kind": "Namespace", "name": "other"}]}),
    );
    let cases = [
        (
            json!({"identities": ["Web.NS"]}),
            "is invalid: invalid identity \"Web.NS\": expected a DNS-like name (lower-case labels, optionally starting with \"*\") or a SPIFFE ID (spiffe://trust-domain/path)",
        ),
        (
            json!({"identityRefs": [{"kind": "Namespace", "name": "a", "namespace": "b"}]}),
            "is invalid: a Namespace identity reference may not set a namespace (its name is the namespace)",
        ),
        (
            json!({"identityRefs": [{"kind": "Pod", "name": "a"}]}),
            "is invalid: unsupported identity reference kind Pod",
        ),
        (
            json!({"identityRefs": [{"kind": "ServiceAccount"}]}),
            "is invalid: a ServiceAccount reference needs a name",
        ),
        (
            json!({"identityRefs": [{"kind": "Namespace"}]}),
            "is invalid: a Namespace reference needs a name",
        ),
    ];
    // Neither identities nor references (the CRD's schema refuses it
    // first): admitted, as in the original.
    accepts("MeshTLSAuthentication", json!({}));
    accepts("MeshTLSAuthentication", json!({"identities": []}));
    for (spec, message) in cases {
        rejects("MeshTLSAuthentication", spec, message);
    }
}

#[test]
fn network_authentications() {
    accepts(
        "NetworkAuthentication",
        json!({"networks": [{"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}, {"cidr": "::/0"}]}),
    );
    rejects(
        "NetworkAuthentication",
        json!({"networks": []}),
        "is invalid: networks must not be empty",
    );
    rejects(
        "NetworkAuthentication",
        json!({"networks": [{"cidr": "10.0.0.0/8", "except": ["fd00::/8"]}]}),
        "is invalid: except fd00::/8 is not inside cidr 10.0.0.0/8",
    );
    rejects(
        "NetworkAuthentication",
        json!({"networks": [{"cidr": "10.0.0.1", "except": ["10.0.0.1"]}]}),
        "is invalid: except 10.0.0.1/32 covers all of cidr 10.0.0.1/32",
    );
    rejects(
        "NetworkAuthentication",
        json!({}),
        "could not be parsed: missing field `networks`",
    );
}

#[test]
fn http_routes() {
    let server = json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"});
    let route = |rules: Value| json!({"parentRefs": [server.clone()], "rules": rules});
    accepts(
        "HTTPRoute",
        route(json!([{
            "matches": [{"path": {"type": "RegularExpression", "value": "/a/[0-9]+"},
                         "headers": [{"name": "x-a", "value": "b"}], "method": "GET"}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/b"}}}]
        }])),
    );
    let cases = [
        (
            json!([{"matches": [{"path": {"type": "PathPrefix", "value": "api"}}]}]),
            "is invalid: path \"api\" is not absolute",
        ),
        (
            json!([{"matches": [{"path": {"type": "RegularExpression", "value": "(a"}}]}]),
            "is invalid: invalid regular expression \"(a\": regex parse error:\n    (a\n    ^\nerror: unclosed group",
        ),
        (
            json!([{"matches": [{"headers": [{"name": "x-a", "value": "a\nb"}]}]}]),
            "is invalid: invalid header value \"a\\nb\"",
        ),
        (
            json!([{"matches": [{"headers": [{"name": "x a", "value": "b"}]}]}]),
            "is invalid: invalid header name \"x a\"",
        ),
        // The policy.linkerd.io HTTPRoute defines three filters.
        (
            json!([{"filters": [{"type": "RequestMirror"}]}]),
            "could not be parsed: unknown filter type \"RequestMirror\" (expected RequestHeaderModifier, ResponseHeaderModifier or RequestRedirect)",
        ),
        (
            json!([{"filters": [{"type": "RequestHeaderModifier"}]}]),
            "could not be parsed: missing field `requestHeaderModifier`",
        ),
        (
            json!([{"filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath"}}}]}]),
            "is invalid: RequestRedirect filter must contain either replaceFullPath or replacePrefixMatch",
        ),
        (
            json!([{"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 1000}}]}]),
            "is invalid: invalid redirect status 1000",
        ),
        (
            json!([{"filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "b"}}}]}]),
            "is invalid: requestRedirect.path.replaceFullPath \"b\" is not an absolute path",
        ),
        (
            json!([{"filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "v2/"}}}]}]),
            "is invalid: requestRedirect.path.replacePrefixMatch \"v2/\" is not an absolute path",
        ),
        // Timeouts are checked whatever the parents (here only a Server).
        (
            json!([{"timeouts": {"request": "1s", "backendRequest": "2s"}}]),
            "is invalid: backendRequest timeout (2s) must not be greater than request timeout (1s)",
        ),
        (
            json!([{"timeouts": {"backendRequest": "-5ms"}}]),
            "is invalid: backendRequest timeout must not be negative",
        ),
    ];
    for (rules, message) in cases {
        rejects("HTTPRoute", route(rules), message);
    }
    // Server parents are not checked at admission (the index ignores a
    // route whose Server parent is elsewhere or names a port or section,
    // and the status writer says so).
    for parent in [
        json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "namespace": "other"}),
        json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "port": 80}),
        json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web", "sectionName": "a"}),
    ] {
        accepts("HTTPRoute", json!({"parentRefs": [parent]}));
    }
}

fn review(group: &str, kind: &str, spec: Value) -> admission::Verdict {
    PolicyValidator::new(ClusterInfo::default()).review(&request_in(group, kind, spec, json!({})))
}

#[test]
fn other_kinds_and_deletes() {
    // Denied with the original's message.
    for (group, kind) in [
        ("policy.linkerd.io", "Frobnicator"),
        ("gateway.networking.k8s.io", "Gateway"),
        ("example.com", "Widget"),
    ] {
        assert_eq!(
            review(group, kind, json!({})),
            admission::Verdict {
                result: Err(format!("unsupported resource type: {group}.v1.{kind}")),
                warnings: vec![],
            }
        );
    }
    // Group and kind are compared case-insensitively, as the original does.
    assert_eq!(
        review(
            "Policy.Linkerd.IO",
            "server",
            json!({"podSelector": {}, "port": 80})
        )
        .result,
        Ok(())
    );
    let mut delete = request("Server", json!({"port": "nope"}));
    delete.operation = "DELETE".into();
    delete.object = None;
    assert_eq!(
        PolicyValidator::new(ClusterInfo::default()).validate(&delete),
        Ok(())
    );
}

fn gateway_verdict(kind: &str, spec: Value, annotations: Value) -> Result<(), String> {
    PolicyValidator::new(ClusterInfo::default()).validate(&request_in(
        "gateway.networking.k8s.io",
        kind,
        spec,
        annotations,
    ))
}

#[test]
fn outbound_routes() {
    let svc = json!({"group": "core", "kind": "Service", "name": "web", "port": 80});
    let route = |rules: Value| json!({"parentRefs": [svc.clone()], "rules": rules});
    let ok = route(json!([{
        "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
        "backendRefs": [{"name": "api", "port": 8080, "weight": 2}],
        "timeouts": {"request": "10s", "backendRequest": "2s"}
    }]));
    assert_eq!(gateway_verdict("HTTPRoute", ok.clone(), json!({})), Ok(()));
    accepts("HTTPRoute", ok);
    let cases = [
        (
            route(json!([{"backendRefs": [{"name": "api"}]}])),
            json!({}),
            "is invalid: invalid backendRef: cannot reference a Service without a port",
        ),
        (
            route(json!([{}])),
            json!({"retry.linkerd.io/http": "7xx"}),
            "is invalid: retry.linkerd.io/http: invalid retry condition \"7xx\"",
        ),
        (
            route(json!([{}])),
            json!({"timeout.linkerd.io/request": "5"}),
            "is invalid: timeout.linkerd.io/request: \"5\" has no unit (ms, s, m, h or d)",
        ),
    ];
    // Filters the Gateway API allows are admitted whatever Meridian serves,
    // and a Gateway API route's rule timeouts are the CRD's concern.
    for rules in [
        json!([{"filters": [{"type": "URLRewrite", "urlRewrite": {}}]}]),
        json!([{"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "web", "port": 80}}}]}]),
        json!([{"timeouts": {"request": "1s", "backendRequest": "2s"}}]),
        json!([{"backendRefs": [{"name": "api", "port": 80, "filters": [{"type": "RequestMirror"}]}]}]),
    ] {
        assert_eq!(
            gateway_verdict("HTTPRoute", route(rules.clone()), json!({})),
            Ok(()),
            "{rules}"
        );
    }
    // Annotations are read only when a parent is a Service or an
    // EgressNetwork.
    assert_eq!(
        gateway_verdict(
            "HTTPRoute",
            json!({"parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "web"}]}),
            json!({"retry.linkerd.io/http": "7xx"})
        ),
        Ok(())
    );
    for (spec, annotations, message) in cases {
        assert_eq!(
            gateway_verdict("HTTPRoute", spec.clone(), annotations),
            Err(format!("HTTPRoute \"{NS}/obj\" {message}")),
            "{spec}"
        );
    }
    // The policy HTTPRoute on a Service is held to the same rules.
    rejects(
        "HTTPRoute",
        route(json!([{"timeouts": {"request": "-1s"}}])),
        "is invalid: request timeout must not be negative",
    );
    let grpc = |m: Value| json!({"parentRefs": [svc.clone()], "rules": [{"matches": [m]}]});
    assert_eq!(
        gateway_verdict(
            "GRPCRoute",
            grpc(json!({"method": {"service": "a.B"}})),
            json!({})
        ),
        Ok(())
    );
    assert_eq!(
        gateway_verdict(
            "GRPCRoute",
            grpc(json!({"method": {"type": "RegularExpression", "service": "a.*"}})),
            json!({})
        ),
        Err(format!(
            "GRPCRoute \"{NS}/obj\" is invalid: unsupported GRPCRoute method match type \"RegularExpression\""
        ))
    );
    let l4 = json!({"parentRefs": [svc.clone()], "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}, {}]});
    assert_eq!(
        gateway_verdict("TCPRoute", l4, json!({})),
        Err(format!(
            "TCPRoute \"{NS}/obj\" is invalid: a TCPRoute needs exactly one rule"
        ))
    );
    assert_eq!(
        gateway_verdict(
            "TLSRoute",
            json!({"parentRefs": [svc.clone()], "hostnames": ["a.example.com"], "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}]}),
            json!({})
        ),
        Ok(())
    );
    // The original does not look at an L4 route's backends.
    assert_eq!(
        gateway_verdict(
            "TCPRoute",
            json!({"parentRefs": [svc.clone()], "rules": [{"backendRefs": [{"name": "db"}]}]}),
            json!({})
        ),
        Ok(())
    );
    // Other Gateway API kinds are refused (see `other_kinds_and_deletes`).
    assert_eq!(
        gateway_verdict("Gateway", json!({}), json!({})),
        Err("unsupported resource type: gateway.networking.k8s.io.v1.Gateway".into())
    );
}

#[test]
fn gateway_routes_on_servers_are_admitted_whatever_the_inbound_index_serves() {
    let server = json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"});
    let http = |rules: Value| json!({"parentRefs": [server.clone()], "rules": rules});
    for spec in [
        http(json!([{"matches": [{"path": {"type": "Exact", "value": "/a"}}]}])),
        http(json!([{"filters": [{"type": "URLRewrite", "urlRewrite": {}}]}])),
        json!({"parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "web", "port": 80}]}),
        json!({"parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "web", "namespace": "other"}]}),
    ] {
        assert_eq!(
            gateway_verdict("HTTPRoute", spec.clone(), json!({})),
            Ok(()),
            "{spec}"
        );
        assert_eq!(
            gateway_verdict("GRPCRoute", spec.clone(), json!({})),
            Ok(()),
            "{spec}"
        );
    }
    assert_eq!(
        gateway_verdict(
            "HTTPRoute",
            http(json!([{"matches": [{"path": {"type": "Exact", "value": "a"}}]}])),
            json!({})
        ),
        Err("HTTPRoute \"ns/obj\" is invalid: path \"a\" is not absolute".into())
    );
    assert_eq!(
        gateway_verdict(
            "GRPCRoute",
            http(json!([{"matches": [{"method": {"type": "RegularExpression", "service": "a.*"}}]}])),
            json!({})
        ),
        Err("GRPCRoute \"ns/obj\" is invalid: unsupported GRPCRoute method match type \"RegularExpression\"".into())
    );
}

#[test]
fn gateway_routes_that_do_not_parse_are_admitted() {
    for (kind, spec) in [
        ("GRPCRoute", json!({"parentRefs": "not a list"})),
        // An enum value the original's types do not know.
        (
            "HTTPRoute",
            json!({"rules": [{"matches": [{"path": {"type": "Glob", "value": "a"}}]}]}),
        ),
        // TLSRoute and TCPRoute require `rules`.
        ("TCPRoute", json!({})),
    ] {
        let verdict = review("gateway.networking.k8s.io", kind, spec);
        assert_eq!(
            verdict,
            admission::Verdict {
                result: Ok(()),
                warnings: vec![]
            },
            "{kind}"
        );
    }
}

mod policies;
