//! The webhook server's bounds over real loopback sockets: a body over the
//! cap is refused with its error text, a trickled body is cut off at the
//! read deadline, and a flood of slow bodies does not keep a real review
//! from its verdict. Deadlines are shortened through [`Limits`]; the
//! timeouts here only keep a broken server from hanging the test.

mod support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use admission::{Limits, Outcome, server::BODY_LIMIT};
use support::{start, start_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_refused_with_the_error_text() {
    let webhook = start().await;

    // Declared too large: refused from the head.
    let mut tls = webhook.tls(b"http/1.1").await;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        BODY_LIMIT + 1
    );
    tls.write_all(head.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(HANG_GUARD, tls.read_to_end(&mut response))
        .await
        .expect("answered")
        .expect("read");
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 413"),
        "declared too large: {response}"
    );
    assert!(
        response.contains(&format!("request body larger than {BODY_LIMIT} bytes")),
        "{response}"
    );

    // Chunked, with no length declared: refused once past the cap.
    let tls = webhook.tls(b"http/1.1").await;
    let (mut reader, mut writer) = tokio::io::split(tls);
    let sender = tokio::spawn(async move {
        let head = "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
        writer.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 64 * 1024];
        for _ in 0..=BODY_LIMIT / chunk.len() {
            writer
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            writer.write_all(&chunk).await?;
            writer.write_all(b"\r\n").await?;
        }
        writer.write_all(b"0\r\n\r\n").await
    });
    let mut response = Vec::new();
    tokio::time::timeout(HANG_GUARD, reader.read_to_end(&mut response))
        .await
        .expect("answered")
        .expect("read");
    sender.abort();
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 413"),
        "chunked too large: {response}"
    );
    assert!(response.contains("request body larger than"), "{response}");
    assert_eq!(webhook.metrics.count(Outcome::Invalid), 2);
    assert_eq!(webhook.review().await, "HTTP/1.1 200 OK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_cut_off_at_the_deadline() {
    let webhook = start_with(Limits {
        read_deadline: Duration::from_secs(1),
        ..Limits::default()
    })
    .await;
    let tls = webhook.tls(b"http/1.1").await;
    let (mut reader, mut writer) = tokio::io::split(tls);
    // 1000 bytes, one every 100 ms: 100 s in all if nothing cuts it off.
    let trickle = tokio::spawn(async move {
        let head = "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n";
        writer.write_all(head.as_bytes()).await?;
        for _ in 0..1000 {
            writer.write_all(b" ").await?;
            writer.flush().await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        std::io::Result::Ok(())
    });
    let mut response = Vec::new();
    tokio::time::timeout(HANG_GUARD, reader.read_to_end(&mut response))
        .await
        .expect("cut off before the hang guard")
        .expect("read");
    trickle.abort();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(
        response.contains("request body not received within 1s"),
        "{response}"
    );
    assert!(
        response.to_ascii_lowercase().contains("connection: close"),
        "{response}"
    );
    assert_eq!(webhook.metrics.count(Outcome::Timeout), 1);
    assert_eq!(webhook.metrics.reading_now(), 0, "its read slot is free");
    let metrics = webhook.metrics();
    assert!(
        metrics.contains("admission_reviews_total{result=\"timeout\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_review_is_answered_beside_a_flood_of_slow_bodies() {
    const FLOOD: usize = 200;
    const READING: usize = 8;
    let webhook = Arc::new(
        start_with(Limits {
            reading: READING,
            // Longer than the test: slots are freed by shedding only.
            read_deadline: Duration::from_secs(600),
            ..Limits::default()
        })
        .await,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        let webhook = webhook.clone();
        let stop = stop.clone();
        flood.push(tokio::spawn(async move {
            let mut tls = webhook.tls(b"http/1.1").await;
            let head = "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3000000\r\n\r\n";
            tls.write_all(head.as_bytes()).await?;
            tls.write_all(&[b' '; 64 * 1024]).await?;
            while !stop.load(Ordering::Relaxed) {
                tls.write_all(&[b' '; 1024]).await?;
                tls.flush().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            std::io::Result::Ok(())
        }));
    }
    // Until every flood request holds a read slot or was shed (or long
    // enough that it never will be).
    let settled = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let shed = webhook.metrics.count(Outcome::Shed);
            let reading = u64::try_from(webhook.metrics.reading_now()).unwrap_or(0);
            if shed + reading >= FLOOD as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    let response = tokio::time::timeout(HANG_GUARD, webhook.review_response())
        .await
        .expect("the real review is answered");
    stop.store(true, Ordering::Relaxed);
    for client in flood {
        client.abort();
    }
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    let body = &response[response.find("\r\n\r\n").expect("body") + 4..];
    let json: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(
        json["response"],
        serde_json::json!({"uid": "u-1", "allowed": true})
    );
    assert!(settled.is_ok(), "the flood settled into slots and sheds");
    // The reader shed for the review records its outcome on its own task,
    // which may run after the review's answer is out: wait for it (or for
    // the guard, and fail below).
    let _ = tokio::time::timeout(HANG_GUARD, async {
        while webhook.metrics.count(Outcome::Shed) <= (FLOOD - READING) as u64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let shed = webhook.metrics.count(Outcome::Shed);
    assert!(
        shed > (FLOOD - READING) as u64,
        "the flood beyond {READING} slots, then one for the review, was shed: {shed}"
    );
    assert!(webhook.metrics.reading_now() <= READING as i64);
}
