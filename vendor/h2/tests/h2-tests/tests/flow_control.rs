use futures::{StreamExt, TryStreamExt};
use h2_support::prelude::*;
use h2_support::util::yield_once;
use std::pin::Pin;
use std::sync::{
    atomic::{AtomicU8, Ordering},
    Arc, Barrier,
};
use std::task::{Context, Poll};
use tokio::sync::oneshot;

const LOST_WAKE_FIRST_DATA: &[u8] = b"lost-wakeup-first-data";
const LOST_WAKE_SECOND_DATA: &[u8] = b"lost-wakeup-second-data";

#[derive(Clone)]
struct FlushInterleave {
    state: Arc<AtomicU8>,
    entered: Arc<Barrier>,
    resume: Arc<Barrier>,
}

impl FlushInterleave {
    fn new() -> Self {
        Self {
            state: Arc::new(AtomicU8::new(0)),
            entered: Arc::new(Barrier::new(2)),
            resume: Arc::new(Barrier::new(2)),
        }
    }

    fn arm(&self) {
        assert_eq!(self.state.swap(1, Ordering::SeqCst), 0);
    }

    fn observe_write(&self, buf: &[u8]) {
        if buf
            .windows(LOST_WAKE_FIRST_DATA.len())
            .any(|window| window == LOST_WAKE_FIRST_DATA)
        {
            let _ = self
                .state
                .compare_exchange(1, 2, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    fn block_flush(&self) {
        if self
            .state
            .compare_exchange(2, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.entered.wait();
            self.resume.wait();
        }
    }

    fn wait_for_flush(&self) {
        self.entered.wait();
    }

    fn resume_flush(&self) {
        self.resume.wait();
    }
}

struct FlushInterleaveIo {
    inner: mock::Mock,
    interleave: FlushInterleave,
}

impl AsyncRead for FlushInterleaveIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio_io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for FlushInterleaveIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.interleave.observe_write(buf);
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.interleave.block_flush();
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

// In this case, the stream & connection both have capacity, but capacity is not
// explicitly requested.
#[tokio::test]
async fn send_data_without_requesting_capacity() {
    h2_support::trace_init!();

    let payload = vec![0; 1024];

    let mock = mock_io::Builder::new()
        .handshake()
        .write(&[
            // POST /
            0, 0, 16, 1, 4, 0, 0, 0, 1, 131, 135, 65, 139, 157, 41, 172, 75, 143, 168, 233, 25, 151,
            33, 233, 132,
        ])
        .write(&[
            // DATA
            0, 4, 0, 0, 1, 0, 0, 0, 1,
        ])
        .write(&payload[..])
        .write(frames::SETTINGS_ACK)
        // Read response
        .read(&[0, 0, 1, 1, 5, 0, 0, 0, 1, 0x89])
        .build();

    let (mut client, mut h2) = client::handshake(mock).await.unwrap();

    let request = Request::builder()
        .method(Method::POST)
        .uri("https://http2.akamai.com/")
        .body(())
        .unwrap();

    let (response, mut stream) = client.send_request(request, false).unwrap();

    // The capacity should be immediately allocated
    assert_eq!(stream.capacity(), 0);

    // Send the data
    stream.send_data(payload.into(), true).unwrap();

    // Get the response
    let resp = h2.run(response).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);

    h2.await.unwrap();
}

#[tokio::test]
async fn release_capacity_sends_window_update() {
    h2_support::trace_init!();

    let payload = vec![0u8; 16_384];
    let payload_len = payload.len();

    let (io, mut srv) = mock::new();

    let mock = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, &payload[..])).await;
        srv.send_frame(frames::data(1, &payload[..])).await;
        srv.send_frame(frames::data(1, &payload[..])).await;
        srv.recv_frame(frames::window_update(0, 32_768)).await;
        srv.recv_frame(frames::window_update(1, 32_768)).await;
        srv.send_frame(frames::data(1, &payload[..]).eos()).await;
    };

    let h2 = async move {
        let (mut client, h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::GET)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async move {
            let resp = client.send_request(request, true).unwrap().0.await.unwrap();
            // Get the response
            assert_eq!(resp.status(), StatusCode::OK);
            let mut body = resp.into_parts().1;

            // read some body to use up window size to below half
            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), payload_len);

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), payload_len);

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), payload_len);
            body.flow_control().release_capacity(buf.len() * 2).unwrap();

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), payload_len);
        };

        join(
            async move {
                h2.await.unwrap();
            },
            req,
        )
        .await
    };
    join(mock, h2).await;
}

#[tokio::test]
async fn window_updates_include_padded_length() {
    h2_support::trace_init!();

    // Our manual way of sending padding frames, not supported publicly
    const PAYLOAD_LEN: usize = 16_378; // 16_384; does padding + payload count for max frame size?
    let mut payload = Vec::with_capacity(PAYLOAD_LEN + 6);
    payload.push(5);
    payload.extend_from_slice(&[b'z'; PAYLOAD_LEN][..]);
    payload.extend_from_slice(&[b'0'; 5][..]);

    let (io, mut srv) = mock::new();

    let mock = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, &payload[..]).padded()).await;
        srv.send_frame(frames::data(1, &payload[..]).padded()).await;
        srv.send_frame(frames::data(1, &payload[..]).padded()).await;
        // the other 6 was auto-released earlier
        srv.recv_frame(frames::window_update(0, 32_774)).await;
        srv.recv_frame(frames::window_update(1, 32_774)).await;
        srv.send_frame(frames::data(1, &payload[..]).padded().eos())
            .await;
        // but not double released here
        srv.recv_frame(frames::window_update(0, 32_762)).await;
        // and no one cares about closed stream window
    };

    let h2 = async move {
        let (mut client, h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::GET)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async move {
            let resp = client.send_request(request, true).unwrap().0.await.unwrap();
            // Get the response
            assert_eq!(resp.status(), StatusCode::OK);
            let mut body = resp.into_parts().1;

            // read some body to use up window size to below half
            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), PAYLOAD_LEN);

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), PAYLOAD_LEN);

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), PAYLOAD_LEN);
            body.flow_control().release_capacity(buf.len() * 2).unwrap();

            let buf = body.data().await.unwrap().unwrap();
            assert_eq!(buf.len(), PAYLOAD_LEN);
            drop(body);
            idle_ms(20).await;
        };

        join(
            async move {
                h2.await.unwrap();
            },
            req,
        )
        .await
    };
    join(mock, h2).await;
}

#[tokio::test]
async fn release_capacity_of_small_amount_does_not_send_window_update() {
    h2_support::trace_init!();

    let payload = [0; 16];

    let (io, mut srv) = mock::new();

    let mock = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, &payload[..]).eos()).await;
    };

    let h2 = async move {
        let (mut client, h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::GET)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async move {
            let resp = client.send_request(request, true).unwrap().0.await.unwrap();
            // Get the response
            assert_eq!(resp.status(), StatusCode::OK);
            let mut body = resp.into_parts().1;
            assert!(!body.is_end_stream());
            let buf = body.data().await.unwrap().unwrap();
            // read the small body and then release it
            assert_eq!(buf.len(), 16);
            body.flow_control().release_capacity(buf.len()).unwrap();
            let buf = body.data().await;
            assert!(buf.is_none());
        };
        join(async move { h2.await.unwrap() }, req).await;
    };
    join(mock, h2).await;
}

#[test]
#[ignore]
fn expand_window_sends_window_update() {}

#[test]
#[ignore]
fn expand_window_calls_are_coalesced() {}

#[tokio::test]
async fn recv_data_overflows_connection_window() {
    h2_support::trace_init!();

    let (io, mut srv) = mock::new();

    let mock = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        // fill the whole window
        srv.send_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0u8; 16_383])).await;
        // this frame overflows the window!
        srv.send_frame(frames::data(1, vec![0u8; 128]).eos()).await;
        // expecting goaway for the conn, not stream
        srv.recv_frame(frames::go_away(0).flow_control()).await;
        // connection is ended by client
    };

    let h2 = async move {
        let (mut client, h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::GET)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async move {
            let resp = client.send_request(request, true).unwrap().0.await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            let body = resp.into_parts().1;
            let res = util::concat(body).await;
            let err = res.unwrap_err();
            assert_eq!(
                err.to_string(),
                "connection error detected: flow-control protocol violated"
            );
        };

        // client should see a flow control error
        let conn = async move {
            let res = h2.await;
            let err = res.unwrap_err();
            assert_eq!(
                err.to_string(),
                "connection error detected: flow-control protocol violated"
            );
        };
        join(conn, req).await;
    };
    join(mock, h2).await;
}

