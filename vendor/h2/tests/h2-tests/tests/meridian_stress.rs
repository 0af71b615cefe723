//! (Meridian's patch) Many connections with small windows, late window
//! updates and one stalled stream per connection beside live ones, both
//! ends with `release_idle_buffers`: every byte and every trailer is
//! compared at the client.
//!
//! Each connection runs over an in-memory pipe of a few KiB (reads and
//! writes of partial frames). The server answers each request with a body
//! generated from the stream's seed, in chunks of random sizes, some sent
//! as capacity is granted and some queued at once (frames of several
//! streams in the connection's send queue), then trailers holding the
//! body's length and checksum. The client grants small windows, releases
//! what it read only after a random delay, and leaves one stream per
//! connection unread until the connection's other streams ended, so that
//! stream's frames wait in the queues while the others' come and go.

use h2_support::prelude::{
    bytes::{Bytes, BytesMut},
    client,
    futures::future::{join_all, poll_fn},
    http::{HeaderMap, HeaderValue, Request, Response},
    server, RecvStream,
};
use std::time::Duration;
use tokio::io::{duplex, DuplexStream};

const CONNECTIONS: u64 = 48;
const LIVE_STREAMS: u64 = 4;
const STREAM_WINDOW: u32 = 1_500;
const CONNECTION_WINDOW: u32 = 12_000;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The body of stream `seed`: its bytes are a function of the seed.
fn body(seed: u64) -> Bytes {
    let mut rng = Rng::new(seed);
    let len = match rng.below(4) {
        0 => rng.below(100),
        1 => rng.below(5_000),
        _ => 10_000 + rng.below(60_000),
    };
    (0..len)
        .map(|_| rng.next() as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// FNV-1a.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn trailers(body: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("x-length", HeaderValue::from(body.len() as u64));
    map.insert("x-checksum", HeaderValue::from(checksum(body)));
    map
}

async fn yields(n: u64) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

async fn serve(io: DuplexStream) {
    let mut connection = server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .release_idle_buffers(true)
        .handshake::<_, Bytes>(io)
        .await
        .expect("server handshake");
    let mut streams = Vec::new();
    while let Some(accepted) = connection.accept().await {
        let (request, mut respond) = accepted.expect("accept");
        let seed: u64 = request.uri().path()[1..].parse().expect("seed path");
        streams.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed ^ 0xdead);
            let data = body(seed);
            let mut send = respond
                .send_response(Response::new(()), false)
                .expect("send_response");
            // Queued at once (all frames wait in the send queue), or sent
            // as the client's window allows, in random chunks.
            // (The stalled stream always queues its frames.)
            let queue_all = seed % 1_000 == LIVE_STREAMS || rng.below(3) == 0;
            let mut at = 0;
            while at < data.len() {
                let chunk = (1 + rng.below(9_000) as usize).min(data.len() - at);
                if !queue_all {
                    send.reserve_capacity(chunk);
                    let granted = poll_fn(|cx| send.poll_capacity(cx))
                        .await
                        .expect("capacity")
                        .expect("capacity");
                    let n = granted.min(chunk);
                    send.send_data(data.slice(at..at + n), false).expect("data");
                    at += n;
                } else {
                    send.send_data(data.slice(at..at + chunk), false)
                        .expect("data");
                    at += chunk;
                }
                yields(rng.below(3)).await;
            }
            send.send_trailers(trailers(&data)).expect("trailers");
        }));
    }
    for stream in streams {
        stream.await.expect("server stream task");
    }
}

/// Reads `body` to its end, releasing each chunk's capacity after a random
/// delay (late WINDOW_UPDATEs), and checks every byte and the trailers.
async fn read_and_check(mut recv: RecvStream, seed: u64, what: &str) {
    let mut rng = Rng::new(seed ^ 0xbeef);
    let mut got = BytesMut::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap_or_else(|e| panic!("{}: data error {:?}", what, e));
        got.extend_from_slice(&chunk);
        if rng.below(4) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
        } else {
            yields(rng.below(5)).await;
        }
        recv.flow_control()
            .release_capacity(chunk.len())
            .expect("release");
    }
    let expected = body(seed);
    assert_eq!(got.len(), expected.len(), "{}: body length", what);
    assert!(got[..] == expected[..], "{}: body bytes differ", what);
    let trailers_got = recv
        .trailers()
        .await
        .unwrap_or_else(|e| panic!("{}: trailers error {:?}", what, e))
        .unwrap_or_else(|| panic!("{}: no trailers", what));
    assert_eq!(trailers_got, trailers(&expected), "{}: trailers", what);
}

async fn client(io: DuplexStream, conn: u64) {
    let (send_request, connection) = client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .release_idle_buffers(true)
        .handshake::<_, Bytes>(io)
        .await
        .expect("client handshake");
    let driver = tokio::spawn(async move { connection.await.expect("client connection") });
    let seed_of = |stream: u64| conn * 1_000 + stream;
    let open = |stream: u64| {
        let send_request = send_request.clone();
        async move {
            let request = Request::get(format!("http://stress/{}", seed_of(stream)))
                .body(())
                .expect("request");
            let mut send_request = send_request.ready().await.expect("ready");
            let (response, _) = send_request.send_request(request, true).expect("send");
            let response = response.await.expect("response");
            assert_eq!(response.status(), 200);
            response.into_body()
        }
    };
    // The stalled stream first: its frames wait while the others run.
    let stalled = open(LIVE_STREAMS).await;
    let live = (0..LIVE_STREAMS).map(|stream| async move {
        let recv = open(stream).await;
        read_and_check(
            recv,
            seed_of(stream),
            &format!("conn {} stream {}", conn, stream),
        )
        .await;
    });
    join_all(live).await;
    read_and_check(
        stalled,
        seed_of(LIVE_STREAMS),
        &format!("conn {} stalled stream", conn),
    )
    .await;
    drop(send_request);
    driver.await.expect("client driver");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_windows_late_updates_and_stalled_streams_lose_nothing() {
    let connections = (0..CONNECTIONS).map(|conn| async move {
        let (client_io, server_io) = duplex(1_024 + 512 * (conn as usize % 16));
        let server = tokio::spawn(serve(server_io));
        client(client_io, conn).await;
        server.await.expect("server task");
    });
    tokio::time::timeout(Duration::from_secs(300), join_all(connections))
        .await
        .expect("the connections stalled (no progress within 300 s)");
}
