//! (Meridian's patch) A codec round trip over chaotic I/O, guarding the
//! read and write buffers that `set_release_idle_buffers` frees while empty.
//!
//! One codec writes a seeded random sequence of frames (HEADERS large enough
//! to need CONTINUATION frames, with Huffman-coded values, DATA of every
//! size, SETTINGS, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY) into a pipe
//! whose writes accept a random number of bytes or return `Pending`;
//! another codec reads the pipe through reads of random sizes that return
//! `Pending` at random points and whenever the pipe is empty, and is polled
//! idly between partial frames. The bytes on the wire must equal those a
//! codec writes for the same frames over calm I/O, and the frames read must
//! encode (over calm I/O) to exactly those bytes again.

use super::Codec;
use crate::frame::{self, Frame, Pseudo, Reason, StreamId};

use bytes::Bytes;
use futures_core::Stream;
use futures_sink::Sink;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// xorshift64*: a fixed-seed generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

type Pipe = Rc<RefCell<VecDeque<u8>>>;

/// One end of the pipe: writes land in `pipe` and `wire`, reads come from
/// `pipe`. With `chaos`, both return `Pending` at random and move a random
/// number of bytes.
struct ChaoticIo {
    pipe: Pipe,
    wire: Rc<RefCell<Vec<u8>>>,
    rng: Rng,
    chaos: bool,
}

impl ChaoticIo {
    fn new(pipe: &Pipe, seed: u64, chaos: bool) -> Self {
        ChaoticIo {
            pipe: pipe.clone(),
            wire: Rc::default(),
            rng: Rng(seed),
            chaos,
        }
    }
}

impl AsyncRead for ChaoticIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let mut pipe = this.pipe.borrow_mut();
        if pipe.is_empty() || (this.chaos && this.rng.chance(30)) {
            return Poll::Pending;
        }
        let mut n = pipe.len().min(buf.remaining());
        if this.chaos {
            let cap = if this.rng.chance(20) { 8 } else { 3_000 };
            n = 1 + this.rng.below(n.min(cap));
        }
        let (front, _) = pipe.as_slices();
        let n = n.min(front.len());
        buf.put_slice(&front[..n]);
        pipe.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ChaoticIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.chaos && this.rng.chance(30) {
            return Poll::Pending;
        }
        let mut n = buf.len();
        if this.chaos && n > 0 {
            let cap = if this.rng.chance(20) { 8 } else { 5_000 };
            n = 1 + this.rng.below(n.min(cap));
        }
        this.pipe.borrow_mut().extend(&buf[..n]);
        this.wire.borrow_mut().extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.chaos && self.rng.chance(20) {
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A header value of `len` characters of an alphabet that Huffman codes
/// shorter than the raw string, or any visible character (raw).
fn value(rng: &mut Rng, len: usize) -> HeaderValue {
    let huffman_friendly = rng.chance(70);
    let text: String = (0..len)
        .map(|_| {
            if huffman_friendly {
                b"abcdefghijklmnopqrstuvwxyz0123456789-_"[rng.below(38)] as char
            } else {
                (0x21 + rng.below(0x7e - 0x21) as u8) as char
            }
        })
        .collect();
    HeaderValue::from_str(&text).expect("visible ASCII")
}

fn fields(rng: &mut Rng, large: bool) -> HeaderMap {
    let mut map = HeaderMap::new();
    let count = if large {
        20 + rng.below(30)
    } else {
        rng.below(6)
    };
    for i in 0..count {
        // Names repeat across frames (HPACK's dynamic table indexes them).
        let name = HeaderName::from_bytes(format!("x-field-{}", rng.below(12)).as_bytes())
            .expect("valid name");
        let len = if large {
            200 + rng.below(1_500)
        } else {
            rng.below(60)
        };
        if i % 7 == 3 {
            // The same value again: indexed from the dynamic table.
            if let Some(v) = map.get(&name).cloned() {
                map.append(name, v);
                continue;
            }
        }
        map.append(name, value(rng, len));
    }
    map
}

fn stream(rng: &mut Rng) -> StreamId {
    StreamId::from(1 + 2 * rng.below(5_000) as u32)
}

/// A random frame; HEADERS over 16 KiB need CONTINUATION frames.
fn random_frame(rng: &mut Rng) -> Frame<Bytes> {
    match rng.below(100) {
        0..=24 => {
            let large = rng.chance(35);
            let pseudo = match rng.below(3) {
                0 => Pseudo::request(
                    Method::POST,
                    Uri::from_static("http://dst.linkerd.svc:8086/a.B/Get"),
                    None,
                ),
                1 => Pseudo::response(StatusCode::OK),
                _ => Pseudo::default(),
            };
            let mut headers = frame::Headers::new(stream(rng), pseudo, fields(rng, large));
            if rng.chance(30) {
                headers.set_end_stream();
            }
            headers.into()
        }
        25..=64 => {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(64),
                2 => rng.below(4_096),
                _ => rng.below(frame::DEFAULT_MAX_FRAME_SIZE as usize + 1),
            };
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let mut data = frame::Data::new(stream(rng), Bytes::from(payload));
            data.set_end_stream(rng.chance(20));
            data.into()
        }
        65..=72 => {
            let mut settings = frame::Settings::default();
            settings.set_initial_window_size(Some(rng.below(1 << 20) as u32));
            settings.set_max_concurrent_streams(Some(rng.below(10_000) as u32));
            settings.into()
        }
        73..=82 => {
            let mut payload = [0u8; 8];
            payload.iter_mut().for_each(|b| *b = rng.next() as u8);
            frame::Ping::new(payload).into()
        }
        83..=92 => {
            let id = if rng.chance(30) {
                StreamId::zero()
            } else {
                stream(rng)
            };
            frame::WindowUpdate::new(id, 1 + rng.below(1 << 20) as u32).into()
        }
        93..=97 => frame::Reset::new(stream(rng), Reason::from(rng.below(14) as u32)).into(),
        _ => {
            let debug: Vec<u8> = (0..rng.below(100)).map(|_| rng.next() as u8).collect();
            frame::GoAway::with_debug_data(stream(rng), Reason::NO_ERROR, debug.into()).into()
        }
    }
}

