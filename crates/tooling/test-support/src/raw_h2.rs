//! A deliberately bad HTTP/2 client: it writes frames itself, so it can
//! do what well-behaved clients (h2, tonic, the proxy) never do: open more
//! streams than the server's `SETTINGS_MAX_CONCURRENT_STREAMS`, send half a
//! preface, or stop reading. It speaks just enough HTTP/2 for gRPC
//! requests (literal HPACK headers, no Huffman) and reports what the server
//! sends as [`Event`]s. SETTINGS and PING frames are acknowledged, and
//! received DATA is given back as connection window, so the server can
//! keep writing.

use std::{io, net::SocketAddr, sync::Arc};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpStream, tcp::OwnedWriteHalf},
    sync::{Mutex, mpsc},
};

/// The HTTP/2 client connection preface.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// `SETTINGS_MAX_CONCURRENT_STREAMS`.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_ENABLE_PUSH: u16 = 0x2;

/// The `REFUSED_STREAM` error code of `RST_STREAM`.
pub const REFUSED_STREAM: u32 = 0x7;

/// `STREAM_CLOSED`: what a server answers to frames on a stream it reset
/// (e.g. the request DATA sent right after a refused stream's HEADERS).
pub const STREAM_CLOSED: u32 = 0x5;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// What the server sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Its SETTINGS (identifier, value).
    Settings(Vec<(u16, u32)>),
    /// Response headers (or trailers, with `end_stream`) on a stream (the
    /// block is not decoded).
    Headers { stream: u32, end_stream: bool },
    /// Response data on a stream.
    Data {
        stream: u32,
        len: usize,
        end_stream: bool,
    },
    /// The server reset a stream with this error code.
    Reset { stream: u32, code: u32 },
    /// The server is closing the connection.
    GoAway { last_stream: u32, code: u32 },
    /// The connection ended (EOF or an error).
    Closed(String),
}

/// The writing side of a raw HTTP/2 connection; events arrive on the
/// receiver [`RawH2::connect`] returns.
pub struct RawH2 {
    writer: Arc<Mutex<OwnedWriteHalf>>,
    next_stream: u32,
    /// The reading task, which owns the read half: aborted on drop, so
    /// dropping a `RawH2` closes the connection.
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for RawH2 {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Frame header: length (24 bits), type, flags, stream id.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A header block of literals without indexing (RFC 7541 §6.2.2).
pub fn header_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.push(0x00);
        hpack_int(&mut out, 0, 7, name.len());
        out.extend_from_slice(name.as_bytes());
        hpack_int(&mut out, 0, 7, value.len());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A gRPC length-prefixed message.
pub fn grpc_message(encoded: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(
        &u32::try_from(encoded.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(encoded);
    out
}

impl RawH2 {
    /// Connects, sends the preface and SETTINGS (1 MiB stream windows, no
    /// push) and a large connection window, and starts reading.
    pub async fn connect(addr: SocketAddr) -> io::Result<(Self, mpsc::UnboundedReceiver<Event>)> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (mut read, write) = tcp.into_split();
        let writer = Arc::new(Mutex::new(write));
        let mut hello = PREFACE.to_vec();
        let mut settings = Vec::new();
        for (id, value) in [
            (SETTINGS_ENABLE_PUSH, 0u32),
            (SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20),
        ] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&value.to_be_bytes());
        }
        hello.extend(frame(SETTINGS, 0, 0, &settings));
        hello.extend(frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes()));
        writer.lock().await.write_all(&hello).await?;

        let (tx, rx) = mpsc::unbounded_channel();
        let acks = writer.clone();
        let reader = tokio::spawn(async move {
            let ended = loop {
                let mut head = [0u8; 9];
                if let Err(error) = read.read_exact(&mut head).await {
                    break error.to_string();
                }
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                let (kind, flags) = (head[3], head[4]);
                let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                let mut payload = vec![0u8; len];
                if let Err(error) = read.read_exact(&mut payload).await {
                    break error.to_string();
                }
                let (event, reply) = match kind {
                    SETTINGS if flags & ACK == 0 => {
                        let settings = payload
                            .chunks_exact(6)
                            .map(|c| {
                                (
                                    u16::from_be_bytes([c[0], c[1]]),
                                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                                )
                            })
                            .collect();
                        (
                            Some(Event::Settings(settings)),
                            frame(SETTINGS, ACK, 0, &[]),
                        )
                    }
                    PING if flags & ACK == 0 => (None, frame(PING, ACK, 0, &payload)),
                    HEADERS => (
                        Some(Event::Headers {
                            stream,
                            end_stream: flags & END_STREAM != 0,
                        }),
                        Vec::new(),
                    ),
                    DATA => {
                        // Give the bytes back to the connection window.
                        let update = u32::try_from(len).unwrap_or(0);
                        let reply = if update > 0 {
                            frame(WINDOW_UPDATE, 0, 0, &update.to_be_bytes())
                        } else {
                            Vec::new()
                        };
                        (
                            Some(Event::Data {
                                stream,
                                len,
                                end_stream: flags & END_STREAM != 0,
                            }),
                            reply,
                        )
                    }
                    RST_STREAM if payload.len() >= 4 => (
                        Some(Event::Reset {
                            stream,
                            code: u32::from_be_bytes([
                                payload[0], payload[1], payload[2], payload[3],
                            ]),
                        }),
                        Vec::new(),
                    ),
                    GOAWAY if payload.len() >= 8 => (
                        Some(Event::GoAway {
                            last_stream: u32::from_be_bytes([
                                payload[0], payload[1], payload[2], payload[3],
                            ]) & 0x7fff_ffff,
                            code: u32::from_be_bytes([
                                payload[4], payload[5], payload[6], payload[7],
                            ]),
                        }),
                        Vec::new(),
                    ),
                    _ => (None, Vec::new()),
                };
                if !reply.is_empty() {
                    let _ = acks.lock().await.write_all(&reply).await;
                }
                if let Some(event) = event
                    && tx.send(event).is_err()
                {
                    return;
                }
            };
            let _ = tx.send(Event::Closed(ended));
        });
        Ok((
            Self {
                writer,
                next_stream: 1,
                reader,
            },
            rx,
        ))
    }

    /// Opens a gRPC call: `POST path` with `body` (a whole gRPC message,
    /// see [`grpc_message`]) and END_STREAM. Returns the stream id.
    pub async fn open_grpc(&mut self, authority: &str, path: &str, body: &[u8]) -> io::Result<u32> {
        let stream = self.next_stream;
        self.next_stream += 2;
        let block = header_block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]);
        let mut out = frame(HEADERS, END_HEADERS, stream, &block);
        out.extend(frame(DATA, END_STREAM, stream, body));
        self.writer.lock().await.write_all(&out).await?;
        Ok(stream)
    }

    /// Writes raw bytes on the connection.
    pub async fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        self.writer.lock().await.write_all(bytes).await
    }
}

/// The value of `id` in a SETTINGS list.
pub fn setting(settings: &[(u16, u32)], id: u16) -> Option<u32> {
    settings
        .iter()
        .rev()
        .find(|(i, _)| *i == id)
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_use_their_prefix() {
        let mut out = Vec::new();
        hpack_int(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        hpack_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
    }

    #[test]
    fn frames_have_a_nine_byte_header() {
        let f = frame(HEADERS, END_HEADERS, 3, b"abc");
        assert_eq!(f[..9], [0, 0, 3, HEADERS, END_HEADERS, 0, 0, 0, 3]);
        assert_eq!(&f[9..], b"abc");
    }
}
