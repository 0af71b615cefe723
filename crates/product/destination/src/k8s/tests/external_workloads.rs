//! Tests of ExternalWorkload-backed endpoints: the slice entries naming a
//! workload, and the `WeightedAddr` each becomes.

use std::collections::BTreeMap;
use std::sync::Arc;

use linkerd2_proxy_api::destination::{ProtocolHint, TlsIdentity, protocol_hint, tls_identity};
use linkerd2_proxy_api::net::TcpAddress;
use serde_json::json;

use super::{addr, cfg, h2_hint, hint, labels, only};
use crate::core::endpoint::*;
use crate::k8s::endpoints::*;
use crate::k8s::fixtures::*;
use crate::proto::weighted_addr::*;

fn translate_external(ew: k8s_api::workload::ExternalWorkload, port: u16) -> EndpointMap {
    let mut cache = Cache::new([]);
    cache.external_workloads.push(Arc::new(ew));
    cache.translate(
        None,
        port,
        &[slice(
            "IPv4",
            json!([{"port": port}]),
            json!([
                external_ep("192.0.2.10", "vm", "z1"),
                external_ep("192.0.2.11", "gone", "z1")
            ]),
        )],
    )
}

#[test]
fn external_workload_weighted_addr() {
    let ew = external_workload(
        "vm",
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fleet", "uid": "u"}]}}),
    );
    let set = translate_external(ew, 8080);
    // The workload the cache lacks is skipped.
    let ep = only(&set);
    assert_eq!(
        ep.id,
        AddressId::ExternalWorkload {
            namespace: "ns".into(),
            name: "vm".into(),
            family: AddressFamily::V4
        }
    );
    // H2 is hinted even without --enable-h2-upgrade: workloads are always meshed.
    let mut cfg = cfg();
    cfg.enable_h2_upgrade = false;
    cfg.meshed_http2_client_params = Some(crate::config::Http2Params::default());
    let wa = weighted_addr(ep, &cfg, Some("z1")).expect("translates");
    assert_eq!(wa.addr, Some(TcpAddress::from(addr("192.0.2.10", 8080))));
    assert_eq!(wa.weight, DEFAULT_WEIGHT);
    assert_eq!(
        labels(&wa),
        BTreeMap::from([
            ("external_workload", "vm"),
            ("deployment", "fleet"),
            ("zone", "z1"),
            ("zone_locality", "local"),
        ])
    );
    assert_eq!(hint(&wa), h2_hint());
    assert_eq!(
        wa.tls_identity,
        Some(TlsIdentity {
            strategy: Some(tls_identity::Strategy::UriLikeIdentity(
                tls_identity::UriLikeIdentity {
                    uri: "spiffe://root.linkerd.cluster.local/vm".into()
                }
            )),
            server_name: Some(tls_identity::DnsLikeIdentity {
                name: "vm.ns.cluster.local".into()
            }),
        })
    );
    assert!(wa.http2.is_some(), "meshed HTTP/2 parameters");
    assert_eq!(wa.authority_override, None);
}

#[test]
fn external_workload_opacity_and_opaque_transport() {
    // Opaque by annotation (by port name): Opaque hint, opaque transport to
    // the workload's linkerd-proxy port.
    let ew = external_workload(
        "vm",
        json!({
            "metadata": {"annotations": {"config.linkerd.io/opaque-ports": "http"}},
            "spec": {"ports": [{"name": "http", "port": 8080}, {"name": "linkerd-proxy", "port": 4200}]}
        }),
    );
    let set = translate_external(ew, 8080);
    let h = hint(&weighted_addr(only(&set), &cfg(), None).expect("ok"));
    assert_eq!(
        h,
        ProtocolHint {
            protocol: Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {})),
            opaque_transport: Some(protocol_hint::OpaqueTransport { inbound_port: 4200 }),
        }
    );

    // Not opaque, but transport-header mode: H2 with opaque transport to 4143.
    let mut header = cfg();
    header.outbound_transport_mode = crate::config::OutboundTransportMode::TransportHeader;
    let set = translate_external(external_workload("vm", json!({})), 8080);
    let h = hint(&weighted_addr(only(&set), &header, None).expect("ok"));
    assert_eq!(
        h,
        ProtocolHint {
            protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
            opaque_transport: Some(protocol_hint::OpaqueTransport { inbound_port: 4143 }),
        }
    );

    // Default opaque ports apply to a workload without the annotation, and a
    // Server makes a port opaque.
    let mut defaults = cfg();
    defaults.default_opaque_ports = k8s_api::ports::PortRanges::parse("3306");
    let set = translate_external(external_workload("vm", json!({})), 3306);
    let h = hint(&weighted_addr(only(&set), &defaults, None).expect("ok"));
    assert_eq!(
        h.protocol,
        Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {}))
    );
    let mut cache = Cache::new([]);
    cache
        .external_workloads
        .push(Arc::new(external_workload("vm", json!({}))));
    cache.opaque_by_server = Some(8080);
    let set = cache.translate(
        None,
        8080,
        &[slice(
            "IPv4",
            json!([{"port": 8080}]),
            json!([external_ep("192.0.2.10", "vm", "")]),
        )],
    );
    assert!(only(&set).opaque_by_server);
    let h = hint(&weighted_addr(only(&set), &cfg(), None).expect("ok"));
    assert_eq!(
        h.protocol,
        Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {}))
    );
}

#[test]
fn external_workload_without_owner_has_no_owner_label() {
    let set = translate_external(external_workload("vm", json!({})), 8080);
    let wa = weighted_addr(only(&set), &cfg(), None).expect("ok");
    let mut keys: Vec<_> = wa.metric_labels.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["external_workload", "zone", "zone_locality"]);
}

#[test]
fn slices_name_their_pods_and_external_workloads() {
    let s = slice(
        "IPv4",
        json!([{"port": 80}]),
        json!([pod_ep("10.0.0.1", "p1", ""), external_ep("192.0.2.10", "vm", ""), {"addresses": ["10.0.0.9"]}]),
    );
    let mut refs: Vec<_> = slice_workloads(&crate::k8s::slices::slice_facts(&s))
        .into_iter()
        .collect();
    refs.sort();
    assert_eq!(
        refs,
        [
            WorkloadRef::Pod("ns".into(), "p1".into()),
            WorkloadRef::External("ns".into(), "vm".into())
        ]
    );
}
