//! One guard and one loop for both streaming RPCs: a stream holds its
//! subscription to a shared state (a `Get` group or a profile), sends the
//! current state's frames, then the frames of each change until the state
//! goes away or the server shuts down. Dropping the stream releases the
//! subscription. A `Get` stream of the unknown-node group may also move,
//! once, to another group ([`Rekey`]): when its node becomes known.

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

/// The receiver a stream follows instead, and the release of the one it
/// leaves (run once that receiver is dropped).
pub type Moved<T> = (watch::Receiver<T>, Box<dyn FnOnce() + Send>);

/// How a stream may move to another shared state while it lives.
pub struct Rekey<T> {
    /// Wakes when the stream may have to move.
    pub wake: watch::Receiver<u64>,
    /// The receiver to follow from now on, if the stream moves now.
    pub check: Box<dyn FnMut() -> Option<Moved<T>> + Send + Sync>,
}

/// What woke a waiting stream.
enum Woke {
    Changed,
    Rekey,
    NoRekey,
    Stop,
}

/// A stream's position between two wakes.
struct Follow<T, R: FnOnce(), F> {
    sub: Subscription<T, R>,
    /// Set while the stream may still move (see [`Rekey`]); boxed, as
    /// most streams never have one.
    rekey: Option<Box<Rekey<T>>>,
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
    rekey: Option<Rekey<T>>,
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
        rekey: rekey.map(Box::new),
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
            if state.started {
                let rx = state.sub.rx.as_mut()?;
                // Boxed: only streams of the unknown-node group wait on it,
                // and every stream's state would otherwise carry its room.
                let rekey = async {
                    match state.rekey.as_mut() {
                        Some(r) => match Box::pin(r.wake.changed()).await {
                            Ok(()) => Woke::Rekey,
                            Err(_) => Woke::NoRekey,
                        },
                        None => std::future::pending().await,
                    }
                };
                let woke = tokio::select! {
                    changed = rx.changed() => match changed {
                        Ok(()) => Woke::Changed,
                        Err(_) => return None,
                    },
                    woke = rekey => woke,
                    _ = state.shutdown.wait_for(|stop| *stop) => Woke::Stop,
                };
                match woke {
                    Woke::Changed => {}
                    Woke::Stop => return None,
                    // The index is gone: nothing will move the stream.
                    Woke::NoRekey => {
                        state.rekey = None;
                        continue;
                    }
                    Woke::Rekey => {
                        let moved = state.rekey.as_mut().and_then(|r| (r.check)());
                        let Some((moved_rx, release_left)) = moved else {
                            continue;
                        };
                        // Drop the group left before releasing it.
                        state.sub.rx = Some(moved_rx);
                        release_left();
                        state.rekey = None;
                    }
                }
            }
            state.started = true;
            let rx = state.sub.rx.as_mut()?;
            let newest = rx.borrow_and_update().clone();
            state.frames = (state.frames_for)(newest);
            state.next = 0;
        }
    }))
}