#[tokio::test]
async fn recv_data_overflows_stream_window() {
    // this tests for when streams have smaller windows than their connection
    h2_support::trace_init!();

    let (io, mut srv) = mock::new();

    let mock = async move {
        let _ = srv.assert_client_handshake().await;
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        // fill the whole window
        srv.send_frame(frames::data(1, vec![0u8; 16_384])).await;
        // this frame overflows the window!
        srv.send_frame(frames::data(1, &[0; 16][..]).eos()).await;
        srv.recv_frame(frames::reset(1).flow_control()).await;
    };

    let h2 = async move {
        let (mut client, conn) = client::Builder::new()
            .initial_window_size(16_384)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let request = Request::builder()
            .method(Method::GET)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async move {
            let resp = client.send_request(request, true).unwrap().0.await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            let body = resp.into_parts().1;
            let res = util::concat(body).await;
            let err = res.unwrap_err();
            assert_eq!(
                err.to_string(),
                "stream error detected: flow-control protocol violated"
            );
        };

        join(async move { conn.await.unwrap() }, req).await;
    };
    join(mock, h2).await;
}

#[test]
#[ignore]
fn recv_window_update_causes_overflow() {
    // A received window update causes the window to overflow.
}

#[tokio::test]
async fn stream_error_release_connection_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        // we're sending the wrong content-length
        srv.send_frame(
            frames::headers(1)
                .response(200)
                .field("content-length", &*(16_384 * 3).to_string()),
        )
        .await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 10]).eos()).await;
        // mismatched content-length is a protocol error
        srv.recv_frame(frames::reset(1).protocol_error()).await;
        // but then the capacity should be released automatically
        srv.recv_frame(frames::window_update(0, 16_384 * 2 + 10))
            .await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async {
            let resp = client
                .send_request(request, true)
                .unwrap()
                .0
                .await
                .expect("response");
            assert_eq!(resp.status(), StatusCode::OK);
            let mut body = resp.into_parts().1;
            let mut cap = body.flow_control().clone();
            let to_release = 16_384 * 2;
            let mut should_recv_bytes = to_release;
            let mut should_recv_frames = 2usize;

            let err = body
                .try_for_each(|bytes| async move {
                    should_recv_bytes -= bytes.len();
                    should_recv_frames -= 1;
                    if should_recv_bytes == 0 {
                        assert_eq!(should_recv_frames, 0);
                    }
                    Ok(())
                })
                .await
                .expect_err("body");
            assert_eq!(
                err.to_string(),
                "stream error detected: unspecific protocol error detected"
            );
            cap.release_capacity(to_release).expect("release_capacity");
        };
        conn.drive(req).await;
        conn.await.expect("client");
    };

    join(srv, client).await;
}

#[tokio::test]
async fn recv_stream_drop_releases_only_buffered_connection_capacity() {
    h2_support::trace_init!();

    const FRAME_LEN: usize = 16_384;
    const TOTAL_LEN: usize = FRAME_LEN * 2;

    // Exercise all relationships between buffered and in-flight capacity:
    // equal, buffered > in-flight, and buffered < in-flight.
    for read_frames in 0usize..=1 {
        for released_frames in 0usize..=1 {
            let expected_used = read_frames.saturating_sub(released_frames) * FRAME_LEN;
            let (io, mut peer) = mock::new();

            let peer = async move {
                let _ = peer.assert_server_handshake().await;
                peer.send_frame(frames::headers(1).request("POST", "https://example.com/"))
                    .await;
                for _ in 0..2 {
                    peer.send_frame(frames::data(1, vec![0; FRAME_LEN])).await;
                }

                peer.recv_frame(frames::window_update(0, (TOTAL_LEN - expected_used) as u32))
                    .await;
                if released_frames > 0 {
                    peer.recv_frame(frames::window_update(1, FRAME_LEN as u32))
                        .await;
                }
            };

            let server = async move {
                let mut server = server::handshake(io).await.unwrap();
                let (request, _respond) = server.next().await.unwrap().unwrap();
                let mut body = request.into_body();

                for _ in 0..read_frames {
                    assert_eq!(body.data().await.unwrap().unwrap().len(), FRAME_LEN);
                }

                let mut flow = body.flow_control().clone();
                for _ in 0..released_frames {
                    flow.release_capacity(FRAME_LEN).unwrap();
                }
                drop(body);

                assert_eq!(flow.used_capacity(), expected_used);

                let _ = server.next().await;
            };

            join(peer, server).await;
        }
    }
}

// Regression test for TODO
#[tokio::test]
async fn padded_data_stream_error_releases_connection_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    // Padded EOS frame: 1 byte pad_len + 8 bytes data + 1 byte padding.
    // flow_controlled_len = 10, payload (data only) = 8.
    let mut padded_eos = vec![0u8; 10];
    padded_eos[0] = 1;

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        // Wrong content-length triggers a stream error on the padded EOS frame.
        srv.send_frame(
            frames::headers(1)
                .response(200)
                .field("content-length", &*(16_384 * 3).to_string()),
        )
        .await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, &padded_eos[..]).padded().eos())
            .await;
        srv.recv_frame(frames::reset(1).protocol_error()).await;
        // Released capacity must include the padded frame's full
        // flow_controlled_len (10), not just its payload (8).
        srv.recv_frame(frames::window_update(0, 16_384 * 2 + 10))
            .await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let req = async {
            let resp = client
                .send_request(request, true)
                .unwrap()
                .0
                .await
                .expect("response");
            assert_eq!(resp.status(), StatusCode::OK);
            let mut body = resp.into_parts().1;
            let mut cap = body.flow_control().clone();
            let to_release = 16_384 * 2;
            let mut should_recv_bytes = to_release;
            let mut should_recv_frames = 2usize;

            let err = body
                .try_for_each(|bytes| async move {
                    should_recv_bytes -= bytes.len();
                    should_recv_frames -= 1;
                    if should_recv_bytes == 0 {
                        assert_eq!(should_recv_frames, 0);
                    }
                    Ok(())
                })
                .await
                .expect_err("body");
            assert_eq!(
                err.to_string(),
                "stream error detected: unspecific protocol error detected"
            );
            cap.release_capacity(to_release).expect("release_capacity");
        };
        conn.drive(req).await;
        conn.await.expect("client");
    };

    join(srv, client).await;
}

// Regression test for TODO
#[tokio::test]
async fn padded_data_on_forgotten_stream_releases_connection_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    // Padded frame: 1 byte pad_len + 16378 bytes data + 5 bytes padding.
    // flow_controlled_len = 16384, payload (data only) = 16378.
    let mut padded = vec![0u8; 16_384];
    padded[0] = 5;

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://example.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.recv_frame(frames::reset(1).cancel()).await;
        // Wait for the reset to expire so the stream is forgotten.
        idle_ms(50).await;
        srv.ping_pong([1; 8]).await;
        // Stream 1 has been evicted. Send a padded DATA frame for it.
        srv.send_frame(frames::data(1, &padded[..]).padded().eos())
            .await;
        // Released capacity must cover both frames using their full
        // flow_controlled_len. There used to be a bug where the padded
        // frame would release only 16378 (payload) instead of 16384.
        srv.recv_frame(frames::window_update(0, 16_384 * 2)).await;
        srv.recv_frame(frames::reset(1).stream_closed()).await;
    };

    let client = async move {
        let (mut client, conn) = client::Builder::new()
            .reset_stream_duration(Duration::from_millis(10))
            .handshake::<_, Bytes>(io)
            .await
            .expect("handshake");

        let req = async {
            let resp = client.get("https://example.com/").await.expect("response");
            assert_eq!(resp.status(), StatusCode::OK);
            // This drop sends RST_STREAM(CANCEL)
            drop(resp);
        };

        let mut conn = Box::pin(async move { conn.await.expect("client") });
        conn.drive(req).await;
        conn.await;
        drop(client);
    };

    join(srv, client).await;
}

