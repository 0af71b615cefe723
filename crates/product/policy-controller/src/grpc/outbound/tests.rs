//! Request validation, status codes and streams of the outbound service.

use std::net::SocketAddr;

use tokio::sync::watch;

use super::*;
use crate::core::outbound::{AppProtocol, OutboundPolicy, RouteTimeouts};

struct Fixed(watch::Receiver<Arc<OutboundPolicy>>);

fn policy(app_protocol: Option<AppProtocol>) -> Arc<OutboundPolicy> {
    Arc::new(OutboundPolicy {
        namespace: "ns".into(),
        name: "web".into(),
        port: NonZeroU16::new(80).expect("port"),
        authority: "web.ns.svc.cluster.local:80".into(),
        app_protocol,
        accrual: None,
        load_biaser: None,
        honor_retry_after: false,
        http_retry: None,
        grpc_retry: None,
        timeouts: RouteTimeouts::default(),
        http_routes: Default::default(),
        grpc_routes: Default::default(),
        tls_routes: Default::default(),
        tcp_routes: Default::default(),
    })
}

impl DiscoverOutboundPolicy for Fixed {
    fn lookup_ip(&self, addr: IpAddr, port: NonZeroU16, source: &str) -> Option<OutboundTarget> {
        match addr.to_string().as_str() {
            "10.0.0.1" if port.get() == 80 => Some(OutboundTarget::Service(ServiceTarget {
                namespace: "ns".into(),
                name: "web".into(),
                port,
                source_namespace: source.into(),
            })),
            "10.0.0.1" => Some(OutboundTarget::UndefinedPort {
                namespace: "ns".into(),
                name: "web".into(),
                port,
            }),
            "192.0.2.1" => Some(OutboundTarget::Egress(SocketAddr::new(addr, port.get()))),
            _ => None,
        }
    }

    fn watch_outbound_policy(
        &self,
        target: &ServiceTarget,
    ) -> watch::Receiver<Arc<OutboundPolicy>> {
        if self.knows_service(&target.namespace, &target.name) {
            self.0.clone()
        } else {
            // A Service this discovery does not know: its default policy.
            let mut default = (*policy(None)).clone();
            default.namespace.clone_from(&target.namespace);
            default.name.clone_from(&target.name);
            default.port = target.port;
            watch::Sender::new(Arc::new(default)).subscribe()
        }
    }

    fn knows_service(&self, namespace: &str, name: &str) -> bool {
        (namespace, name) == ("ns", "web")
    }
}

fn addr(ip: &str, port: u32) -> Option<traffic_spec::Target> {
    let ip: IpAddr = ip.parse().expect("ip");
    Some(traffic_spec::Target::Addr(
        linkerd2_proxy_api::net::TcpAddress {
            ip: Some(ip.into()),
            port,
        },
    ))
}

fn authority(a: &str) -> Option<traffic_spec::Target> {
    Some(traffic_spec::Target::Authority(a.into()))
}

fn spec(target: Option<traffic_spec::Target>) -> tonic::Request<proto::TrafficSpec> {
    tonic::Request::new(proto::TrafficSpec {
        source_workload: "client:pod".into(),
        target,
    })
}

fn server(
    rx: watch::Receiver<Arc<OutboundPolicy>>,
    shutdown: Shutdown,
) -> OutboundPolicyServer<Fixed> {
    OutboundPolicyServer::new(
        Fixed(rx),
        "cluster.local",
        false,
        shutdown,
        GrpcMetrics::default(),
    )
}

fn meta_name(p: &proto::OutboundPolicy) -> String {
    use linkerd2_proxy_api::meta::metadata::Kind;
    match p.metadata.clone().and_then(|m| m.kind) {
        Some(Kind::Default(name)) => name,
        Some(Kind::Resource(r)) => format!("{}/{}:{}", r.namespace, r.name, r.port),
        None => String::new(),
    }
}

