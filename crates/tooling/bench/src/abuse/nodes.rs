//! The node-name probe: `Get` streams on the 500-endpoint Service, each
//! naming its own node in the context token (a node the cluster does not
//! have), then one endpoint change: what the streams cost in memory and
//! metric series, and what the change costs in server CPU and fan-out
//! time; beside the same streams all naming one node.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use linkerd2_proxy_api::destination::GetDestination;
use serde_json::json;
use tokio::sync::mpsc;

use super::{
    Probe, SETTLE,
    measure::{Answers, Reading},
};
use crate::{
    common::{CpuMark, wait_count},
    destination::{GET_PATH, NS, slice_endpoints, svc_name},
    ends, proxy_client,
    stats::ms,
};

/// Streams per connection, as a proxy spreads them.
const PER_CONNECTION: usize = 4;

/// Runs the probe with distinct node names, then with one.
pub async fn run(
    probe: &Probe<'_>,
    client: &kube::Client,
    addr: SocketAddr,
    pid: u32,
    streams: usize,
) -> anyhow::Result<()> {
    for (label, distinct) in [
        ("distinct unknown node names", true),
        ("one node name", false),
    ] {
        let name = format!(
            "{streams} Get streams on a 500-endpoint Service, {label}, then one endpoint change"
        );
        let before = probe.read().await;
        let started = Instant::now();
        let result = hold_and_change(probe, client, addr, pid, streams, distinct).await;
        let took = started.elapsed();
        tokio::time::sleep(SETTLE).await;
        let after = probe.read().await;
        match result {
            Ok((line, during)) => {
                probe.print(&name, took, &Answers::default(), &before, &during, &after);
                println!("    {line}");
            }
            Err(error) => println!("  {name}: failed: {error:#}"),
        }
    }
    Ok(())
}

/// Opens the streams, waits for their first answers, flips one endpoint's
/// readiness and times the update's arrival at every stream; the streams
/// are dropped at the end (teardown of the probe).
async fn hold_and_change(
    probe: &Probe<'_>,
    client: &kube::Client,
    addr: SocketAddr,
    pid: u32,
    streams: usize,
    distinct: bool,
) -> anyhow::Result<(String, Reading)> {
    ends::phase("node-name probe", false);
    let conns = proxy_client::connect(addr, streams.div_ceil(PER_CONNECTION)).await?;
    let (events, mut arrivals) = mpsc::unbounded_channel();
    let ready = Arc::new(AtomicUsize::new(0));
    let opened = Instant::now();
    for i in 0..streams {
        let node = if distinct {
            format!("no-such-node-{i}")
        } else {
            "no-such-node".to_string()
        };
        let frame = proxy_client::frame(&GetDestination {
            scheme: "k8s".into(),
            path: format!("{}.{NS}.svc.cluster.local:80", svc_name(0)),
            context_token: format!(r#"{{"ns":"{NS}","nodeName":"{node}"}}"#),
        });
        proxy_client::open(
            &conns[i / PER_CONNECTION],
            GET_PATH,
            frame,
            Some(i),
            &events,
            &ready,
        );
    }
    wait_count(&ready, streams).await?;
    let open_time = opened.elapsed();
    let during = probe.read().await;

    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let cpu = CpuMark::now(pid);
    let written = Instant::now();
    slices
        .patch(
            &svc_name(0),
            &PatchParams::default(),
            &Patch::Merge(json!({"endpoints": slice_endpoints(0, 500, Some(7))})),
        )
        .await?;
    let mut first: HashMap<usize, Instant> = HashMap::with_capacity(streams);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while first.len() < streams {
        match tokio::time::timeout_at(deadline, arrivals.recv()).await {
            Ok(Some((key, at))) => {
                first.entry(key).or_insert(at);
            }
            Ok(None) | Err(_) => break,
        }
    }
    let cpu = cpu.since().0;
    let mut times: Vec<Duration> = first.values().map(|at| *at - written).collect();
    times.sort();
    let last = times.last().copied().unwrap_or_default();
    let p50 = crate::stats::percentile(&times, 50.0);
    ends::phase("node-name probe teardown", true);
    drop(conns);
    // Put the endpoint back, unmeasured.
    slices
        .patch(
            &svc_name(0),
            &PatchParams::default(),
            &Patch::Merge(json!({"endpoints": slice_endpoints(0, 500, None)})),
        )
        .await?;
    let line = format!(
        "opened in {}; the change reached {}/{streams} streams, p50 {} last {}; server CPU for the change {:.1} ms",
        ms(open_time),
        first.len(),
        ms(p50),
        ms(last),
        cpu * 1e3,
    );
    Ok((line, during))
}