#[tokio::test]
async fn stream_close_by_data_frame_releases_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let window_size = frame::DEFAULT_INITIAL_WINDOW_SIZE as usize;

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        // Send request
        let (resp1, mut s1) = client.send_request(request, false).unwrap();

        // This effectively reserves the entire connection window
        s1.reserve_capacity(window_size);

        // The capacity should be immediately available as nothing else is
        // happening on the stream.
        let mut s1 = h2.drive(util::wait_for_capacity(s1, window_size)).await;

        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        // Create a second stream
        let (resp2, mut s2) = client.send_request(request, false).unwrap();

        // Request capacity
        s2.reserve_capacity(5);

        // There should be no available capacity (as it is being held up by
        // the previous stream
        assert_eq!(s2.capacity(), 0);

        // Closing the previous stream by sending an empty data frame will
        // release the capacity to s2
        s1.send_data("".into(), true).unwrap();

        // The capacity should be available
        let mut s2 = h2.drive(util::wait_for_capacity(s2, 5)).await;

        // Send the frame
        s2.send_data("hello".into(), true).unwrap();

        // Drive both streams to prevent the handles from being dropped
        // (which will send a RST_STREAM) before the connection is closed.
        h2.drive(resp1).await.unwrap();
        h2.drive(resp2).await.unwrap();
    };

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::headers(3).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::headers(3).response(200)).await;
        srv.recv_frame(frames::data(1, &b""[..]).eos()).await;
        srv.recv_frame(frames::data(3, &b"hello"[..]).eos()).await;
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn stream_close_by_trailers_frame_releases_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let window_size = frame::DEFAULT_INITIAL_WINDOW_SIZE as usize;

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        // Send request
        let (resp1, mut s1) = client.send_request(request, false).unwrap();

        // This effectively reserves the entire connection window
        s1.reserve_capacity(window_size);

        let mut s1 = h2.drive(util::wait_for_capacity(s1, window_size)).await;

        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        // Create a second stream
        let (resp2, mut s2) = client.send_request(request, false).unwrap();

        // Request capacity
        s2.reserve_capacity(5);

        // There should be no available capacity (as it is being held up by
        // the previous stream
        assert_eq!(s2.capacity(), 0);

        // Closing the previous stream by sending a trailers frame will
        // release the capacity to s2
        s1.send_trailers(Default::default()).unwrap();

        // The capacity should be available
        let mut s2 = h2.drive(util::wait_for_capacity(s2, 5)).await;

        // Send the frame
        s2.send_data("hello".into(), true).unwrap();

        // Drive both streams to prevent the handles from being dropped
        // (which will send a RST_STREAM) before the connection is closed.
        h2.drive(resp1).await.unwrap();
        h2.drive(resp2).await.unwrap();
    };

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        // Get the first frame
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::headers(3).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::headers(3).response(200)).await;
        srv.recv_frame(frames::headers(1).eos()).await;
        srv.recv_frame(frames::data(3, &b"hello"[..]).eos()).await;
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn stream_close_by_send_reset_frame_releases_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);

        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_384]).eos()).await;
        srv.recv_frame(frames::window_update(0, 16_384 * 2)).await;
        srv.recv_frame(
            frames::headers(3)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(3).response(200).eos()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.expect("client handshake");
        {
            let request = Request::builder()
                .uri("https://http2.akamai.com/")
                .body(())
                .unwrap();
            let (resp, _) = client.send_request(request, true).unwrap();
            let _res = conn.drive(resp).await;
            //    ^-- ignore the response body
        }
        let resp = {
            let request = Request::builder()
                .uri("https://http2.akamai.com/")
                .body(())
                .unwrap();
            let (resp, _) = client.send_request(request, true).unwrap();
            drop(client);
            resp
        };
        let _res = conn.drive(resp).await;
        conn.await.expect("client conn");
    };

    join(srv, client).await;
}

#[test]
#[ignore]
fn stream_close_by_recv_reset_frame_releases_capacity() {}

#[tokio::test]
async fn recv_window_update_on_stream_closed_by_data_frame() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        // Wait for the response
        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        // Send a data frame, this will also close the connection
        stream.send_data("hello".into(), true).unwrap();

        // keep `stream` from being dropped in order to prevent
        // it from sending an RST_STREAM frame.
        //
        // i know this is kind of evil, but it's necessary to
        // ensure that the stream is closed by the EOS frame,
        // and not by the RST_STREAM.
        std::mem::forget(stream);

        // Wait for the connection to close
        h2.await.unwrap();
    };
    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::data(1, "hello").eos()).await;
        srv.send_frame(frames::window_update(1, 5)).await;
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn small_data_frames_reclaimed_before_buffering_next() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        stream.send_data("hello".into(), false).unwrap();
        stream.send_data("world".into(), true).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        h2.await.unwrap();
    };

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.recv_frame(frames::data(1, "hello")).await;
        srv.recv_frame(frames::data(1, "world").eos()).await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn send_enqueued_during_unlocked_flush_wakes_connection() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();
    let interleave = FlushInterleave::new();
    let io = FlushInterleaveIo {
        inner: io,
        interleave: interleave.clone(),
    };
    let (headers_received_tx, headers_received_rx) = oneshot::channel();

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        // Ensure the connection has finished flushing HEADERS and registered
        // its stream waker before the first DATA frame consumes that waker.
        h2.drive(headers_received_rx).await.unwrap();

        interleave.arm();
        stream
            .send_data(LOST_WAKE_FIRST_DATA.into(), false)
            .unwrap();

        let producer_interleave = interleave.clone();
        let producer = thread::spawn(move || {
            producer_interleave.wait_for_flush();
            let result = stream.send_data(LOST_WAKE_SECOND_DATA.into(), true);
            producer_interleave.resume_flush();
            result.unwrap();
        });

        let response = {
            // Suppress unrelated/spurious connection polls so only a wake
            // registered during the critical flush interval can make progress.
            let mut woken_h2 = (&mut h2).wakened();
            tokio::time::timeout(Duration::from_secs(5), woken_h2.drive(response))
                .await
                .expect("connection was not woken for DATA queued during flush")
                .unwrap()
        };
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        producer.join().unwrap();
        drop(client);
        h2.await.unwrap();
    };

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        headers_received_tx.send(()).unwrap();
        srv.recv_frame(frames::data(1, LOST_WAKE_FIRST_DATA)).await;
        srv.recv_frame(frames::data(1, LOST_WAKE_SECOND_DATA).eos())
            .await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn reserved_capacity_assigned_in_multi_window_updates() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        // Consume the capacity
        let payload = vec![0; frame::DEFAULT_INITIAL_WINDOW_SIZE as usize];
        stream.send_data(payload.into(), false).unwrap();

        // Reserve more data than we want
        stream.reserve_capacity(10);

        let mut stream = h2.drive(util::wait_for_capacity(stream, 5)).await;
        stream.send_data("hello".into(), false).unwrap();
        stream.send_data("world".into(), true).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        // Wait for the connection to close
        h2.await.unwrap();
    };

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0u8; 16_383])).await;
        idle_ms(100).await;
        // Increase the connection window
        srv.send_frame(frames::window_update(0, 10)).await;
        // Incrementally increase the stream window
        srv.send_frame(frames::window_update(1, 4)).await;
        idle_ms(50).await;
        srv.send_frame(frames::window_update(1, 1)).await;
        // Receive first chunk
        srv.recv_frame(frames::data(1, "hello")).await;
        srv.send_frame(frames::window_update(1, 5)).await;
        // Receive second chunk
        srv.recv_frame(frames::data(1, "world").eos()).await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
        /*
        .recv_frame(frames::data(1, "hello").eos())
        .send_frame(frames::window_update(1, 5))
        */
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn connection_notified_on_released_capacity() {
    use tokio::sync::{mpsc, oneshot};

    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    // We're going to run the connection on a thread in order to isolate task
    // notifications. This test is here, in part, to ensure that the connection
    // receives the appropriate notifications to send out window updates.

    let (tx, mut rx) = mpsc::unbounded_channel();

    // Because threading is fun
    let (settings_tx, settings_rx) = oneshot::channel();

    let (th1_tx, th1_rx) = oneshot::channel();

    tokio::spawn(async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        settings_tx.send(()).unwrap();
        // Get the first request
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://example.com/a")
                .eos(),
        )
        .await;
        // Get the second request
        srv.recv_frame(
            frames::headers(3)
                .request("GET", "https://example.com/b")
                .eos(),
        )
        .await;
        // Send the first response
        srv.send_frame(frames::headers(1).response(200)).await;
        // Send the second response
        srv.send_frame(frames::headers(3).response(200)).await;

        // Fill the connection window
        srv.send_frame(frames::data(1, vec![0u8; 16_384]).eos())
            .await;
        idle_ms(100).await;
        srv.send_frame(frames::data(3, vec![0u8; 16_384]).eos())
            .await;

        // The window update is sent
        srv.recv_frame(frames::window_update(0, 16_384)).await;

        th1_tx.send(()).unwrap();
    });

    let (th2_tx, th2_rx) = oneshot::channel();

    let (mut client, mut h2) = client::handshake(io).await.unwrap();

    h2.drive(settings_rx).await.unwrap();
    let request = Request::get("https://example.com/a").body(()).unwrap();
    tx.send(client.send_request(request, true).unwrap().0)
        .unwrap();

    let request = Request::get("https://example.com/b").body(()).unwrap();
    tx.send(client.send_request(request, true).unwrap().0)
        .unwrap();

    tokio::spawn(async move {
        // Run the connection to completion
        h2.await.unwrap();

        th2_tx.send(()).unwrap();
        drop(client);
    });

    // Get the two requests
    let a = rx.recv().await.unwrap();
    let b = rx.recv().await.unwrap();

    // Get the first response
    let response = a.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (_, mut a) = response.into_parts();

    // Get the next chunk
    let chunk = a.data().await.unwrap();
    assert_eq!(16_384, chunk.unwrap().len());

    // Get the second response
    let response = b.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (_, mut b) = response.into_parts();

    // Get the next chunk
    let chunk = b.data().await.unwrap();
    assert_eq!(16_384, chunk.unwrap().len());

    // Wait a bit
    idle_ms(100).await;

    // Release the capacity
    a.flow_control().release_capacity(16_384).unwrap();

    th1_rx.await.unwrap();
    th2_rx.await.unwrap();

    // Explicitly drop this after the joins so that the capacity doesn't get
    // implicitly released before.
    drop(b);
}

