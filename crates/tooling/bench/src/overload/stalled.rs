//! Part 1: fan-out to many streams with no, one and many stalled clients.

use super::*;

pub(super) async fn stalled_rounds(
    args: &Args,
    client: &kube::Client,
    plan: &Plan,
    grpc: SocketAddr,
) -> anyhow::Result<usize> {
    let conns = proxy_client::connect(grpc, args.connections.max(1)).await?;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    let frame = request_frame(HOT);
    for i in 0..args.streams {
        let conn = &conns[i % conns.len()];
        proxy_client::open(conn, GET, frame.clone(), Some(HOT), &events_tx, &ready);
    }
    wait_count(&ready, args.streams).await?;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (observer, mut seen_rx) = observe_versions(slices.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut stalled = Vec::new();
    let mut rounds = Vec::new();
    let mut not_ready: Option<usize> = None;
    let mut k = 0usize;
    for want in [0, 1, args.many_stalled.max(2)] {
        while stalled.len() < want {
            stalled.push(stalled_client(grpc).await?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        while events_rx.try_recv().is_ok() {}
        while seen_rx.try_recv().is_ok() {}
        let mut fan_out = FanOut::default();
        for _ in 0..args.changes {
            let size = plan.sizes[HOT];
            not_ready = match not_ready {
                Some(_) => None,
                None => Some(k % size.max(1)),
            };
            let patch = json!({ "endpoints": slice_endpoints(HOT, size, not_ready) });
            let t0 = Instant::now();
            let patched = slices
                .patch(
                    &svc_name(HOT),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            let rv = patched.metadata.resource_version.unwrap_or_default();
            fan_out
                .record(k, t0, &rv, HOT, args.streams, &mut events_rx, &mut seen_rx)
                .await?;
            k += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        rounds.push((want, fan_out));
    }
    observer.abort();
    println!(
        "  fan-out of an endpoint change to {} Get streams of one Service ({} endpoints), {} changes per round;",
        args.streams, args.hot_endpoints, args.changes
    );
    println!(
        "  stalled clients: own connection, a Get on the same Service, 1 KiB stream window, never read:"
    );
    println!(
        "    {:>8}  {:>33}  {:>33}",
        "stalled", "from the write: p50 / p90 / p99", "from watchers: p50 / p90 / p99"
    );
    let three = |d: &[Duration]| {
        format!(
            "{} / {} / {}",
            ms(percentile(d, 50.0)),
            ms(percentile(d, 90.0)),
            ms(percentile(d, 99.0))
        )
    };
    for (stalled, fan_out) in &rounds {
        println!(
            "    {:>8}  {:>33}  {:>33}",
            stalled,
            three(fan_out.since_write()),
            three(fan_out.since_watch()),
        );
    }
    println!(
        "    (from watchers: from our own watch seeing the write, Meridian's share; the stalled clients' connections stay open through the later rounds)"
    );
    let missed: usize = rounds.iter().map(|(_, fan_out)| fan_out.missed()).sum();
    println!(
        "    missed updates (an open stream without the update within 30 s): {missed}{}",
        if missed > 0 {
            " — UPDATES MISSED"
        } else {
            ""
        }
    );
    // Disposable connections: their clean close is expected.
    drop(stalled);
    Ok(missed)
}

/// A client whose one `Get` on the hot Service is never read: 1 KiB
/// stream window, the protocol's 64 KiB connection window, so both fill
/// with the first snapshot. Dropping it closes its connection.
pub(super) async fn stalled_client(
    grpc: SocketAddr,
) -> anyhow::Result<(proxy_client::Conn, hyper::body::Incoming)> {
    let conn = proxy_client::connect_with_windows(grpc, 1024, 65_535).await?;
    let body = proxy_client::call(&conn, GET, request_frame(HOT)).await?;
    Ok((conn, body))
}

// ---------------------------------------------------------------------------
// Part 2: stream floods.
