//! Remembers our own writes until the slice watch has shown them, so a
//! Service is never reconciled from a cache that predates them (which
//! would create duplicate slices or resurrect deleted ones): the
//! original's EndpointSlice tracker, by `metadata.generation`. An
//! expectation the watch has not met after [`EXPECT_TTL`] (the slice was
//! changed or deleted by someone else before we saw our write) is dropped.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::discovery::v1::EndpointSlice;

/// How long an expectation is kept at most.
pub const EXPECT_TTL: Duration = Duration::from_secs(30);

/// What we expect of one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Want {
    /// It exists with at least this generation.
    Generation(i64),
    /// It is gone.
    Deleted,
}

/// Our writes per Service key.
#[derive(Debug, Default)]
pub struct Tracker {
    services: BTreeMap<String, BTreeMap<String, (Want, Instant)>>,
}

impl Tracker {
    /// Records a slice the API returned after our create or update.
    pub fn stored(&mut self, svc_key: &str, slice: &EndpointSlice) {
        if let Some(name) = slice.metadata.name.clone() {
            let generation = slice.metadata.generation.unwrap_or(0);
            self.services
                .entry(svc_key.to_string())
                .or_default()
                .insert(name, (Want::Generation(generation), Instant::now()));
        }
    }

    /// Records a slice we deleted.
    pub fn deleted(&mut self, svc_key: &str, name: &str) {
        self.services
            .entry(svc_key.to_string())
            .or_default()
            .insert(name.to_string(), (Want::Deleted, Instant::now()));
    }

    /// Forgets a Service (it is gone).
    pub fn forget(&mut self, svc_key: &str) {
        self.services.remove(svc_key);
    }

    /// Forgets everything (a new term of leadership).
    pub fn clear(&mut self) {
        self.services.clear();
    }

    /// Whether `cached` (the cache's slices of the Service) misses one of
    /// our writes. Expectations the cache meets are dropped.
    pub fn stale(&mut self, svc_key: &str, cached: &[EndpointSlice]) -> bool {
        let Some(expected) = self.services.get_mut(svc_key) else {
            return false;
        };
        let generation_of = |name: &str| {
            cached
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .map(|s| s.metadata.generation.unwrap_or(0))
        };
        let mut stale = false;
        expected.retain(|name, (want, since)| {
            let met = since.elapsed() >= EXPECT_TTL
                || match (want, generation_of(name)) {
                    (Want::Generation(want), Some(have)) => have >= *want,
                    (Want::Generation(_), None) => false,
                    (Want::Deleted, found) => found.is_none(),
                };
            stale |= !met;
            !met
        });
        if expected.is_empty() {
            self.services.remove(svc_key);
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, generation: i64) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.name = Some(name.into());
        s.metadata.generation = Some(generation);
        s
    }

    #[test]
    fn stale_until_the_cache_shows_our_writes() {
        let mut t = Tracker::default();
        assert!(!t.stale("ns/web", &[]), "nothing written");
        t.stored("ns/web", &slice("a", 2));
        assert!(t.stale("ns/web", &[]), "created slice not seen yet");
        assert!(t.stale("ns/web", &[slice("a", 1)]), "older generation");
        assert!(!t.stale("ns/web", &[slice("a", 2)]));
        t.deleted("ns/web", "a");
        assert!(
            t.stale("ns/web", &[slice("a", 2)]),
            "deleted slice still cached"
        );
        assert!(!t.stale("ns/web", &[]));
    }
}