#[tokio::test]
async fn recv_settings_removes_available_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let mut settings = frame::Settings::default();
    settings.set_initial_window_size(Some(0));

    let srv = async move {
        let settings = srv.assert_client_handshake_with_settings(settings).await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        idle_ms(100).await;
        srv.send_frame(frames::window_update(0, 11)).await;
        srv.send_frame(frames::window_update(1, 11)).await;
        srv.recv_frame(frames::data(1, "hello world").eos()).await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        stream.reserve_capacity(11);

        let mut stream = h2.drive(util::wait_for_capacity(stream, 11)).await;
        assert_eq!(stream.capacity(), 11);

        stream.send_data("hello world".into(), true).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        // Wait for the connection to close
        // Hold on to the `client` handle to avoid sending a GO_AWAY frame.
        h2.await.unwrap();
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn recv_settings_keeps_assigned_capacity() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let (sent_settings, sent_settings_rx) = futures::channel::oneshot::channel();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.send_frame(frames::settings().initial_window_size(64))
            .await;
        srv.recv_frame(frames::settings_ack()).await;
        sent_settings.send(()).unwrap();
        srv.recv_frame(frames::data(1, "hello world").eos()).await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
    };

    let h2 = async move {
        let (mut client, h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        stream.reserve_capacity(11);

        let f = async move {
            let mut stream = util::wait_for_capacity(stream, 11).await;
            sent_settings_rx.await.expect("rx");
            stream.send_data("hello world".into(), true).unwrap();
            let resp = response.await.expect("response");
            assert_eq!(resp.status(), StatusCode::NO_CONTENT);
        };
        join(async move { h2.await.expect("h2") }, f).await;
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn recv_no_init_window_then_receive_some_init_window() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let mut settings = frame::Settings::default();
    settings.set_initial_window_size(Some(0));

    let srv = async move {
        let settings = srv.assert_client_handshake_with_settings(settings).await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        idle_ms(100).await;
        srv.send_frame(frames::settings().initial_window_size(10))
            .await;
        srv.recv_frame(frames::settings_ack()).await;
        srv.recv_frame(frames::data(1, "hello worl")).await;
        idle_ms(100).await;
        srv.send_frame(frames::settings().initial_window_size(11))
            .await;
        srv.recv_frame(frames::settings_ack()).await;
        srv.recv_frame(frames::data(1, "d").eos()).await;
        srv.send_frame(frames::headers(1).response(204).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        stream.reserve_capacity(10);

        let mut stream = h2.drive(util::wait_for_capacity(stream, 10)).await;
        assert_eq!(stream.capacity(), 10);

        stream.send_data("hello world".into(), true).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        // Wait for the connection to close
        // Hold on to the `client` handle to avoid sending a GO_AWAY frame.
        h2.await.unwrap();
    };
    join(srv, h2).await;
}

#[tokio::test]
async fn settings_lowered_capacity_returns_capacity_to_connection() {
    use futures::channel::oneshot;

    h2_support::trace_init!();
    let (io, mut srv) = mock::new();
    let (tx1, rx1) = oneshot::channel();
    let (tx2, rx2) = oneshot::channel();

    let window_size = frame::DEFAULT_INITIAL_WINDOW_SIZE as usize;

    let (th1_tx, th1_rx) = oneshot::channel();
    // Spawn the server on a thread
    tokio::spawn(async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        tx1.send(()).unwrap();
        srv.recv_frame(frames::headers(1).request("POST", "https://example.com/one"))
            .await;
        srv.recv_frame(frames::headers(3).request("POST", "https://example.com/two"))
            .await;
        idle_ms(200).await;
        // Remove all capacity from streams
        srv.send_frame(frames::settings().initial_window_size(0))
            .await;
        srv.recv_frame(frames::settings_ack()).await;

        // Let stream 3 make progress
        srv.send_frame(frames::window_update(3, 11)).await;
        srv.recv_frame(frames::data(3, "hello world").eos()).await;
        // Wait to get notified
        //
        // A timeout is used here to avoid blocking forever if there is a
        // failure
        let _ = tokio::time::timeout(Duration::from_secs(5), rx2)
            .await
            .unwrap();

        idle_ms(500).await;

        // Reset initial window size
        srv.send_frame(frames::settings().initial_window_size(window_size as u32))
            .await;
        srv.recv_frame(frames::settings_ack()).await;

        // Get data from first stream
        srv.recv_frame(frames::data(1, "hello world").eos()).await;

        // Send responses
        srv.send_frame(frames::headers(1).response(204).eos()).await;
        srv.send_frame(frames::headers(3).response(204).eos()).await;
        drop(srv);
        th1_tx.send(()).unwrap();
    });

    let (mut client, h2) = client::handshake(io).await.unwrap();

    let (th2_tx, th2_rx) = oneshot::channel();
    // Drive client connection
    tokio::spawn(async move {
        h2.await.unwrap();
        th2_tx.send(()).unwrap();
    });

    // Wait for server handshake to complete.
    let _ = tokio::time::timeout(Duration::from_secs(5), rx1)
        .await
        .unwrap();

    let request = Request::post("https://example.com/one").body(()).unwrap();

    let (resp1, mut stream1) = client.send_request(request, false).unwrap();

    let request = Request::post("https://example.com/two").body(()).unwrap();

    let (resp2, mut stream2) = client.send_request(request, false).unwrap();

    // Reserve capacity for stream one, this will consume all connection level
    // capacity
    stream1.reserve_capacity(window_size);
    let stream1 = util::wait_for_capacity(stream1, window_size).await;

    // Now, wait for capacity on the other stream
    stream2.reserve_capacity(11);
    let mut stream2 = util::wait_for_capacity(stream2, 11).await;

    // Send data on stream 2
    stream2.send_data("hello world".into(), true).unwrap();

    tx2.send(()).unwrap();

    // Wait for capacity on stream 1
    let mut stream1 = util::wait_for_capacity(stream1, 11).await;

    stream1.send_data("hello world".into(), true).unwrap();

    // Wait for responses..
    let resp = resp1.await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);

    let resp = resp2.await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);

    th1_rx.await.unwrap();
    th2_rx.await.unwrap();
}

#[tokio::test]
async fn client_increase_target_window_size() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::window_update(0, (2 << 20) - 65_535))
            .await;
    };

    let client = async move {
        let (_client, mut conn) = client::handshake(io).await.unwrap();
        conn.set_target_window_size(2 << 20);
        conn.await.unwrap();
    };
    join(srv, client).await;
}

#[tokio::test]
async fn increase_target_window_size_after_using_some() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![0; 16_384]).eos()).await;
        srv.recv_frame(frames::window_update(0, (2 << 20) - 65_535))
            .await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();

        let res = client.send_request(request, true).unwrap().0;

        let res = conn.drive(res).await.unwrap();
        conn.set_target_window_size(2 << 20);
        // drive an empty future to allow the WINDOW_UPDATE
        // to go out while the response capacity is still in use.
        conn.drive(yield_once()).await;
        let _res = conn.drive(util::concat(res.into_body())).await;
        conn.await.expect("client");
    };

    join(srv, client).await;
}

#[tokio::test]
async fn decrease_target_window_size() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_384])).await;
        srv.send_frame(frames::data(1, vec![0; 16_383]).eos()).await;
        srv.recv_frame(frames::window_update(0, 16_384)).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        conn.set_target_window_size(16_384 * 2);

        let request = Request::builder()
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();
        let (resp, _) = client.send_request(request, true).unwrap();
        let res = conn.drive(resp).await.expect("response");
        conn.set_target_window_size(16_384);
        let mut body = res.into_parts().1;
        let mut cap = body.flow_control().clone();

        let bytes = conn.drive(util::concat(body)).await.expect("concat");
        assert_eq!(bytes.len(), 65_535);
        cap.release_capacity(bytes.len()).unwrap();
        conn.await.expect("conn");
    };

    join(srv, client).await;
}

