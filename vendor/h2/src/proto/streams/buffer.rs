use slab::Slab;

/// Buffers frames for multiple streams.
#[derive(Debug)]
pub struct Buffer<T> {
    slab: Slab<Slot<T>>,
}

/// A sequence of frames in a `Buffer`
#[derive(Debug)]
pub struct Deque {
    indices: Option<Indices>,
}

/// Tracks the head & tail for a sequence of frames in a `Buffer`.
#[derive(Debug, Default, Copy, Clone)]
struct Indices {
    head: usize,
    tail: usize,
}

#[derive(Debug)]
struct Slot<T> {
    value: T,
    next: Option<usize>,
}

impl<T> Buffer<T> {
    pub fn new() -> Self {
        Buffer { slab: Slab::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }
}

impl Deque {
    pub fn new() -> Self {
        Deque { indices: None }
    }

    pub fn is_empty(&self) -> bool {
        self.indices.is_none()
    }

    pub fn push_back<T>(&mut self, buf: &mut Buffer<T>, value: T) {
        let key = buf.slab.insert(Slot { value, next: None });

        match self.indices {
            Some(ref mut idxs) => {
                buf.slab[idxs.tail].next = Some(key);
                idxs.tail = key;
            }
            None => {
                self.indices = Some(Indices {
                    head: key,
                    tail: key,
                });
            }
        }
    }

    pub fn push_front<T>(&mut self, buf: &mut Buffer<T>, value: T) {
        let key = buf.slab.insert(Slot { value, next: None });

        match self.indices {
            Some(ref mut idxs) => {
                buf.slab[key].next = Some(idxs.head);
                idxs.head = key;
            }
            None => {
                self.indices = Some(Indices {
                    head: key,
                    tail: key,
                });
            }
        }
    }

    pub fn pop_front<T>(&mut self, buf: &mut Buffer<T>) -> Option<T> {
        match self.indices {
            Some(mut idxs) => {
                let mut slot = buf.slab.remove(idxs.head);

                // (Meridian's patch: a buffer emptied of every stream's
                // frames frees its slots. The slab otherwise keeps the size
                // of the largest burst for the life of the connection; a
                // control-plane connection's burst is its streams opening at
                // once, after which it is idle. Every index a `Deque` holds
                // is an occupied slot, so an empty slab has no `Deque`
                // pointing into it.)
                if buf.slab.is_empty() {
                    buf.slab = Slab::new();
                }

                if idxs.head == idxs.tail {
                    assert!(slot.next.is_none());
                    self.indices = None;
                } else {
                    idxs.head = slot.next.take().unwrap();
                    self.indices = Some(idxs);
                }

                Some(slot.value)
            }
            None => None,
        }
    }
}

// (Meridian's patch) A model test of the slab replacement in `pop_front`.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

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
            (self.next() % n as u64) as usize
        }
    }

    /// Random `push_back`, `push_front` and `pop_front` across many streams'
    /// `Deque`s sharing one `Buffer`, against a `VecDeque` per stream: every
    /// frame is popped exactly once, in its stream's order, and each time the
    /// last frame leaves the buffer its slab is freed (the replacement).
    #[test]
    fn frames_pop_in_order_exactly_once_across_slab_replacements() {
        const STREAMS: usize = 64;
        const REPLACEMENTS: usize = 5_000;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut buffer: Buffer<u64> = Buffer::new();
        let mut deques: Vec<Deque> = (0..STREAMS).map(|_| Deque::new()).collect();
        let mut model: Vec<VecDeque<u64>> = vec![VecDeque::new(); STREAMS];
        let mut queued = 0usize;
        let mut next_frame = 0u64;
        let mut popped: Vec<bool> = Vec::new();
        for burst in 0..REPLACEMENTS {
            // A burst: pushes (mostly) on random streams, then a drain with
            // the odd push, until no stream has a frame.
            let pushes = 1 + rng.below(200);
            let mut pushed = 0;
            while pushed < pushes || queued > 0 {
                let s = rng.below(STREAMS);
                let push_odds = if pushed < pushes { 75 } else { 10 };
                if pushed < pushes && rng.below(100) < push_odds {
                    let frame = next_frame;
                    next_frame += 1;
                    popped.push(false);
                    pushed += 1;
                    queued += 1;
                    if rng.below(8) == 0 {
                        deques[s].push_front(&mut buffer, frame);
                        model[s].push_front(frame);
                    } else {
                        deques[s].push_back(&mut buffer, frame);
                        model[s].push_back(frame);
                    }
                } else {
                    let got = deques[s].pop_front(&mut buffer);
                    assert_eq!(got, model[s].pop_front(), "stream {s}, burst {burst}");
                    if let Some(frame) = got {
                        assert!(!popped[frame as usize], "frame {frame} popped twice");
                        popped[frame as usize] = true;
                        queued -= 1;
                    }
                }
                assert_eq!(deques[s].is_empty(), model[s].is_empty(), "stream {s}");
            }
            // Every frame left: the slab was replaced by an unallocated one.
            assert!(buffer.is_empty());
            assert_eq!(
                buffer.slab.capacity(),
                0,
                "burst {burst}: the emptied slab was kept"
            );
        }
        assert!(deques.iter().all(Deque::is_empty));
        assert!(popped.iter().all(|p| *p), "a frame was never popped");
        assert_eq!(popped.len() as u64, next_frame);
    }
}
