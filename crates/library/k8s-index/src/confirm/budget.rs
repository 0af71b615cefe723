//! How many API requests lookups that missed may cause: a budget per kind,
//! refilled at a fixed rate, that a miss reserves a slot of before it asks.
//!
//! Whatever the miss rate (a proxy asking for 10,000 absent names, a scraper
//! walking every IP of a range), the API server sees at most
//! [`Budget::rate`] requests a second per kind from one process, plus one
//! slot of burst. A miss that cannot have a slot within [`Budget::max_wait`]
//! is refused at once ([`Refused`]): its caller answers `UNAVAILABLE`, which
//! a proxy retries, rather than queueing for seconds or answering from an
//! index that may lag. So at most `rate × max_wait + burst` misses of a kind
//! wait at any time.
//!
//! Pure: the caller passes the time, so the arithmetic is unit-tested
//! without a clock.

use std::time::Duration;

use tokio::time::Instant;

/// A miss that could not have a slot soon enough.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

/// The slots of one kind: a token bucket whose tokens may be reserved ahead,
/// up to `max_wait` into the future.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Requests a second this kind may cause (the refill rate).
    rate: f64,
    /// Tokens the bucket holds when full: how many misses may ask at once
    /// after a quiet spell.
    burst: f64,
    /// The longest a miss waits for its slot before it is refused.
    max_wait: Duration,
    /// Tokens left at `updated` (negative: reserved ahead by waiting misses).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Instant,
}

impl Budget {
    /// A full bucket of `burst` tokens refilled at `rate` a second, as of
    /// `now`.
    pub fn new(rate: f64, burst: f64, max_wait: Duration, now: Instant) -> Self {
        Self {
            rate,
            burst,
            max_wait,
            tokens: burst,
            updated: now,
        }
    }

    /// Requests a second this budget allows.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The longest a miss waits for a slot.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Reserves one slot: `Ok(at)` is when the miss may ask (`now` when a
    /// token is there), or [`Refused`] when that would be later than
    /// `now + max_wait` (nothing is reserved then).
    pub fn reserve(&mut self, now: Instant) -> Result<Instant, Refused> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(now);
        }
        let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.rate);
        if wait > self.max_wait {
            return Err(Refused);
        }
        self.tokens -= 1.0;
        Ok(now + wait)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.updated = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(now: Instant) -> Budget {
        Budget::new(10.0, 1.0, Duration::from_millis(200), now)
    }

    #[test]
    fn a_full_bucket_answers_at_once_then_spaces_slots_at_the_rate() {
        let now = Instant::now();
        let mut budget = budget(now);
        assert_eq!(budget.reserve(now), Ok(now));
        assert_eq!(budget.reserve(now), Ok(now + Duration::from_millis(100)));
        assert_eq!(budget.reserve(now), Ok(now + Duration::from_millis(200)));
        // The next slot would be 300 ms away: refused, and nothing reserved.
        assert_eq!(budget.reserve(now), Err(Refused));
        assert_eq!(budget.reserve(now), Err(Refused));
        // Once the reserved slots have passed, the bucket serves again.
        let later = now + Duration::from_millis(300);
        assert_eq!(budget.reserve(later), Ok(later));
    }

    #[test]
    fn no_flood_gets_more_than_the_rate_over_time() {
        let start = Instant::now();
        let mut budget = budget(start);
        let mut granted = 0;
        // 10,000 misses spread over 10 s (one every millisecond).
        for ms in 0..10_000u64 {
            let now = start + Duration::from_millis(ms);
            if budget.reserve(now).is_ok() {
                granted += 1;
            }
        }
        // 10 a second for 10 s, the first token and the slots reserved ahead
        // near the end.
        assert!(granted <= 10 * 10 + 1 + 2, "granted {granted}");
        assert!(granted >= 10 * 10 - 1, "granted {granted}");
    }

    #[test]
    fn a_quiet_spell_refills_no_more_than_the_burst() {
        let now = Instant::now();
        let mut budget = Budget::new(10.0, 3.0, Duration::ZERO, now);
        let later = now + Duration::from_secs(60);
        let at_once = (0..10).filter(|_| budget.reserve(later).is_ok()).count();
        assert_eq!(at_once, 3);
    }
}