#[tokio::test]
async fn client_update_initial_window_size() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let window_size = frame::DEFAULT_INITIAL_WINDOW_SIZE * 2;

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::window_update(0, window_size - 65_535))
            .await;
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![b'a'; 16_384])).await;
        srv.send_frame(frames::data(1, vec![b'b'; 16_384])).await;
        srv.send_frame(frames::data(1, vec![b'c'; 16_384])).await;
        srv.recv_frame(frames::settings().initial_window_size(window_size))
            .await;
        srv.send_frame(frames::settings_ack()).await;
        // we never got a WINDOW_UPDATE, but initial update allows more
        srv.send_frame(frames::data(1, vec![b'd'; 16_384])).await;
        srv.send_frame(frames::data(1, vec![b'e'; 16_384]).eos())
            .await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        conn.set_target_window_size(window_size);

        // We'll never release_capacity back...
        async fn data(body: &mut h2::RecvStream, expect: &str) {
            let buf = body.data().await.expect(expect).expect(expect);
            assert_eq!(buf.len(), 16_384, "{}", expect);
        }

        let res_fut = client.get("https://http2.akamai.com/");

        // Receive most of the stream's window...
        let body = conn
            .drive(async move {
                let resp = res_fut.await.expect("response");
                let mut body = resp.into_body();

                data(&mut body, "data1").await;
                data(&mut body, "data2").await;
                data(&mut body, "data3").await;

                body
            })
            .await;

        // Update the initial window size to double
        conn.set_initial_window_size(window_size).expect("update");

        // And then ensure we got the data normally "over" the smaller
        // initial_window_size...
        let f = async move {
            let mut body = body;
            data(&mut body, "data4").await;
            data(&mut body, "data5").await;
            assert!(body.data().await.is_none(), "eos");
        };

        join(async move { conn.await.expect("client") }, f).await;
    };

    join(srv, client).await;
}

#[tokio::test]
async fn client_decrease_initial_window_size() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);

        srv.recv_frame(
            frames::headers(1)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.send_frame(frames::data(1, vec![b'a'; 100])).await;

        srv.recv_frame(
            frames::headers(3)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(3).response(200)).await;
        srv.send_frame(frames::data(3, vec![b'a'; 100])).await;

        srv.recv_frame(
            frames::headers(5)
                .request("GET", "https://http2.akamai.com/")
                .eos(),
        )
        .await;
        srv.send_frame(frames::headers(5).response(200)).await;
        srv.send_frame(frames::data(5, vec![b'a'; 100])).await;

        srv.recv_frame(frames::settings().initial_window_size(0))
            .await;
        // check settings haven't applied before ACK
        srv.send_frame(frames::data(1, vec![b'a'; 100]).eos()).await;
        srv.send_frame(frames::settings_ack()).await;

        // check stream 3 has no window
        srv.send_frame(frames::data(3, vec![b'a'; 1])).await;
        srv.recv_frame(frames::reset(3).flow_control()).await;

        // check stream 5 can release capacity
        srv.recv_frame(frames::window_update(5, 100)).await;

        srv.recv_frame(frames::settings().initial_window_size(16_384))
            .await;
        srv.send_frame(frames::settings_ack()).await;

        srv.send_frame(frames::data(5, vec![b'a'; 100])).await;
        srv.send_frame(frames::data(5, vec![b'a'; 100]).eos()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();

        async fn req(client: &mut client::SendRequest<Bytes>) -> h2::RecvStream {
            let res_fut = client.get("https://http2.akamai.com/");

            // Use some of the recv window
            let resp = res_fut.await.expect("response");
            let mut body = resp.into_body();

            data(&mut body, "data1").await;

            body
        }

        async fn data(body: &mut h2::RecvStream, expect: &str) {
            let buf = body.data().await.expect(expect).expect(expect);
            assert_eq!(buf.len(), 100, "{}", expect);
        }

        let mut body1 = conn.drive(req(&mut client)).await;
        let mut body3 = conn.drive(req(&mut client)).await;
        let mut body5 = conn.drive(req(&mut client)).await;

        // Remove *all* window size of streams
        conn.set_initial_window_size(0).expect("update0");
        conn.drive(yield_once()).await;

        // stream 1 received before settings ACK
        conn.drive(async {
            data(&mut body1, "body1 data2").await;
            assert!(body1.is_end_stream());
        })
        .await;

        // stream 3 received after ACK, which is stream error
        conn.drive(async {
            body3.data().await.expect("body3").expect_err("data2");
        })
        .await;

        // stream 5 went negative, so release back to 0
        assert_eq!(body5.flow_control().available_capacity(), -100);
        assert_eq!(body5.flow_control().used_capacity(), 100);
        body5
            .flow_control()
            .release_capacity(100)
            .expect("release_capacity");
        conn.drive(yield_once()).await;

        // open up again
        conn.set_initial_window_size(16_384).expect("update16");
        conn.drive(yield_once()).await;

        // get stream 5 data after opening up
        conn.drive(async {
            data(&mut body5, "body5 data2").await;
            data(&mut body5, "body5 data3").await;
            assert!(!body3.is_end_stream());
        })
        .await;

        conn.await.expect("client")
    };

    join(srv, client).await;
}

#[tokio::test]
async fn server_target_window_size() {
    h2_support::trace_init!();
    let (io, mut client) = mock::new();

    let client = async move {
        let settings = client.assert_server_handshake().await;
        assert_default_settings!(settings);
        client
            .recv_frame(frames::window_update(0, (2 << 20) - 65_535))
            .await;
    };
    let srv = async move {
        let mut conn = server::handshake(io).await.unwrap();
        conn.set_target_window_size(2 << 20);
        conn.next().await;
    };

    join(srv, client).await;
}

#[tokio::test]
async fn recv_settings_increase_window_size_after_using_some() {
    // See https://github.com/hyperium/h2/issues/208
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let new_win_size = 16_384 * 4; // 1 bigger than default
    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        srv.recv_frame(frames::data(1, vec![0; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16_384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16_383])).await;
        srv.send_frame(frames::settings().initial_window_size(new_win_size as u32))
            .await;
        srv.recv_frame(frames::settings_ack()).await;
        srv.send_frame(frames::window_update(0, 1)).await;
        srv.recv_frame(frames::data(1, vec![0; 1]).eos()).await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method("POST")
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();
        let (resp, mut req_body) = client.send_request(request, false).unwrap();
        req_body
            .send_data(vec![0; new_win_size].into(), true)
            .unwrap();
        let _res = conn.drive(resp).await.expect("response");
        conn.await.expect("client");
    };

    join(srv, client).await;
}

#[tokio::test]
async fn reserve_capacity_after_peer_closes() {
    // See https://github.com/hyperium/h2/issues/300
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://http2.akamai.com/"))
            .await;
        // close connection suddenly
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method("POST")
            .uri("https://http2.akamai.com/")
            .body(())
            .unwrap();
        let (resp, mut req_body) = client.send_request(request, false).unwrap();
        conn.drive(async move {
            let result = resp.await;
            assert!(result.is_err());
        })
        .await;
        // As stated in #300, this would panic because the connection
        // had already been closed.
        req_body.reserve_capacity(1);
        conn.await.expect("client");
    };

    join(srv, client).await;
}

#[tokio::test]
async fn reset_stream_waiting_for_capacity() {
    // This tests that receiving a reset on a stream that has some available
    // connection-level window reassigns that window to another stream.
    h2_support::trace_init!();

    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("GET", "http://example.com/"))
            .await;
        srv.recv_frame(frames::headers(3).request("GET", "http://example.com/"))
            .await;
        srv.recv_frame(frames::headers(5).request("GET", "http://example.com/"))
            .await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16383]).eos()).await;
        srv.send_frame(frames::headers(1).response(200)).await;
        // Assign enough connection window for stream 3...
        srv.send_frame(frames::window_update(0, 1)).await;
        // but then reset it.
        srv.send_frame(frames::reset(3)).await;
        // 5 should use that window instead.
        srv.recv_frame(frames::data(5, vec![0; 1]).eos()).await;
        srv.send_frame(frames::headers(5).response(200)).await;
    };
    fn request() -> Request<()> {
        Request::builder()
            .uri("http://example.com/")
            .body(())
            .unwrap()
    }

    let client = async move {
        let (mut client, conn) = client::Builder::new()
            .handshake::<_, Bytes>(io)
            .await
            .expect("handshake");
        let (req1, mut send1) = client.send_request(request(), false).unwrap();
        let (req2, mut send2) = client.send_request(request(), false).unwrap();
        let (req3, mut send3) = client.send_request(request(), false).unwrap();
        // Use up the connection window.
        send1.send_data(vec![0; 65535].into(), true).unwrap();
        // Queue up for more connection window.
        send2.send_data(vec![0; 1].into(), true).unwrap();
        // .. and even more.
        send3.send_data(vec![0; 1].into(), true).unwrap();
        join4(
            async move { conn.await.expect("h2") },
            async move { req1.await.expect("req1") },
            async move { req2.await.unwrap_err() },
            async move { req3.await.expect("req3") },
        )
        .await;
    };

    join(srv, client).await;
}

