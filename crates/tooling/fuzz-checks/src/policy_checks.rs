//! The policy controller's outside inputs: `PortSpec.workload` (inbound),
//! `TrafficSpec` (outbound: source workload, authority or address), and
//! the objects its admission webhook validates with the index's own
//! conversions.

use std::{
    net::IpAddr,
    num::NonZeroU16,
    sync::{Arc, LazyLock},
};

use admission::{AdmissionRequest, Validate, review::GroupVersionKind};
use arbitrary::{Arbitrary, Unstructured};
use linkerd2_proxy_api::{inbound::PortSpec, outbound::TrafficSpec};
use policy_controller::{
    core::{
        DiscoverOutboundPolicy, WorkloadKind,
        outbound::{OutboundPolicy, OutboundTarget, ServiceTarget},
    },
    grpc::{
        self, Workload,
        outbound::{OutboundPolicyServer, parse_authority},
    },
    index::ClusterInfo,
    metrics::GrpcMetrics,
    webhook::PolicyValidator,
};
use prost::Message;

/// `Workload::from_str` and the inbound `target()`: a parsed workload has a
/// non-empty namespace and name and reads back the same from its JSON (and
/// from `ns:pod` when the namespace allows it); a `PortSpec` is accepted
/// for a pod or an external workload and a port in 1..=65535, which it
/// keeps, and otherwise is an invalid argument.
pub fn workload(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let spec = if mode % 2 == 0 {
        match PortSpec::decode(rest) {
            Ok(spec) => spec,
            Err(_) => return,
        }
    } else {
        let mut u = Unstructured::new(rest);
        let port = u32::arbitrary(&mut u).unwrap_or(80);
        let Ok(workload) = String::arbitrary_take_rest(u) else {
            return;
        };
        PortSpec { workload, port }
    };
    let parsed = spec.workload.parse::<Workload>();
    if let Ok(workload) = &parsed {
        let (Workload::Pod { namespace, name } | Workload::External { namespace, name }) = workload;
        assert!(!namespace.is_empty() && !name.is_empty(), "{spec:?}");
        let key = match workload {
            Workload::Pod { .. } => "pod",
            Workload::External { .. } => "external_workload",
        };
        let json = serde_json::json!({"ns": namespace, key: name}).to_string();
        assert_eq!(json.parse::<Workload>().as_ref(), Ok(workload), "{json}");
        if matches!(workload, Workload::Pod { .. })
            && !namespace.contains(':')
            && !namespace.starts_with('{')
        {
            let legacy = format!("{namespace}:{name}");
            assert_eq!(
                legacy.parse::<Workload>().as_ref(),
                Ok(workload),
                "{legacy}"
            );
        }
    }
    match grpc::target(spec.clone()) {
        Ok(target) => {
            assert_eq!(u32::from(target.port.get()), spec.port, "{spec:?}");
            let (namespace, name) = (target.namespace, target.name);
            let expected = match target.kind {
                WorkloadKind::Pod => Workload::Pod { namespace, name },
                WorkloadKind::External => Workload::External { namespace, name },
            };
            assert_eq!(parsed, Ok(expected));
        }
        Err(status) => assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{spec:?}: {status:?}"
        ),
    }
}

/// Knows no address and no Service: what reaches it is what `target()`
/// let through.
struct NoCluster;

impl DiscoverOutboundPolicy for NoCluster {
    fn lookup_ip(
        &self,
        _addr: IpAddr,
        port: NonZeroU16,
        source_namespace: &str,
    ) -> Option<OutboundTarget> {
        assert!(!source_namespace.is_empty());
        assert_ne!(port.get(), 0);
        None
    }

    fn watch_outbound_policy(
        &self,
        _target: &ServiceTarget,
    ) -> tokio::sync::watch::Receiver<Arc<OutboundPolicy>> {
        unreachable!("target() resolves without a policy")
    }

    fn knows_service(&self, _namespace: &str, _name: &str) -> bool {
        false
    }
}

static OUTBOUND: LazyLock<OutboundPolicyServer<NoCluster>> = LazyLock::new(|| {
    let (_trigger, shutdown) = meridian_runtime::Shutdown::new();
    let metrics = GrpcMetrics::register(&mut prometheus_client::registry::Registry::default());
    OutboundPolicyServer::new(NoCluster, "cluster.local", false, shutdown, metrics)
});

/// A `TrafficSpec` as a client builds it (structure-aware mode).
#[derive(Arbitrary, Debug)]
struct Spec {
    source_workload: String,
    authority: Option<String>,
    ip: Option<(bool, u32, u64, u64)>,
    port: u32,
}

