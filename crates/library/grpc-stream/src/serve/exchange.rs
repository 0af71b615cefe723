//! One HTTP/2 stream of a connection, from the request to the last frame of
//! the answer, polled by the connection's own task (see [`super`]): the
//! service's answer is awaited, its headers sent, and its body written as
//! the client's window allows, as hyper's server did in a task of its own.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream, server::SendResponse};
use http::Response;
use http_body::{Body, Frame};

use super::BoxError;

/// The service's answer to one request, once called.
pub(super) type Answer =
    Pin<Box<dyn Future<Output = Result<Response<tonic::body::Body>, BoxError>> + Send>>;

/// Where one stream is.
pub(super) enum Exchange {
    /// Waiting for the service's answer.
    Answering {
        answer: Answer,
        respond: SendResponse<Bytes>,
    },
    /// Headers sent; writing the body.
    Sending {
        body: tonic::body::Body,
        send: SendStream<Bytes>,
    },
    /// Finished: the body ended, or the stream was reset.
    Done,
}

impl Exchange {
    pub(super) fn new(answer: Answer, respond: SendResponse<Bytes>) -> Self {
        Self::Answering { answer, respond }
    }
}

impl Future for Exchange {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            match this {
                Self::Answering { answer, respond } => {
                    let response = match answer.as_mut().poll(cx) {
                        Poll::Ready(Ok(response)) => response,
                        Poll::Ready(Err(error)) => {
                            tracing::debug!(%error, "gRPC service failed; resetting the stream");
                            respond.send_reset(Reason::INTERNAL_ERROR);
                            return Poll::Ready(());
                        }
                        Poll::Pending => {
                            // The client gave up before the answer.
                            return match respond.poll_reset(cx) {
                                Poll::Ready(_) => Poll::Ready(()),
                                Poll::Pending => Poll::Pending,
                            };
                        }
                    };
                    let (parts, body) = response.into_parts();
                    let head = Response::from_parts(parts, ());
                    if body.is_end_stream() {
                        // Trailers-only (a refusal): the headers end the stream.
                        if let Err(error) = respond.send_response(head, true) {
                            tracing::debug!(%error, "sending a response failed");
                        }
                        return Poll::Ready(());
                    }
                    match respond.send_response(head, false) {
                        Ok(send) => *this = Self::Sending { body, send },
                        Err(error) => {
                            tracing::debug!(%error, "sending a response failed");
                            respond.send_reset(Reason::INTERNAL_ERROR);
                            return Poll::Ready(());
                        }
                    }
                }
                Self::Sending { body, send } => {
                    ready!(pipe(body, send, cx));
                    *this = Self::Done;
                    return Poll::Ready(());
                }
                Self::Done => return Poll::Ready(()),
            }
        }
    }
}

/// Writes `body` to `send` until it ends, the client resets the stream or
/// the connection goes. A frame is taken from the body only once the
/// client's window has room, so a client that stops reading holds the body
/// still (a stream of shared state then skips to the newest) instead of
/// making the server buffer for it.
fn pipe(
    body: &mut tonic::body::Body,
    send: &mut SendStream<Bytes>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        send.reserve_capacity(1);
        if send.capacity() == 0 {
            loop {
                match ready!(send.poll_capacity(cx)) {
                    Some(Ok(0)) => {}
                    Some(Ok(_)) => break,
                    Some(Err(_)) | None => return Poll::Ready(()),
                }
            }
        } else if send.poll_reset(cx).is_ready() {
            return Poll::Ready(());
        }
        let frame = match ready!(Pin::new(&mut *body).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => {
                tracing::debug!(%error, "a response body failed; resetting the stream");
                send.send_reset(Reason::INTERNAL_ERROR);
                return Poll::Ready(());
            }
            None => {
                // Ended with neither an end-of-stream DATA nor trailers.
                let _ = send.send_data(Bytes::new(), true);
                return Poll::Ready(());
            }
        };
        match frame.into_data() {
            Ok(data) => {
                let end = body.is_end_stream();
                if send.send_data(data, end).is_err() || end {
                    return Poll::Ready(());
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    send.reserve_capacity(0);
                    let _ = send.send_trailers(trailers);
                    return Poll::Ready(());
                }
            }
        }
    }
}

/// A request's body as the services read it: h2's stream, with the window
/// given back as each chunk is read.
pub(super) struct RecvBody(pub(super) RecvStream);

impl Body for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let recv = &mut self.0;
        if !recv.is_end_stream() {
            match ready!(recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => {}
            }
        }
        Poll::Ready(match ready!(recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Some(Ok(Frame::trailers(trailers))),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_slot_stays_a_few_pointers() {
        // Every open stream holds one, inside the connection's set (with
        // the set's own six words): what a task per stream used to cost.
        let size = std::mem::size_of::<Exchange>();
        assert!(size <= 48, "{size} bytes");
    }
}
