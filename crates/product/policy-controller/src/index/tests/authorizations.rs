//! ServerAuthorizations and AuthorizationPolicies with their
//! MeshTLS and Network authentications.

use super::*;

#[test]
fn server_authorizations_by_name_and_by_server_labels() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server_with_labels(
        "srv",
        0,
        json!({"tier": "front"}),
        json!({"podSelector": {}, "port": 80}),
    ));
    changed(&mut rx);

    index.apply(saz(
        "by-name",
        json!({"server": {"name": "srv"}, "client": {"unauthenticated": true}}),
    ));
    index.apply(saz(
        "by-labels",
        json!({"server": {"selector": {"matchLabels": {"tier": "front"}}},
               "client": {"networks": [{"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}],
                          "meshTLS": {"identities": ["*.other.serviceaccount.identity.linkerd.cluster.local"],
                                      "serviceAccounts": [{"name": "api"}, {"name": "ui", "namespace": "front"}]}}}),
    ));
    index.apply(saz(
        "tls",
        json!({"server": {"name": "srv"}, "client": {"meshTLS": {"unauthenticatedTLS": true}}}),
    ));
    index.apply(saz(
        "other-server",
        json!({"server": {"name": "nope"}, "client": {"unauthenticated": true}}),
    ));
    index.apply(saz(
        "no-clients",
        json!({"server": {"name": "srv"}, "client": {"meshTLS": {}}}),
    ));

    let expected: Authorizations = [
        (
            AuthorizationRef::ServerAuthorization("by-name".into()),
            ClientAuthorization {
                networks: vec![],
                authentication: ClientAuthentication::Unauthenticated,
            },
        ),
        (
            AuthorizationRef::ServerAuthorization("by-labels".into()),
            ClientAuthorization {
                networks: vec![
                    NetworkMatch::parse("192.168.0.0/16", ["192.168.1.0/24"]).expect("net"),
                ],
                authentication: ClientAuthentication::TlsAuthenticated(vec![
                    IdentityMatch::from("*.other.serviceaccount.identity.linkerd.cluster.local"),
                    IdentityMatch::from("api.ns.serviceaccount.identity.linkerd.cluster.local"),
                    IdentityMatch::from("ui.front.serviceaccount.identity.linkerd.cluster.local"),
                ]),
            },
        ),
        (
            AuthorizationRef::ServerAuthorization("tls".into()),
            ClientAuthorization {
                networks: vec![],
                authentication: ClientAuthentication::TlsUnauthenticated,
            },
        ),
    ]
    .into();
    let got = rx.borrow_and_update().as_ref().clone();
    assert_eq!(got, named_server("srv", detect(), expected));
}

// === AuthorizationPolicies and authentications ===

fn ap_authz(rx: &watch::Receiver<Arc<InboundServer>>, name: &str) -> Option<ClientAuthorization> {
    rx.borrow()
        .authorizations
        .get(&AuthorizationRef::AuthorizationPolicy(name.into()))
        .cloned()
}

#[test]
fn policy_with_mesh_tls_waits_for_its_authentication() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", None)]),
    ));
    unchanged(&rx);
    assert_eq!(ap_authz(&rx, "ap"), None, "missing referent: ignored");

    index.apply(mesh_tls(
        NS,
        "ids",
        json!({
            "identities": ["web.ns.serviceaccount.identity.linkerd.cluster.local", "*"],
            "identityRefs": [
                {"kind": "ServiceAccount", "name": "api"},
                {"kind": "ServiceAccount", "name": "ui", "namespace": "front"},
                {"kind": "Namespace", "name": "trusted"}
            ]
        }),
    ));
    let got = changed(&mut rx);
    assert_eq!(
        got,
        named_server(
            "srv",
            detect(),
            [(
                AuthorizationRef::AuthorizationPolicy("ap".into()),
                ClientAuthorization {
                    networks: NetworkMatch::all(),
                    authentication: ClientAuthentication::TlsAuthenticated(vec![
                        IdentityMatch::from("web.ns.serviceaccount.identity.linkerd.cluster.local"),
                        IdentityMatch::Suffix(vec![]),
                        IdentityMatch::from("api.ns.serviceaccount.identity.linkerd.cluster.local"),
                        IdentityMatch::from(
                            "ui.front.serviceaccount.identity.linkerd.cluster.local"
                        ),
                        IdentityMatch::from(
                            "*.trusted.serviceaccount.identity.linkerd.cluster.local"
                        ),
                    ]),
                },
            )]
            .into()
        )
    );

    k8s_index::Index::<MeshTLSAuthentication>::delete(&mut index, key("ids"));
    assert!(changed(&mut rx).authorizations.is_empty());
}