// Regression test for https://github.com/hyperium/h2/pull/893
#[tokio::test]
async fn reserve_capacity_then_cancel_does_not_leak() {
    for explicit_reset in [true, false] {
        let (io, mut srv) = mock::new();

        let srv = async move {
            let _ = srv.assert_client_handshake().await;
            srv.recv_frame(frames::headers(1).request("POST", "https://example.com/"))
                .await;
            if !explicit_reset {
                srv.send_frame(frames::headers(1).response(200)).await;
            }
            let mut data_bytes = 0;
            loop {
                let frame = srv.next().await.unwrap().unwrap();
                match frame {
                    h2::frame::Frame::Reset(_) | h2::frame::Frame::Headers(_) => {}
                    h2::frame::Frame::Data(d) => {
                        data_bytes += d.payload().len();
                        if d.is_end_stream() {
                            break;
                        }
                    }
                    other => panic!("unexpected: {:?}", other),
                }
            }
            assert_eq!(data_bytes, 65535);
            srv.send_frame(frames::headers(3).response(200).eos()).await;
        };

        let client = async move {
            let (mut client, mut conn) = client::handshake(io).await.expect("handshake");
            let request = Request::builder()
                .method(Method::POST)
                .uri("https://example.com/")
                .body(())
                .unwrap();
            let (response, mut stream) = client.send_request(request, false).unwrap();
            stream.reserve_capacity(10);

            if explicit_reset {
                stream.send_reset(Reason::CANCEL);
                drop(stream);
                let err = response.await.unwrap_err();
                assert_eq!(err.reason(), Some(Reason::CANCEL));
            } else {
                let resp = conn.drive(response).await.unwrap();
                assert_eq!(resp.status(), StatusCode::OK);
                drop(stream);
                drop(resp);
            }

            // Open a second stream and send a full window of data. If capacity
            // leaked, this would stall.
            let request2 = Request::builder()
                .method(Method::POST)
                .uri("https://example.com/")
                .body(())
                .unwrap();
            let (response2, mut stream2) = client.send_request(request2, false).unwrap();
            stream2.send_data(vec![0; 65535].into(), true).unwrap();
            join(async move { conn.await.expect("conn") }, async move {
                let resp = response2.await.expect("resp");
                assert_eq!(resp.status(), StatusCode::OK);
                drop(client);
            })
            .await;
        };

        join(srv, client).await;
    }
}

#[tokio::test]
async fn scheduled_reset_with_buffered_data_sends_rst() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv
            .assert_client_handshake_with_settings(frames::settings().initial_window_size(0))
            .await;
        assert_default_settings!(settings);

        srv.recv_frame(frames::headers(1).request("POST", "https://example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;

        tokio::time::timeout(
            Duration::from_secs(5),
            srv.recv_frame(frames::reset(1).cancel()),
        )
        .await
        .expect("RST_STREAM not received within 5s");
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://example.com/")
            .body(())
            .unwrap();
        let (response, mut stream) = client.send_request(request, false).unwrap();
        let resp = conn.drive(response).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        // Buffer data that can never be sent (zero stream window).
        stream.send_data(vec![0u8; 10].into(), false).unwrap();
        // Drop both handles to schedule a CANCEL reset.
        drop(stream);
        drop(resp);
        conn.await.unwrap();
    };

    join(srv, client).await;
}

#[tokio::test]
async fn scheduled_reset_with_excess_buffered_data_is_cleaned_up() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let _ = srv.assert_client_handshake().await;
        srv.recv_frame(frames::headers(1).request("POST", "https://example.com/"))
            .await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16383])).await;
        srv.send_frame(frames::window_update(0, 65535)).await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::reset(1).cancel()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://example.com/")
            .body(())
            .unwrap();
        let (response, mut stream) = client.send_request(request, false).unwrap();
        // Buffer the full window plus excess. The first 65535 bytes
        // are sent, and the remaining 1000 are stuck.
        stream
            .send_data(vec![0u8; 65535 + 1000].into(), false)
            .unwrap();
        let resp = conn.drive(response).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        drop(stream);
        drop(resp);
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), conn)
            .await
            .expect("connection did not shut down within 5s")
            .unwrap();
    };

    join(srv, client).await;
}

#[tokio::test]
async fn data_padding() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let mut body = Vec::new();
    body.push(5);
    body.extend_from_slice(&[b'z'; 100][..]);
    body.extend_from_slice(&[b'0'; 5][..]);

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(
            frames::headers(1)
                .request("GET", "http://example.com/")
                .eos(),
        )
        .await;
        srv.send_frame(
            frames::headers(1)
                .response(200)
                .field("content-length", 100),
        )
        .await;
        srv.send_frame(frames::data(1, body).padded().eos()).await;
    };
    let h2 = async move {
        let (mut client, conn) = client::handshake(io).await.expect("handshake");
        let request = Request::builder()
            .method(Method::GET)
            .uri("http://example.com/")
            .body(())
            .unwrap();

        // first request is allowed
        let (response, _) = client.send_request(request, true).unwrap();
        let fut = async move {
            let resp = response.await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            let body = resp.into_body();
            let bytes = util::concat(body).await.unwrap();
            assert_eq!(bytes.len(), 100);
        };
        join(async move { conn.await.expect("client") }, fut).await;
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn poll_capacity_after_send_data_and_reserve() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv
            .assert_client_handshake_with_settings(frames::settings().initial_window_size(5))
            .await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::data(1, &b"abcde"[..])).await;
        srv.send_frame(frames::window_update(1, 5)).await;
        srv.recv_frame(frames::data(1, &b""[..]).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        stream.send_data("abcde".into(), false).unwrap();

        stream.reserve_capacity(5);

        // Initial window size was 5 so current capacity is 0 even if we just reserved.
        assert_eq!(stream.capacity(), 0);

        // This will panic if there is a bug causing h2 to return Ok(0) from poll_capacity.
        let mut stream = h2.drive(util::wait_for_capacity(stream, 5)).await;

        stream.send_data("".into(), true).unwrap();

        // Wait for the connection to close
        h2.await.unwrap();
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn poll_capacity_after_send_data_and_reserve_with_max_send_buffer_size() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv
            .assert_client_handshake_with_settings(frames::settings().initial_window_size(10))
            .await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::data(1, &b"abcde"[..])).await;
        srv.send_frame(frames::window_update(1, 10)).await;
        srv.recv_frame(frames::data(1, &b""[..]).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::Builder::new()
            .max_send_buffer_size(5)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        stream.send_data("abcde".into(), false).unwrap();

        stream.reserve_capacity(5);

        // Initial window size was 10 but with a max send buffer size of 10 in the client,
        // so current capacity is 0 even if we just reserved.
        assert_eq!(stream.capacity(), 0);

        // This will panic if there is a bug causing h2 to return Ok(0) from poll_capacity.
        let mut stream = h2.drive(util::wait_for_capacity(stream, 5)).await;

        stream.send_data("".into(), true).unwrap();

        // Wait for the connection to close
        h2.await.unwrap();
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn max_send_buffer_size_overflow() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;
        srv.recv_frame(frames::data(1, &[0; 10][..])).await;
        srv.recv_frame(frames::data(1, &[][..]).eos()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::Builder::new()
            .max_send_buffer_size(5)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        let response = conn.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        assert_eq!(stream.capacity(), 0);
        stream.reserve_capacity(10);
        assert_eq!(
            stream.capacity(),
            5,
            "polled capacity not over max buffer size"
        );

        stream.send_data([0; 10][..].into(), false).unwrap();

        stream.reserve_capacity(15);
        assert_eq!(
            stream.capacity(),
            0,
            "now with buffered over the max, don't overflow"
        );
        stream.send_data([0; 0][..].into(), true).unwrap();

        // Wait for the connection to close
        conn.await.unwrap();
    };

    join(srv, client).await;
}

#[tokio::test]
async fn max_send_buffer_size_poll_capacity_wakes_task() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;
        srv.recv_frame(frames::data(1, &[0; 5][..])).await;
        srv.recv_frame(frames::data(1, &[0; 5][..])).await;
        srv.recv_frame(frames::data(1, &[0; 5][..])).await;
        srv.recv_frame(frames::data(1, &[0; 5][..])).await;
        srv.recv_frame(frames::data(1, &[][..]).eos()).await;
    };

    let client = async move {
        let (mut client, mut conn) = client::Builder::new()
            .max_send_buffer_size(5)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        let response = conn.drive(response).await.unwrap();

        assert_eq!(response.status(), StatusCode::OK);

        assert_eq!(stream.capacity(), 0);
        const TO_SEND: usize = 20;
        stream.reserve_capacity(TO_SEND);
        assert_eq!(
            stream.capacity(),
            5,
            "polled capacity not over max buffer size"
        );

        let t1 = tokio::spawn(async move {
            let mut sent = 0;
            let buf = [0; TO_SEND];
            loop {
                match poll_fn(|cx| stream.poll_capacity(cx)).await {
                    None => panic!("no cap"),
                    Some(Err(e)) => panic!("cap error: {:?}", e),
                    Some(Ok(cap)) => {
                        stream
                            .send_data(buf[sent..(sent + cap)].to_vec().into(), false)
                            .unwrap();
                        sent += cap;
                        if sent >= TO_SEND {
                            break;
                        }
                    }
                }
            }
            stream.send_data(Bytes::new(), true).unwrap();
        });

        // Wait for the connection to close
        conn.await.unwrap();
        t1.await.unwrap();
    };

    join(srv, client).await;
}

