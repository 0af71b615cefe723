//! `-trace-collector` end to end on loopback: a gRPC server with
//! [`GrpcSpanLayer`] in a process whose subscriber exports spans
//! ([`LogArgs::init_with_spans`]) to a local OTLP receiver; one call, and
//! the receiver holds its span under the original's name and service.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use grpc_stream::spans::GrpcSpanLayer;
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update,
    destination_client::DestinationClient,
    destination_server::{Destination, DestinationServer},
};
use meridian_runtime::{LogArgs, LogFormat, span_export::SpanExport};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::any_value::Value,
    trace::v1::{Span, span::SpanKind},
};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

/// An OTLP/gRPC collector that keeps what it is sent.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.0
            .lock()
            .map_err(|_| Status::internal("poisoned"))?
            .push(request.into_inner());
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// Every span received, with its resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        let requests = self.0.lock().expect("receiver lock").clone();
        let mut spans = Vec::new();
        for request in requests {
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .and_then(|a| a.value.as_ref()?.value.clone());
                let service = match service {
                    Some(Value::StringValue(s)) => s,
                    _ => String::new(),
                };
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push((service.clone(), span));
                    }
                }
            }
        }
        spans
    }
}

/// A Destination server that knows nothing (every call: NotFound).
struct Nothing;

#[tonic::async_trait]
impl Destination for Nothing {
    type GetStream = futures::stream::Empty<Result<Update, Status>>;
    type GetProfileStream = futures::stream::Empty<Result<DestinationProfile, Status>>;

    async fn get(&self, _: Request<GetDestination>) -> Result<Response<Self::GetStream>, Status> {
        Err(Status::not_found("nothing here"))
    }

    async fn get_profile(
        &self,
        _: Request<GetDestination>,
    ) -> Result<Response<Self::GetProfileStream>, Status> {
        Err(Status::not_found("nothing here"))
    }
}

async fn loopback() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_exported_as_a_span_of_linkerd_destination() {
    let receiver = Receiver::default();
    let (listener, collector) = loopback().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    let export = SpanExport::start(&collector.to_string(), "linkerd-destination").expect("export");
    let log = LogArgs {
        log_level: "info".into(),
        log_format: LogFormat::Plain,
    };
    log.init_with_spans(Some(&export)).expect("subscriber");

    let (listener, server) = loopback().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(GrpcSpanLayer::new(true))
            .add_service(DestinationServer::new(Nothing))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let mut client = DestinationClient::connect(format!("http://{server}"))
        .await
        .expect("connect");
    let status = client
        .get(GetDestination {
            path: "web.default.svc.cluster.local:80".into(),
            ..Default::default()
        })
        .await
        .expect_err("the server knows nothing");
    assert_eq!(status.code(), tonic::Code::NotFound);

    let export = Arc::new(export);
    let mut found = None;
    for _ in 0..50 {
        let flushing = export.clone();
        tokio::task::spawn_blocking(move || flushing.flush())
            .await
            .expect("flush");
        found = receiver
            .spans()
            .into_iter()
            .find(|(_, s)| s.name == "io.linkerd.proxy.destination.Destination.Get");
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (service, span) = found.unwrap_or_else(|| {
        panic!(
            "no span of the call among {:?}",
            receiver
                .spans()
                .iter()
                .map(|(_, s)| &s.name)
                .collect::<Vec<_>>()
        )
    });
    assert_eq!(service, "linkerd-destination");
    assert_eq!(span.kind, SpanKind::Server as i32);
    let attribute = |key: &str| {
        span.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.clone())
    };
    assert_eq!(
        attribute("rpc.method"),
        Some(Value::StringValue("Get".into()))
    );
    assert_eq!(
        attribute("rpc.grpc.status_code"),
        Some(Value::IntValue(5)),
        "NotFound"
    );
    // Only the exported target's spans leave the process.
    assert!(
        receiver
            .spans()
            .iter()
            .all(|(_, s)| s.name.starts_with("io.linkerd")),
        "{:?}",
        receiver
            .spans()
            .iter()
            .map(|(_, s)| &s.name)
            .collect::<Vec<_>>()
    );
}