/// The bytes a codec writes for `frames` over calm I/O.
fn calm_encoding(frames: Vec<Frame<Bytes>>) -> Vec<u8> {
    let pipe = Pipe::default();
    let io = ChaoticIo::new(&pipe, 1, false);
    let wire = io.wire.clone();
    let mut codec: Codec<ChaoticIo, Bytes> = Codec::new(io);
    let mut cx = Context::from_waker(Waker::noop());
    for frame in frames {
        assert!(codec.poll_ready(&mut cx).is_ready());
        codec.buffer(frame).expect("calm buffer");
        while Pin::new(&mut codec).poll_flush(&mut cx).is_pending() {}
    }
    let bytes = wire.borrow().clone();
    bytes
}

/// Writes `frames` through chaotic I/O into a pipe that a second codec
/// reads chaotically; returns the bytes written and the frames read.
fn chaotic_round_trip(
    frames: Vec<Frame<Bytes>>,
    seed: u64,
    release_idle: bool,
) -> (Vec<u8>, Vec<Frame<Bytes>>) {
    let mut rng = Rng(seed);
    let pipe = Pipe::default();
    let writer_io = ChaoticIo::new(&pipe, seed ^ 0x5555, true);
    let wire = writer_io.wire.clone();
    let mut writer: Codec<ChaoticIo, Bytes> = Codec::new(writer_io);
    writer.set_release_idle_buffers(release_idle);
    let mut reader: Codec<ChaoticIo, Bytes> =
        Codec::new(ChaoticIo::new(&pipe, seed ^ 0xaaaa, true));
    reader.set_release_idle_buffers(release_idle);
    let mut cx = Context::from_waker(Waker::noop());

    let count = frames.len();
    let mut to_send: VecDeque<Frame<Bytes>> = frames.into();
    let mut received = Vec::new();
    let mut steps = 0usize;
    while received.len() < count {
        steps += 1;
        assert!(steps < 10_000_000, "stuck after {} frames", received.len());
        // Write: buffer a frame when the codec has room, flush at random.
        if !to_send.is_empty() && rng.chance(60) {
            if let Poll::Ready(ready) = writer.poll_ready(&mut cx) {
                ready.expect("poll_ready");
                let frame = to_send.pop_front().expect("a frame to send");
                writer.buffer(frame).expect("buffer");
            }
        }
        if rng.chance(50) || to_send.is_empty() {
            if let Poll::Ready(flushed) = Pin::new(&mut writer).poll_flush(&mut cx) {
                flushed.expect("flush");
            }
        }
        // Read, with idle polls (nothing new in the pipe) in between.
        for _ in 0..rng.below(4) {
            match Pin::new(&mut reader).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => received.push(frame),
                Poll::Ready(Some(Err(e))) => {
                    panic!("read error after {} frames: {e:?}", received.len())
                }
                Poll::Ready(None) => panic!("read end after {} frames", received.len()),
                Poll::Pending => {}
            }
        }
    }
    let bytes = wire.borrow().clone();
    (bytes, received)
}

/// The frames of `seed` (the same every call: the frame types are not
/// `Clone`).
fn frames(seed: u64) -> Vec<Frame<Bytes>> {
    let mut rng = Rng(0x1234_5678_9abc_def0 ^ seed.wrapping_mul(0x9e37_79b9));
    (0..300).map(|_| random_frame(&mut rng)).collect()
}

#[test]
fn round_trip_over_chaotic_io_is_byte_exact() {
    let mut continuations = 0;
    for (seed, release_idle) in (1..=10u64).flat_map(|s| [(s, true), (s, false)]) {
        let expected = calm_encoding(frames(seed));
        continuations += count_continuations(&expected);

        let (wire, received) = chaotic_round_trip(frames(seed), seed, release_idle);
        assert_eq!(wire.len(), expected.len(), "seed {seed}: bytes written");
        assert!(wire == expected, "seed {seed}: the bytes written differ");
        let reencoded = calm_encoding(received);
        assert!(
            reencoded == expected,
            "seed {seed}, release_idle {release_idle}: the frames read differ from those sent"
        );
    }
    // The HEADERS frames over 16 KiB went out as HEADERS + CONTINUATION.
    assert!(
        continuations > 10,
        "only {continuations} CONTINUATION frames"
    );
}

/// CONTINUATION frames (type 0x9) in an encoded frame sequence.
fn count_continuations(mut wire: &[u8]) -> usize {
    let mut n = 0;
    while wire.len() >= frame::HEADER_LEN {
        let len = (usize::from(wire[0]) << 16) | (usize::from(wire[1]) << 8) | usize::from(wire[2]);
        if wire[3] == 0x9 {
            n += 1;
        }
        wire = &wire[frame::HEADER_LEN + len..];
    }
    n
}
