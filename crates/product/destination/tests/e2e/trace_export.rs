//! `-trace-collector` on the `destination` process, as the chart passes
//! it: spans of service `linkerd-destination` reach a local OTLP receiver
//! for a `Get` (named as the original's) and for the index's initial
//! lists.

use std::time::Duration;

use linkerd2_proxy_api::destination::GetDestination;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use test_support::{
    TestEnv, free_addr,
    otlp::{Receiver, attribute},
};

use crate::common::{authority, client, http_service, start_destination_with};

/// Spans leave in batches every 5 s.
const EXPORTED: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_get_and_the_index_updates_are_exported_as_spans() {
    let env = TestEnv::new("trace-export").await;
    http_service(&env, "web").await;
    let (receiver, collector) = Receiver::start().await;
    let addr = free_addr();
    let _destination =
        start_destination_with(&env, addr, &[format!("-trace-collector={collector}")]).await;

    let mut client = client(addr).await;
    let mut updates = client
        .get(GetDestination {
            scheme: "k8s".into(),
            path: authority(&env, "web", 80),
            context_token: String::new(),
        })
        .await
        .expect("Get accepted")
        .into_inner();
    updates
        .message()
        .await
        .expect("stream healthy")
        .expect("a first update");

    let (service, span) = receiver
        .wait_for(
            "io.linkerd.proxy.destination.Destination.Get",
            EXPORTED,
            async || {},
        )
        .await;
    assert_eq!(service, "linkerd-destination");
    assert_eq!(
        attribute(&span, "rpc.method"),
        Some(Value::StringValue("Get".into()))
    );
    let (service, span) = receiver
        .wait_for("index.reset", EXPORTED, async || {})
        .await;
    assert_eq!(service, "linkerd-destination");
    assert!(attribute(&span, "kind").is_some(), "{span:?}");
}
