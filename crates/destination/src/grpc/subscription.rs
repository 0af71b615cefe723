//! One guard and one loop for both streaming RPCs: a stream holds its
//! subscription to a shared state (a `Get` group or a profile), sends the
//! current state's frames, then the frames of each change until the state
//! goes away or the server shuts down. Dropping the stream releases the
//! subscription.

use tokio::sync::watch;

use super::FrameStream;
use crate::proto::frames::Frames;

/// A receiver of shared state, and what to do when the stream lets go of it.
struct Subscription<T, R: FnOnce()> {
    rx: Option<watch::Receiver<T>>,
    release: Option<R>,
}

impl<T, R: FnOnce()> Drop for Subscription<T, R> {
    fn drop(&mut self) {
        // Drop the receiver first, so the publisher sees one receiver fewer
        // when `release` looks.
        self.rx.take();
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

/// A stream's position between two wakes.
struct Follow<T, R: FnOnce(), F> {
    sub: Subscription<T, R>,
    /// Turns the newest state into the frames this stream sends next.
    frames_for: F,
    /// Frames being written, and the next one to write.
    frames: Frames,
    next: usize,
    /// Whether the current state was sent (after that, wait for a change).
    started: bool,
    shutdown: watch::Receiver<bool>,
}

/// The stream of `rx`'s states as frames: `frames_for` of the current state
/// first, then of every change it wakes for (a slow stream sees only the
/// newest). It ends when the publisher is dropped or `shutdown` turns true;
/// `release` runs when the stream is dropped.
pub fn follow<T, R, F>(
    rx: watch::Receiver<T>,
    release: R,
    shutdown: watch::Receiver<bool>,
    frames_for: F,
) -> FrameStream
where
    T: Clone + Send + Sync + 'static,
    R: FnOnce() + Send + 'static,
    F: FnMut(T) -> Frames + Send + 'static,
{
    let state = Follow {
        sub: Subscription {
            rx: Some(rx),
            release: Some(release),
        },
        frames_for,
        frames: Frames::from(Vec::new()),
        next: 0,
        started: false,
        shutdown,
    };
    Box::pin(futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(frame) = state.frames.get(state.next) {
                state.next += 1;
                return Some((Ok(frame.clone()), state));
            }
            let rx = state.sub.rx.as_mut()?;
            if state.started {
                tokio::select! {
                    changed = rx.changed() => changed.ok()?,
                    _ = state.shutdown.wait_for(|stop| *stop) => return None,
                }
            }
            state.started = true;
            let newest = rx.borrow_and_update().clone();
            state.frames = (state.frames_for)(newest);
            state.next = 0;
        }
    }))
}