#[test]
fn authorities_as_the_original() {
    let ok = |a: &str| {
        parse_authority(a, "cluster.local")
            .map(|(ns, n, p)| (ns, n, p.get()))
            .map_err(|s| s.code())
    };
    let want = |p| Ok(("ns".to_string(), "web".to_string(), p));
    assert_eq!(ok("web.ns.svc.cluster.local:8080"), want(8080));
    assert_eq!(ok("web.ns.svc.cluster.local."), want(80));
    // `linkerd diagnostics policy` leaves out the cluster domain.
    assert_eq!(ok("web.ns.svc:8080"), want(8080));
    for other in [
        "example.com",
        "web.ns",
        "web.ns.pod.cluster.local",
        "web.ns.svc.other.domain",
    ] {
        assert_eq!(ok(other), Err(tonic::Code::NotFound), "{other}");
    }
    for bad in ["web.ns.svc:0", "web ns", ":80"] {
        assert_eq!(ok(bad), Err(tonic::Code::InvalidArgument), "{bad}");
    }
}

#[tokio::test]
async fn status_codes_answers_and_watch_updates() {
    let (tx, rx) = watch::channel(policy(None));
    let (_trigger, shutdown) = Shutdown::new();
    let svc = server(rx, shutdown);
    let code = |r: Result<tonic::Response<proto::OutboundPolicy>, tonic::Status>| {
        r.map(|_| ())
            .map_err(|s| (s.code(), s.message().to_string()))
    };
    assert_eq!(
        code(svc.get(spec(None)).await),
        Err((tonic::Code::InvalidArgument, "target is required".into()))
    );
    assert_eq!(
        code(svc.get(spec(addr("10.0.0.1", 0))).await),
        Err((tonic::Code::InvalidArgument, "port cannot be zero".into()))
    );
    assert_eq!(
        code(svc.get(spec(addr("10.0.0.1", 70000))).await),
        Err((
            tonic::Code::InvalidArgument,
            "port outside valid range".into()
        ))
    );
    let mut bad_workload = spec(addr("10.0.0.1", 80));
    bad_workload.get_mut().source_workload = "nope".into();
    assert_eq!(
        code(svc.get(bad_workload).await).map_err(|e| e.0),
        Err(tonic::Code::InvalidArgument)
    );
    assert_eq!(
        code(svc.get(spec(addr("10.9.9.9", 80))).await),
        Err((tonic::Code::NotFound, "No such service".into()))
    );
    let get = |t| async { svc.get(spec(t)).await.expect("ok").into_inner() };
    // A Service that does not exist (yet) has its default policy, as the
    // original's: a proxy that asked too early is not told `NotFound`.
    assert_eq!(
        meta_name(&get(authority("gone.ns.svc.cluster.local:8080")).await),
        "ns/gone:8080"
    );
    assert_eq!(meta_name(&get(addr("10.0.0.1", 80)).await), "ns/web:80");
    assert_eq!(
        meta_name(&get(authority("web.ns.svc:80")).await),
        "ns/web:80"
    );
    assert_eq!(meta_name(&get(addr("10.0.0.1", 81)).await), "ns/web:81");
    assert_eq!(
        meta_name(&get(addr("192.0.2.1", 443)).await),
        "egress-fallback"
    );

    let mut stream = OutboundPolicies::watch(&svc, spec(authority("web.ns.svc.cluster.local")))
        .await
        .expect("ok")
        .into_inner();
    let first = stream.next().await.expect("first").expect("ok");
    assert!(matches!(
        first.protocol.and_then(|p| p.kind),
        Some(proto::proxy_protocol::Kind::Detect(_))
    ));
    tx.send_replace(policy(Some(AppProtocol::Opaque)));
    let second = stream.next().await.expect("second").expect("ok");
    assert!(matches!(
        second.protocol.and_then(|p| p.kind),
        Some(proto::proxy_protocol::Kind::Opaque(_))
    ));
}

#[tokio::test]
async fn fixed_answer_streams_stay_open_until_shutdown() {
    let (_tx, rx) = watch::channel(policy(None));
    let (trigger, shutdown) = Shutdown::new();
    let svc = server(rx, shutdown);
    let mut egress = OutboundPolicies::watch(&svc, spec(addr("192.0.2.1", 443)))
        .await
        .expect("ok")
        .into_inner();
    assert_eq!(
        meta_name(&egress.next().await.expect("one").expect("ok")),
        "egress-fallback"
    );
    let pending = tokio::time::timeout(std::time::Duration::from_millis(50), egress.next()).await;
    assert!(pending.is_err(), "no second message");
    trigger.trigger();
    assert!(egress.next().await.is_none(), "ends on shutdown");
}
