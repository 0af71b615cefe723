//! `-trace-collector` end to end on loopback: a gRPC server with
//! [`GrpcSpanLayer`] in a process whose subscriber exports spans
//! ([`LogArgs::init_with_spans`]) to a local OTLP receiver; one call, and
//! the receiver holds its span under the original's name and service.

use std::{sync::Arc, time::Duration};

use grpc_stream::spans::GrpcSpanLayer;
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update,
    destination_client::DestinationClient,
    destination_server::{Destination, DestinationServer},
};
use meridian_runtime::{LogArgs, LogDialect, LogFormat, span_export::SpanExport};
use opentelemetry_proto::tonic::{common::v1::any_value::Value, trace::v1::span::SpanKind};
use test_support::otlp::{Receiver, attribute};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

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
    let (receiver, collector) = Receiver::start().await;
    let export = SpanExport::start(&collector.to_string(), "linkerd-destination").expect("export");
    let log = LogArgs {
        log_level: "info".into(),
        log_format: LogFormat::Plain,
    };
    log.init_with_spans(LogDialect::Go, Some(&export))
        .expect("subscriber");

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
    let flush = async || {
        let export = export.clone();
        tokio::task::spawn_blocking(move || export.flush())
            .await
            .expect("flush");
    };
    let (service, span) = receiver
        .wait_for(
            "io.linkerd.proxy.destination.Destination.Get",
            Duration::from_secs(5),
            flush,
        )
        .await;
    assert_eq!(service, "linkerd-destination");
    assert_eq!(span.kind, SpanKind::Server as i32);
    assert_eq!(
        attribute(&span, "rpc.method"),
        Some(Value::StringValue("Get".into()))
    );
    assert_eq!(
        attribute(&span, "rpc.grpc.status_code"),
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