#[test]
fn authentications_may_live_in_other_namespaces() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", Some("shared")),
               {"group": "policy.linkerd.io", "kind": "NetworkAuthentication", "name": "nets", "namespace": "shared"}]),
    ));
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a.b"]})));
    unchanged(&rx);
    index.apply(network(
        "shared",
        "nets",
        json!({"networks": [{"cidr": "10.1.0.0/16", "except": ["10.1.1.1"]}]}),
    ));
    changed(&mut rx);
    assert_eq!(
        ap_authz(&rx, "ap"),
        Some(ClientAuthorization {
            networks: vec![NetworkMatch::parse("10.1.0.0/16", ["10.1.1.1/32"]).expect("net")],
            authentication: ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from(
                "a.b"
            )]),
        })
    );
}

#[test]
fn service_account_refs_namespace_targets_and_empty_refs() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "sa",
        server_target("srv"),
        json!([{"kind": "ServiceAccount", "name": "client"}]),
    ));
    index.apply(policy(
        "everyone",
        json!({"kind": "Namespace", "name": NS}),
        json!([]),
    ));
    index.apply(policy("other", server_target("not-srv"), json!([])));
    changed(&mut rx);
    assert_eq!(
        ap_authz(&rx, "sa"),
        Some(ClientAuthorization {
            networks: NetworkMatch::all(),
            authentication: ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from(
                "client.ns.serviceaccount.identity.linkerd.cluster.local"
            )]),
        })
    );
    assert_eq!(
        ap_authz(&rx, "everyone"),
        Some(ClientAuthorization::allow_all())
    );
    assert_eq!(ap_authz(&rx, "other"), None);
}

#[test]
fn policies_with_two_identity_or_network_sources_are_ignored() {
    let (mut index, mut rx) = with_server();
    index.apply(mesh_tls(NS, "a", json!({"identities": ["a"]})));
    index.apply(mesh_tls(NS, "b", json!({"identities": ["b"]})));
    index.apply(network(
        NS,
        "n1",
        json!({"networks": [{"cidr": "10.0.0.0/8"}]}),
    ));
    index.apply(network(
        NS,
        "n2",
        json!({"networks": [{"cidr": "10.0.0.0/8"}]}),
    ));
    let net_ref =
        |n: &str| json!({"group": "policy.linkerd.io", "kind": "NetworkAuthentication", "name": n});
    index.apply(policy(
        "two-mtls",
        server_target("srv"),
        json!([mtls_ref("a", None), mtls_ref("b", None)]),
    ));
    index.apply(policy(
        "mtls-and-sa",
        server_target("srv"),
        json!([mtls_ref("a", None), {"kind": "ServiceAccount", "name": "x"}]),
    ));
    index.apply(policy(
        "two-nets",
        server_target("srv"),
        json!([net_ref("n1"), net_ref("n2")]),
    ));
    index.apply(policy(
        "bad-target",
        json!({"kind": "Pod", "name": "x"}),
        json!([]),
    ));
    index.apply(policy(
        "ok",
        server_target("srv"),
        json!([mtls_ref("a", None), net_ref("n1")]),
    ));
    let got = changed(&mut rx);
    assert_eq!(
        got.authorizations.keys().cloned().collect::<Vec<_>>(),
        [AuthorizationRef::AuthorizationPolicy("ok".into())]
    );
}

#[test]
fn authentication_changes_reach_every_namespace_and_unchanged_ones_do_not_publish() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", Some("shared"))]),
    ));
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a"]})));
    changed(&mut rx);
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a"]})));
    unchanged(&rx);
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["b"]})));
    assert_eq!(
        changed(&mut rx).authorizations[&AuthorizationRef::AuthorizationPolicy("ap".into())]
            .authentication,
        ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from("b")])
    );
    // An invalid authentication counts as missing.
    index.apply(mesh_tls("shared", "ids", json!({})));
    assert!(changed(&mut rx).authorizations.is_empty());
}
