//! A local OpenTelemetry collector for `-trace-collector` tests: an
//! OTLP/gRPC `TraceService` on loopback that keeps every span it is sent.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::any_value::Value,
    trace::v1::Span,
};
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

/// The spans received, each with its resource's `service.name`.
#[derive(Clone, Default)]
pub struct Receiver(Arc<Mutex<Vec<(String, Span)>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut spans = self.0.lock().map_err(|_| Status::internal("poisoned"))?;
        for resource in request.into_inner().resource_spans {
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
                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// Serves on 127.0.0.1 (a free port) until the runtime ends.
    pub async fn start() -> (Self, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the OTLP receiver");
        let addr = listener.local_addr().expect("local addr");
        let receiver = Self::default();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver.clone()))
                .serve_with_incoming(TcpIncoming::from(listener)),
        );
        (receiver, addr)
    }

    /// Every span received so far, with its service name.
    pub fn spans(&self) -> Vec<(String, Span)> {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The names of the spans received so far.
    pub fn names(&self) -> Vec<String> {
        self.spans().into_iter().map(|(_, s)| s.name).collect()
    }

    /// The first span named `name`, waiting up to `timeout` for it
    /// (calling `poke` between looks, e.g. to flush the exporter).
    pub async fn wait_for(
        &self,
        name: &str,
        timeout: Duration,
        mut poke: impl AsyncFnMut(),
    ) -> (String, Span) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self.spans().into_iter().find(|(_, s)| s.name == name) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no span {name:?} among {:?}",
                self.names()
            );
            poke().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The value of `span`'s attribute `key`.
pub fn attribute(span: &Span, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}
