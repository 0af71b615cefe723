//! Part 2: one connection opening streams until refused.

use super::*;

pub(super) fn reason_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0xb => "ENHANCE_YOUR_CALM",
        _ => "other",
    }
}

pub(super) async fn flood<F, Fut>(
    args: &Args,
    server: &Proc,
    grpc: SocketAddr,
    path: &str,
    body: &[u8],
    fresh: F,
) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let fresh_before = fresh_median(20, &fresh).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (tasks_before, _) = metrics_of(server).await;
    let rss_before = rss_bytes(server.pid).context("RSS")?;

    let (mut abuser, mut events) = RawH2::connect(grpc).await?;
    let mut advertised = None;
    while advertised.is_none() {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::Settings(settings))) => {
                advertised = Some(raw_h2::setting(
                    &settings,
                    raw_h2::SETTINGS_MAX_CONCURRENT_STREAMS,
                ));
            }
            Ok(Some(_)) => {}
            _ => bail!("{}: no SETTINGS from the server", server.name),
        }
    }
    let advertised = advertised.flatten();
    // Up to 10 past the advertised limit (refused streams count toward
    // h2's limit on the resets a server sends, see below).
    let target = advertised
        .map_or(args.flood_max, |limit| limit as usize + 10)
        .min(args.flood_max);
    let (mut answered, mut refused) = (BTreeSet::new(), BTreeSet::<u32>::new());
    // Streams answered with an error at once (trailers-only): not held.
    let mut ended = 0usize;
    let mut first_refusal = None;
    let mut goaway = None;
    let mut opened = 0usize;
    let started = Instant::now();
    let authority = grpc.to_string();
    'flood: while refused.is_empty() && goaway.is_none() && opened < target {
        for _ in 0..500.min(target - opened) {
            abuser.open_grpc(&authority, path, body).await?;
            opened += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered.len() + refused.len() < opened {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, events.recv()).await {
                Ok(Some(Event::Headers { stream, end_stream })) => {
                    if answered.insert(stream) && end_stream {
                        ended += 1;
                    }
                }
                Ok(Some(Event::Reset { stream, code })) => {
                    // The request DATA sent on a refused stream gets STREAM_CLOSED.
                    if code == raw_h2::REFUSED_STREAM || !answered.contains(&stream) {
                        first_refusal.get_or_insert((stream, code));
                        refused.insert(stream);
                    }
                }
                Ok(Some(Event::GoAway { last_stream, code })) => {
                    goaway = Some((last_stream, code));
                    break 'flood;
                }
                Ok(Some(Event::Closed(why))) => {
                    bail!("{}: the flood's connection closed: {why}", server.name)
                }
                Ok(Some(Event::Data { .. } | Event::Settings(_))) => {}
                Ok(None) | Err(_) => bail!(
                    "{}: {} of {opened} streams answered or refused after 60 s",
                    server.name,
                    answered.len() + refused.len()
                ),
            }
        }
    }
    let open_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_held = rss_bytes(server.pid).context("RSS")?;
    let (tasks_held, _) = metrics_of(server).await;
    let fresh_held = fresh_median(20, &fresh).await?;
    // The flood's connection is still served: one more stream is refused.
    let still_up = if refused.is_empty() {
        "n/a".to_string()
    } else {
        let extra = abuser.open_grpc(&authority, path, body).await?;
        let mut verdict = "no answer in 10 s".to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(Some(event)) = tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            events.recv(),
        )
        .await
        {
            if let Event::Reset { stream, code } = event
                && stream == extra
            {
                verdict = format!("a further stream is refused too ({})", reason_name(code));
                break;
            }
        }
        verdict
    };
    // A client that keeps opening streams after they are refused.
    let mut more = 0usize;
    let mut closed_by = None;
    if goaway.is_none() && !refused.is_empty() {
        'more: while more < 5_000 {
            for _ in 0..100 {
                if abuser.open_grpc(&authority, path, body).await.is_err() {
                    break 'more;
                }
                more += 1;
            }
            let deadline = Instant::now() + Duration::from_millis(500);
            while let Ok(Some(event)) = tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                events.recv(),
            )
            .await
            {
                match event {
                    Event::GoAway { code, .. } => {
                        closed_by = Some(format!("GOAWAY {} (0x{code:x})", reason_name(code)));
                        break 'more;
                    }
                    Event::Closed(why) => {
                        closed_by = Some(format!("connection closed ({why})"));
                        break 'more;
                    }
                    _ => {}
                }
            }
        }
    }
    drop(abuser);
    drop(events);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after = rss_bytes(server.pid).context("RSS")?;
    let (tasks_after, _) = metrics_of(server).await;

    if ended > 0 {
        bail!(
            "{}: {ended} streams were answered with an error instead of held",
            server.name
        );
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let accepted = answered.len();
    println!(
        "    {}: advertised SETTINGS_MAX_CONCURRENT_STREAMS {}; {accepted} streams accepted in {:.2}s",
        server.name,
        advertised.map_or("none".to_string(), |n| n.to_string()),
        open_time.as_secs_f64()
    );
    match (first_refusal, goaway) {
        (Some((stream, code)), _) => println!(
            "      refusal: stream {} (number {} on the connection) got RST_STREAM {} (0x{code:x}); {} refused; the connection stayed open: {still_up}",
            stream,
            stream.div_ceil(2),
            reason_name(code),
            refused.len()
        ),
        (None, Some((last, code))) => println!(
            "      refusal: GOAWAY {} (0x{code:x}) after stream {last}",
            reason_name(code)
        ),
        (None, None) => println!("      never refused ({opened} streams opened)"),
    }
    println!(
        "      RSS {:.1} MiB → {:.1} MiB with the streams ({} bytes per accepted stream) → {:.1} MiB after the connection closed (the allocator keeps freed pages)",
        mib(rss_before),
        mib(rss_held),
        rss_held.saturating_sub(rss_before) / accepted.max(1) as u64,
        mib(rss_after)
    );
    if let Some(closed_by) = closed_by {
        println!(
            "      a client that keeps opening streams once refused: {closed_by} after {more} more refused streams (h2 counts the resets it sends; its 10,000 accepted streams end with it)"
        );
    } else if !refused.is_empty() {
        println!(
            "      {more} more streams opened after the refusal, all refused; the connection stayed open"
        );
    }
    println!(
        "      tasks alive {} → {} → {} (before, with the streams, after); a fresh client's first answer: {} before, {} while the flood holds its streams (median of 20)",
        fmt_opt(tasks_before),
        fmt_opt(tasks_held),
        fmt_opt(tasks_after),
        ms(fresh_before),
        ms(fresh_held)
    );
    Ok(())
}