#[tokio::test]
async fn poll_capacity_wakeup_after_window_update() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let srv = async move {
        let settings = srv
            .assert_client_handshake_with_settings(frames::settings().initial_window_size(10))
            .await;
        assert_default_settings!(settings);
        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;
        srv.recv_frame(frames::data(1, &b"abcde"[..])).await;
        srv.send_frame(frames::window_update(1, 5)).await;
        srv.send_frame(frames::window_update(1, 5)).await;
        srv.recv_frame(frames::data(1, &b"abcde"[..])).await;
        srv.recv_frame(frames::data(1, &b""[..]).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::Builder::new()
            .max_send_buffer_size(5)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        stream.send_data("abcde".into(), false).unwrap();

        stream.reserve_capacity(10);
        assert_eq!(stream.capacity(), 0);

        let mut stream = h2.drive(util::wait_for_capacity(stream, 5)).await;
        h2.drive(idle_ms(10)).await;
        stream.send_data("abcde".into(), false).unwrap();

        stream.reserve_capacity(5);
        assert_eq!(stream.capacity(), 0);

        // This will panic if there is a bug causing h2 to return Ok(0) from poll_capacity.
        let mut stream = h2.drive(util::wait_for_capacity(stream, 5)).await;

        stream.send_data("".into(), true).unwrap();

        // Wait for the connection to close
        h2.await.unwrap();
    };

    join(srv, h2).await;
}

#[tokio::test]
async fn window_size_does_not_underflow() {
    h2_support::trace_init!();
    let (io, mut client) = mock::new();

    let client = async move {
        let settings = client.assert_server_handshake().await;
        assert_default_settings!(settings);

        // Invalid HEADERS frame (missing mandatory fields).
        client.send_bytes(&[0, 0, 0, 1, 5, 0, 0, 0, 1]).await;

        client
            .send_frame(frames::settings().initial_window_size(1329018135))
            .await;

        client
            .send_frame(frames::settings().initial_window_size(3809661))
            .await;

        client
            .send_frame(frames::settings().initial_window_size(1467177332))
            .await;

        client
            .send_frame(frames::settings().initial_window_size(3844989))
            .await;
    };

    let srv = async move {
        let builder = server::Builder::new();
        let mut srv = builder.handshake::<_, Bytes>(io).await.expect("handshake");

        poll_fn(move |cx| srv.poll_closed(cx)).await.unwrap();
    };

    join(client, srv).await;
}

#[tokio::test]
async fn reclaim_reserved_capacity() {
    use futures::channel::oneshot;

    h2_support::trace_init!();

    let (io, mut srv) = mock::new();
    let (depleted_tx, depleted_rx) = oneshot::channel();

    let mock = async move {
        let settings = srv.assert_client_handshake().await;
        assert_default_settings!(settings);

        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(1).response(200)).await;

        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16384])).await;
        srv.recv_frame(frames::data(1, vec![0; 16383])).await;
        depleted_tx.send(()).unwrap();

        // By now, this peer's connection window is completely depleted.

        srv.recv_frame(frames::headers(3).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::headers(3).response(200)).await;

        srv.recv_frame(frames::reset(1).cancel()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();

        let mut depleting_stream = {
            let request = Request::builder()
                .method(Method::POST)
                .uri("https://www.example.com/")
                .body(())
                .unwrap();

            let (resp, stream) = client.send_request(request, false).unwrap();

            {
                let resp = h2.drive(resp).await.unwrap();
                assert_eq!(resp.status(), StatusCode::OK);
            }

            stream
        };

        depleting_stream
            .send_data(vec![0; 65535].into(), false)
            .unwrap();
        h2.drive(depleted_rx).await.unwrap();

        // By now, the client knows it has completely depleted the server's
        // connection window.

        depleting_stream.reserve_capacity(1);

        let mut starved_stream = {
            let request = Request::builder()
                .method(Method::POST)
                .uri("https://www.example.com/")
                .body(())
                .unwrap();

            let (resp, stream) = client.send_request(request, false).unwrap();

            {
                let resp = h2.drive(resp).await.unwrap();
                assert_eq!(resp.status(), StatusCode::OK);
            }

            stream
        };

        // The following call puts starved_stream in pending_send, as the
        // server's connection window is completely empty.
        starved_stream.send_data(vec![0; 1].into(), false).unwrap();

        // This drop should change nothing, as it didn't actually reserve
        // any available connection window, only requested it.
        drop(depleting_stream);

        h2.await.unwrap();
    };

    join(mock, h2).await;
}

#[tokio::test]
async fn capacity_not_assigned_to_unopened_streams() {
    h2_support::trace_init!();

    let (io, mut srv) = mock::new();

    let mock = async move {
        let mut settings = frame::Settings::default();
        settings.set_max_concurrent_streams(Some(1));
        let settings = srv.assert_client_handshake_with_settings(settings).await;
        assert_default_settings!(settings);

        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.recv_frame(frames::data(1, "hello")).await;
        srv.recv_frame(frames::data(1, "world").eos()).await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;

        srv.recv_frame(frames::headers(3).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::window_update(
            0,
            frame::DEFAULT_INITIAL_WINDOW_SIZE + 10,
        ))
        .await;
        srv.recv_frame(frames::reset(3).cancel()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response1, mut stream1) = client.send_request(request.clone(), false).unwrap();
        stream1.send_data("hello".into(), false).unwrap();
        let (_, mut stream2) = client.send_request(request, false).unwrap();
        stream2.reserve_capacity(frame::DEFAULT_INITIAL_WINDOW_SIZE as usize);
        stream1.send_data("world".into(), true).unwrap();
        h2.drive(response1).await.unwrap();
        let stream2 = h2
            .drive(util::wait_for_capacity(
                stream2,
                frame::DEFAULT_INITIAL_WINDOW_SIZE as usize,
            ))
            .await;
        drop(stream2);
        h2.await.unwrap();
    };

    join(mock, h2).await;
}