/// The outbound `target()`: from protobuf bytes or a structured spec. A
/// Service target has a non-empty name and namespace without dots, the
/// source workload's namespace and a non-zero port, and its
/// `<name>.<ns>.svc.cluster.local:<port>` parses to the same Service;
/// every refusal is `InvalidArgument` or `NotFound`.
pub fn outbound_target(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let spec = if mode % 2 == 0 {
        match TrafficSpec::decode(rest) {
            Ok(spec) => spec,
            Err(_) => return,
        }
    } else {
        let Ok(s) = Spec::arbitrary_take_rest(Unstructured::new(rest)) else {
            return;
        };
        use linkerd2_proxy_api::net::{self, ip_address::Ip};
        let target = match (s.authority, s.ip) {
            (Some(authority), _) => {
                Some(linkerd2_proxy_api::outbound::traffic_spec::Target::Authority(authority))
            }
            (None, Some((v4, a, first, last))) => {
                let ip = if v4 {
                    Ip::Ipv4(a)
                } else {
                    Ip::Ipv6(net::IPv6 { first, last })
                };
                Some(linkerd2_proxy_api::outbound::traffic_spec::Target::Addr(
                    net::TcpAddress {
                        ip: Some(net::IpAddress { ip: Some(ip) }),
                        port: s.port,
                    },
                ))
            }
            (None, None) => None,
        };
        TrafficSpec {
            source_workload: s.source_workload,
            target,
        }
    };
    match OUTBOUND.target(spec.clone()) {
        Ok((OutboundTarget::Service(target), source_namespace)) => {
            for label in [&target.name, &target.namespace] {
                assert!(
                    !label.is_empty() && !label.contains('.'),
                    "{spec:?}: {target:?}"
                );
            }
            assert!(!target.source_namespace.is_empty(), "{spec:?}");
            assert_eq!(source_namespace, target.source_namespace, "{spec:?}");
            let rendered = format!(
                "{}.{}.svc.cluster.local:{}",
                target.name, target.namespace, target.port
            );
            let reparsed = parse_authority(&rendered, "cluster.local")
                .unwrap_or_else(|e| panic!("{spec:?}: {rendered:?} refused: {e:?}"));
            assert_eq!(
                reparsed,
                (target.namespace.clone(), target.name.clone(), target.port),
                "{spec:?}"
            );
        }
        Ok((other, _)) => panic!("{spec:?}: NoCluster resolved nothing, got {other:?}"),
        Err(status) => assert!(
            matches!(
                status.code(),
                tonic::Code::InvalidArgument | tonic::Code::NotFound
            ),
            "{spec:?}: {status:?}"
        ),
    }
}

/// The kinds the webhook validates, as (group, kind).
const KINDS: &[(&str, &str)] = &[
    ("policy.linkerd.io", "Server"),
    ("policy.linkerd.io", "ServerAuthorization"),
    ("policy.linkerd.io", "AuthorizationPolicy"),
    ("policy.linkerd.io", "MeshTLSAuthentication"),
    ("policy.linkerd.io", "NetworkAuthentication"),
    ("policy.linkerd.io", "HTTPRoute"),
    ("gateway.networking.k8s.io", "HTTPRoute"),
    ("gateway.networking.k8s.io", "GRPCRoute"),
    ("gateway.networking.k8s.io", "TLSRoute"),
    ("gateway.networking.k8s.io", "TCPRoute"),
];

static POLICY: LazyLock<PolicyValidator> =
    LazyLock::new(|| PolicyValidator::new(ClusterInfo::default()));

/// The policy webhook's review of arbitrary JSON as each kind (the first
/// byte picks the kind): it never panics, answers the same twice, and a
/// denial names the kind and says why.
pub fn policy_webhook(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(object) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    let (group, kind) = KINDS[usize::from(pick) % KINDS.len()];
    let request = AdmissionRequest {
        uid: "fuzz".into(),
        kind: GroupVersionKind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        },
        namespace: Some("ns".into()),
        operation: "CREATE".into(),
        object: Some(object),
        ..Default::default()
    };
    let verdict = POLICY.review(&request);
    assert_eq!(POLICY.review(&request), verdict, "not deterministic");
    if let Err(message) = &verdict.result {
        assert!(
            message.starts_with(&format!("{kind} \"ns/")) && message.len() > kind.len() + 8,
            "{message}"
        );
    }
}
