//! The introspection probe: `Get` streams opened while loops call the
//! destination's `/audit` (on its localhost introspection listener) over
//! and over, beside the same opens without them: whether a consistency
//! audit that anyone on the listener can start slows the proxies down.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use linkerd2_proxy_api::destination::GetDestination;

use super::measure::Answers;
use crate::{
    destination::{GET_PATH, NS, svc_name},
    ends, proxy_client,
};

/// Streams per connection, as a proxy spreads them.
const PER_CONNECTION: usize = 4;

/// Opens `streams` `Get` streams on the small Service, `PER_CONNECTION` per
/// connection, each timed from its call to its first message, while
/// `loops` tasks call `/audit` on `introspection`; returns the opens'
/// answers and a line on the audits.
pub async fn opens_beside_audits(
    grpc: SocketAddr,
    introspection: SocketAddr,
    streams: usize,
    loops: usize,
) -> anyhow::Result<(Answers, String)> {
    let stop = Arc::new(AtomicBool::new(false));
    let audits = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let mut auditors = Vec::with_capacity(loops);
    for _ in 0..loops {
        let (stop, audits, failed) = (stop.clone(), audits.clone(), failed.clone());
        auditors.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match local_cluster::probe::http_get(introspection, "/audit").await {
                    Ok((200, _)) => audits.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    ends::phase("audit probe", false);
    let conns = proxy_client::connect(grpc, streams.div_ceil(PER_CONNECTION)).await?;
    let frame = proxy_client::frame(&GetDestination {
        scheme: "k8s".into(),
        path: format!("{}.{NS}.svc.cluster.local:80", svc_name(1)),
        context_token: format!(r#"{{"ns":"{NS}","nodeName":"node-1"}}"#),
    });
    let started = Instant::now();
    let mut opens = Vec::with_capacity(streams);
    for i in 0..streams {
        let conn = conns[i / PER_CONNECTION].clone();
        let frame = frame.clone();
        opens.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let opened = async {
                let mut body = proxy_client::call(&conn, GET_PATH, frame).await?;
                proxy_client::first_message(&mut body).await?;
                anyhow::Ok(body)
            };
            match tokio::time::timeout(Duration::from_secs(30), opened).await {
                Ok(Ok(body)) => ("OK".to_string(), t0.elapsed(), Some(body)),
                Ok(Err(error)) => (proxy_client::call_failure(&error), t0.elapsed(), None),
                Err(_) => ("no first message within 30 s".into(), t0.elapsed(), None),
            }
        }));
    }
    let mut answers = Answers::default();
    let mut held = Vec::with_capacity(streams);
    for open in opens {
        let (code, latency, body) = open.await?;
        answers.record(&code, latency);
        held.extend(body);
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for auditor in auditors {
        let _ = auditor.await;
    }
    ends::phase("audit probe teardown", true);
    drop(held);
    drop(conns);
    let line = format!(
        "{streams} opens in {:.1} s beside {loops} /audit loops: {} audits answered, {} failed",
        took.as_secs_f64(),
        audits.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    Ok((answers, line))
}