#[tokio::test]
async fn new_initial_window_size_capacity_not_assigned_to_unopened_streams() {
    h2_support::trace_init!();

    let (io, mut srv) = mock::new();

    let mock = async move {
        let mut settings = frame::Settings::default();
        settings.set_max_concurrent_streams(Some(1));
        settings.set_initial_window_size(Some(10));
        let settings = srv.assert_client_handshake_with_settings(settings).await;
        assert_default_settings!(settings);

        srv.recv_frame(frames::headers(1).request("POST", "https://www.example.com/"))
            .await;
        srv.recv_frame(frames::data(1, "hello")).await;
        srv.send_frame(frames::settings().initial_window_size(frame::DEFAULT_INITIAL_WINDOW_SIZE))
            .await;
        srv.recv_frame(frames::settings_ack()).await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;
        srv.recv_frame(frames::data(1, "world").eos()).await;

        srv.recv_frame(frames::headers(3).request("POST", "https://www.example.com/"))
            .await;
        srv.send_frame(frames::window_update(
            0,
            frame::DEFAULT_INITIAL_WINDOW_SIZE + 10,
        ))
        .await;
        srv.recv_frame(frames::reset(3).cancel()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://www.example.com/")
            .body(())
            .unwrap();

        let (response1, mut stream1) = client.send_request(request.clone(), false).unwrap();
        stream1.send_data("hello".into(), false).unwrap();
        let (_, mut stream2) = client.send_request(request, false).unwrap();
        stream2.reserve_capacity(frame::DEFAULT_INITIAL_WINDOW_SIZE as usize);
        h2.drive(response1).await.unwrap();
        stream1.send_data("world".into(), true).unwrap();
        let stream2 = h2
            .drive(util::wait_for_capacity(
                stream2,
                frame::DEFAULT_INITIAL_WINDOW_SIZE as usize,
            ))
            .await;
        drop(stream2);
        h2.await.unwrap();
    };

    join(mock, h2).await;
}

// ==== abusive window updates ====

#[tokio::test]
async fn too_many_window_update_resets_causes_go_away() {
    h2_support::trace_init!();
    let (io, mut client) = mock::new();

    let client = async move {
        let settings = client.assert_server_handshake().await;
        assert_default_settings!(settings);
        for s in (1..21).step_by(2) {
            client
                .send_frame(
                    frames::headers(s)
                        .request("GET", "https://example.com/")
                        .eos(),
                )
                .await;
            // send a bunch of bad window updates before any headers
            client
                .send_frame(frames::window_update(s, u32::MAX - 2))
                .await;
            client.recv_frame(frames::reset(s).flow_control()).await;
        }

        client
            .send_frame(
                frames::headers(21)
                    .request("GET", "https://example.com/")
                    .eos(),
            )
            .await;
        // send a bunch of bad window updates before any headers
        client
            .send_frame(frames::window_update(21, u32::MAX - 2))
            .await;
        client
            .recv_frame(frames::go_away(21).calm().data("too_many_internal_resets"))
            .await;
    };
    let srv = async move {
        let mut conn = server::Builder::new()
            .max_local_error_reset_streams(Some(10))
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        for _ in (1..21).step_by(2) {
            let (_, _) = conn.next().await.unwrap().unwrap();
        }
        let err = conn.next().await.unwrap().unwrap_err();
        assert!(err.is_go_away());
        assert!(err.is_library());
        assert_eq!(err.reason(), Some(Reason::ENHANCE_YOUR_CALM));
    };

    join(srv, client).await;
}

#[tokio::test]
async fn goaway_ignores_data_but_returns_connection_capacity() {
    h2_support::trace_init!();

    for padded in [false, true] {
        let (io, mut client) = mock::new();

        // Test both with and without padding
        let data = if padded {
            let mut frame = vec![0u8; 16_384];
            frame[0] = 5; // 5 bytes of padding
            frame
        } else {
            vec![0u8; 16_384]
        };

        let client = async move {
            let _ = client.assert_server_handshake().await;

            client
                .send_frame(
                    frames::headers(1)
                        .request("GET", "https://example.com/")
                        .eos(),
                )
                .await;

            // Receive GOAWAY(MAX) + PING from graceful shutdown.
            client.recv_frame(frames::go_away(2147483647)).await;
            client.recv_frame(frames::ping(frame::Ping::SHUTDOWN)).await;

            client
                .recv_frame(frames::headers(1).response(200).eos())
                .await;

            // Stream 3 arrives "in flight" before client processes GOAWAY.
            client
                .send_frame(frames::headers(3).request("POST", "https://example.com/"))
                .await;

            // Complete the graceful shutdown handshake.
            client
                .send_frame(frames::ping(frame::Ping::SHUTDOWN).pong())
                .await;

            // Final GOAWAY(3): streams 1 and 3 are accepted, everything above is rejected.
            client.recv_frame(frames::go_away(3)).await;

            // Stream 5 is above last_stream_id=3; DATA will be ignored,
            // but connection window must still be replenished.
            client
                .send_frame(frames::headers(5).request("POST", "https://example.com/"))
                .await;
            client
                .send_frame(if padded {
                    frames::data(5, &data[..]).padded()
                } else {
                    frames::data(5, &data[..])
                })
                .await;
            client
                .send_frame(if padded {
                    frames::data(5, &data[..]).padded()
                } else {
                    frames::data(5, &data[..])
                })
                .await;

            client
                .recv_frame(frames::window_update(0, 16_384 * 2))
                .await;

            client.send_frame(frames::data(3, "").eos()).await;

            client
                .recv_frame(frames::headers(3).response(200).eos())
                .await;

            client.recv_eof().await;
        };

        let srv = async move {
            let mut srv = server::handshake(io).await.expect("handshake");

            let (_req, mut stream) = srv.next().await.unwrap().unwrap();
            srv.graceful_shutdown();
            let rsp = http::Response::builder().status(200).body(()).unwrap();
            stream.send_response(rsp, true).unwrap();

            let (req, mut stream) = srv.next().await.unwrap().unwrap();
            let body = req.into_parts().1;

            let body = async move {
                let buf = util::concat(body).await.unwrap();
                assert!(buf.is_empty());
                let rsp = http::Response::builder().status(200).body(()).unwrap();
                stream.send_response(rsp, true).unwrap();
            };

            let mut srv = Box::pin(async move {
                assert!(srv.next().await.is_none(), "unexpected stream after GOAWAY");
            });
            srv.drive(body).await;
            srv.await;
        };

        join(client, srv).await;
    }
}

/// When the library sends RST_STREAM (e.g., due to a WINDOW_UPDATE
/// overflow), `poll_capacity` and `poll_reset` must be notified.
/// Regression test for https://github.com/hyperium/h2/pull/897
#[tokio::test]
async fn poll_capacity_woken_on_library_reset() {
    h2_support::trace_init!();

    for polling_capacity in [true, false] {
        let (io, mut srv) = mock::new();
        let (client_done_tx, client_done_rx) = oneshot::channel::<()>();

        let srv = async move {
            let settings = srv.assert_client_handshake().await;
            assert_default_settings!(settings);

            srv.recv_frame(frames::headers(1).request("POST", "https://example.com/"))
                .await;

            // 2. Receive the 65535-byte initial window (4 DATA frames at default MAX_FRAME_SIZE).
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_383])).await;

            // 3. Grow stream window to 2^31-1, to set up for overflow later.
            srv.send_frame(frames::window_update(0, 65535)).await;
            srv.send_frame(frames::window_update(1, 2_147_483_647))
                .await;

            // 5. Receive the next 65535 bytes (connection-limited).
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_384])).await;
            srv.recv_frame(frames::data(1, vec![0u8; 16_383])).await;

            // 6. Overflow: stream window 2147418112 + 65536 = 2^31 > 2^31-1.
            srv.send_frame(frames::window_update(1, 65536)).await;

            // 8. Receive the RST_STREAM(FLOW_CONTROL_ERROR) sent by the library.
            srv.recv_frame(frames::reset(1).flow_control()).await;

            // Wait for the client to finish. Otherwise Recv::recv_eof hides
            // the missing waker.
            let _ = client_done_rx.await;
        };

        let client = async move {
            let (mut client, conn) = client::handshake(io).await.unwrap();
            tokio::spawn(async move {
                // Separate task so the polled method won't resolve unless notify_send wakes it.
                let _ = conn.await;
            });

            let request = Request::builder()
                .method(Method::POST)
                .uri("https://example.com/")
                .body(())
                .unwrap();
            let (_resp, mut stream) = client.send_request(request, false).unwrap();

            // 1. Exhaust the initial 65535-byte window.
            stream.reserve_capacity(65535);
            let cap = poll_fn(|cx| stream.poll_capacity(cx))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(cap, 65535);
            stream.send_data(vec![0u8; cap].into(), false).unwrap();

            // 4. poll_capacity blocks until 3. replenishes windows, then send again.
            stream.reserve_capacity(65535);
            let cap = poll_fn(|cx| stream.poll_capacity(cx))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(cap, 65535);
            stream.send_data(vec![0u8; cap].into(), false).unwrap();

            // 7. The polled method must be woken by the reset from 6.
            if polling_capacity {
                stream.reserve_capacity(65535);
                let result = tokio::time::timeout(
                    Duration::from_secs(1),
                    poll_fn(|cx| stream.poll_capacity(cx)).wakened(),
                )
                .await
                .expect("poll_capacity was not woken");
                assert!(result.is_none());
            } else {
                let reason = tokio::time::timeout(
                    Duration::from_secs(1),
                    poll_fn(|cx| stream.poll_reset(cx)).wakened(),
                )
                .await
                .expect("poll_reset was not woken")
                .unwrap();
                assert_eq!(reason, Reason::FLOW_CONTROL_ERROR);
            }

            let _ = client_done_tx.send(());
        };

        join(srv, client).await;
    }
}

/// A WINDOW_UPDATE followed by a SETTINGS decrease can cancel each other out, resulting
/// in zero capacity. `poll_capacity` must return `Pending` (not `Ready(Ok(0))`) in that case.
#[tokio::test]
async fn poll_capacity_window_update_settings_race() {
    h2_support::trace_init!();
    let (io, mut srv) = mock::new();

    let mut settings = frame::Settings::default();
    settings.set_initial_window_size(Some(0));

    let srv = async move {
        let settings = srv.assert_client_handshake_with_settings(settings).await;
        assert_default_settings!(settings);

        srv.recv_frame(frames::headers(1).request("POST", "https://example.com/"))
            .await;
        idle_ms(50).await;

        // Give stream capacity then immediately take it back
        srv.send_frame(frames::window_update(1, 1024)).await;
        srv.send_frame(frames::settings().initial_window_size(0))
            .await;
        srv.recv_frame(frames::settings_ack()).await;

        // Now give real, usable capacity
        srv.send_frame(frames::window_update(0, 11)).await;
        srv.send_frame(frames::window_update(1, 11)).await;
        srv.recv_frame(frames::data(1, "hello world").eos()).await;
        srv.send_frame(frames::headers(1).response(200).eos()).await;
    };

    let h2 = async move {
        let (mut client, mut h2) = client::handshake(io).await.unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri("https://example.com/")
            .body(())
            .unwrap();

        let (response, mut stream) = client.send_request(request, false).unwrap();
        stream.reserve_capacity(11);

        // `wait_for_capacity` panics if `poll_capacity` ever returns `Ok(0)`
        let mut stream = h2.drive(util::wait_for_capacity(stream, 11)).await;
        stream.send_data("hello world".into(), true).unwrap();

        let response = h2.drive(response).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);

        h2.await.unwrap();
    };

    join(srv, h2).await;
}
