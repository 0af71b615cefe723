//! jemalloc, the controllers' default allocator: handing the memory it
//! holds freed back to the system, in the background after its decay time
//! and at once when a controller has just dropped a burst (its initial
//! lists).
//!
//! Without either, jemalloc returns freed pages only as the process
//! allocates again, so the memory of the initial lists (the API's pages,
//! decoded, then dropped) stayed resident in a quiet controller: most of
//! its memory per pod of the cluster (`cargo xtask bench
//! cluster-size`, docs/performance.md).
//!
//! [`register_metrics`] exports what jemalloc's statistics say, where
//! Linkerd's Health dashboard reads the Go runtime's memory series.
//!
//! Also jemalloc's heap profiler, for `-enable-pprof`
//! ([`crate::profiling`]): built in (`prof:true` in the binaries'
//! [`MALLOC_CONF`]) but inactive until [`activate_heap_profiling`].

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::{Registry, Unit},
};

/// The `malloc_conf` a binary whose allocator is jemalloc exports (as
/// `_rjem_malloc_conf`, jemalloc's prefixed name): the heap profiler is
/// there but samples nothing until activated (`prof_active:false`); once
/// active, one allocation per 512 KiB allocated is sampled
/// (`lg_prof_sample:19`, jemalloc's default).
pub const MALLOC_CONF: &[u8] = b"prof:true,prof_active:false,lg_prof_sample:19\0";

/// Exports [`MALLOC_CONF`] from a binary (a library's symbol might not be
/// linked). Use once, beside the `#[global_allocator]`.
#[macro_export]
macro_rules! jemalloc_malloc_conf {
    () => {
        #[expect(
            unsafe_code,
            reason = "jemalloc reads its options from this exported symbol"
        )]
        #[unsafe(export_name = "_rjem_malloc_conf")]
        static MALLOC_CONF: &u8 = &$crate::jemalloc::MALLOC_CONF[0];
    };
}

/// jemalloc's `MALLCTL_ARENAS_ALL`: an `arena.<i>` control that applies to
/// every arena.
const PURGE_ALL_ARENAS: &[u8] = b"arena.4096.purge\0";

/// Starts jemalloc's background thread, which returns freed pages to the
/// system after its decay time (`dirty_decay_ms`, 10 s, on the thread's own
/// schedule), also while the process is idle.
pub fn purge_in_background() {
    if let Err(error) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(%error, "jemalloc's background purging is off: freed memory returns to the system only as the process allocates");
    }
}

/// Returns every arena's freed pages to the system now (instead of after
/// the decay time).
pub fn purge_now() -> Result<(), PurgeError> {
    // SAFETY: `arena.<i>.purge` takes no value and returns none; jemalloc
    // refuses it (EPERM) unless both the old and the new value pointers are
    // null and their lengths zero, which is what is passed; the name is
    // NUL-terminated.
    #[expect(unsafe_code, reason = "jemalloc's purge control has no safe wrapper")]
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL_ARENAS.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    match code {
        0 => Ok(()),
        code => Err(PurgeError(code)),
    }
}

/// jemalloc refused to purge (its `mallctl` error code).
#[derive(Debug, thiserror::Error)]
#[error("jemalloc's arena purge failed with error code {0}")]
pub struct PurgeError(i32);

/// Purges once `synced` turns true: what the initial lists allocated and
/// dropped goes back to the system as soon as the controller is ready,
/// not after the decay time.
pub fn purge_after(mut synced: tokio::sync::watch::Receiver<bool>) {
    tokio::spawn(async move {
        if synced.wait_for(|s| *s).await.is_err() {
            return;
        }
        match purge_now() {
            Ok(()) => tracing::debug!("returned the memory freed by the initial lists"),
            Err(error) => tracing::warn!(%error, "could not return freed memory"),
        }
    });
}

/// jemalloc's statistics on `/metrics`, read (one `epoch` advance, which
/// merges the threads' counters) at each scrape:
/// - `go_memstats_alloc_bytes`: `stats.allocated`, the bytes the program
///   holds allocated (Go's "heap bytes allocated and still in use");
/// - `go_memstats_heap_inuse_bytes`: `stats.active`, the bytes of the pages
///   those allocations occupy (Go's "heap bytes in in-use spans");
/// - `meridian_jemalloc_resident_bytes`: `stats.resident`, what jemalloc
///   holds in physical memory, metadata and unpurged pages included;
/// - `meridian_jemalloc_purges_total` and `meridian_jemalloc_purged_pages_total`:
///   the sweeps that returned freed pages to the system and their pages
///   (dirty and muzzy, every arena), where the dashboard's GC panel has
///   no equivalent.
///
/// Go's `go_memstats_alloc_bytes_total` (bytes allocated ever) has none:
/// jemalloc counts allocations, not their bytes.
pub fn register_metrics(registry: &mut Registry) {
    registry.register_collector(Box::new(JemallocCollector));
}

#[derive(Debug)]
struct JemallocCollector;

/// One reading of jemalloc's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub purges: u64,
    pub purged_pages: u64,
}

/// Reads jemalloc's statistics, refreshed first.
pub fn read_stats() -> Result<AllocatorStats, tikv_jemalloc_ctl::Error> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let all = |name: &'static [u8]| {
        // SAFETY: every name read so is one of jemalloc's
        // `stats.arenas.<i>.{dirty,muzzy}_{npurge,purged}`, a `uint64_t`
        // by its manual, NUL-terminated (and jemalloc refuses, EINVAL,
        // a length other than the statistic's).
        #[expect(
            unsafe_code,
            reason = "jemalloc's per-arena statistics have no typed wrapper"
        )]
        unsafe {
            tikv_jemalloc_ctl::raw::read::<u64>(name)
        }
    };
    Ok(AllocatorStats {
        allocated: tikv_jemalloc_ctl::stats::allocated::read()? as u64,
        active: tikv_jemalloc_ctl::stats::active::read()? as u64,
        resident: tikv_jemalloc_ctl::stats::resident::read()? as u64,
        purges: all(b"stats.arenas.4096.dirty_npurge\0")?
            + all(b"stats.arenas.4096.muzzy_npurge\0")?,
        purged_pages: all(b"stats.arenas.4096.dirty_purged\0")?
            + all(b"stats.arenas.4096.muzzy_purged\0")?,
    })
}

impl Collector for JemallocCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = match read_stats() {
            Ok(stats) => stats,
            Err(error) => {
                tracing::debug!(%error, "no allocator metrics in this scrape");
                return Ok(());
            }
        };
        let gauges = [
            (
                "go_memstats_alloc",
                "Bytes the program holds allocated (jemalloc's stats.allocated; no Go runtime)",
                stats.allocated,
            ),
            (
                "go_memstats_heap_inuse",
                "Bytes in pages holding allocations (jemalloc's stats.active; no Go runtime)",
                stats.active,
            ),
            (
                "meridian_jemalloc_resident",
                "Bytes jemalloc holds in physical memory, metadata and unpurged pages included (stats.resident)",
                stats.resident,
            ),
        ];
        for (name, help, value) in gauges {
            ConstGauge::new(value as i64).encode(encoder.encode_descriptor(
                name,
                help,
                Some(&Unit::Bytes),
                MetricType::Gauge,
            )?)?;
        }
        ConstCounter::new(stats.purges).encode(encoder.encode_descriptor(
            "meridian_jemalloc_purges",
            "Sweeps that returned freed pages to the system (dirty and muzzy, every arena)",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(stats.purged_pages).encode(encoder.encode_descriptor(
            "meridian_jemalloc_purged_pages",
            "Pages returned to the system (dirty and muzzy, every arena)",
            None,
            MetricType::Counter,
        )?)?;
        Ok(())
    }
}

/// Why the heap profiler could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HeapProfileError {
    #[error(
        "jemalloc's heap profiler is not available: the process did not start with prof:true (its allocator is not jemalloc, or the binary exports no malloc_conf)"
    )]
    Inactive,
    #[error("jemalloc refused to activate its heap profiler: {0}")]
    Activate(tikv_jemalloc_ctl::Error),
    #[error(
        "the heap profile failed (jemalloc writes it to a file in TMPDIR, which must be writable): {0}"
    )]
    Dump(anyhow::Error),
}

/// Starts sampling allocations (`prof.active`), for `-enable-pprof`.
pub fn activate_heap_profiling() -> Result<(), HeapProfileError> {
    let ctl = jemalloc_pprof::PROF_CTL
        .as_ref()
        .ok_or(HeapProfileError::Inactive)?;
    // At start-up nothing else holds it.
    let mut ctl = ctl.try_lock().map_err(|_| HeapProfileError::Inactive)?;
    ctl.activate().map_err(HeapProfileError::Activate)
}

/// The heap profile: what is allocated now, sampled, as gzipped pprof.
pub async fn heap_profile() -> Result<Vec<u8>, HeapProfileError> {
    let ctl = jemalloc_pprof::PROF_CTL
        .as_ref()
        .ok_or(HeapProfileError::Inactive)?
        .clone();
    // jemalloc writes the profile to a file, then it is read and parsed:
    // off the async threads.
    tokio::task::spawn_blocking(move || {
        let mut ctl = ctl.blocking_lock();
        if !ctl.activated() {
            return Err(HeapProfileError::Inactive);
        }
        ctl.dump_pprof().map_err(HeapProfileError::Dump)
    })
    .await
    .map_err(|e| HeapProfileError::Dump(e.into()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// The statistics move with what the program allocates, and a purge
    /// is counted.
    #[test]
    fn statistics_follow_allocations_and_purges() {
        let before = read_stats().expect("jemalloc's stats are built in");
        let held: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 1 << 20]).collect();
        let during = read_stats().expect("stats");
        assert!(
            during.allocated >= before.allocated + 60 * (1 << 20),
            "{before:?} → {during:?}"
        );
        assert!(during.active >= during.allocated, "{during:?}");
        drop(held);
        purge_now().expect("purge");
        let after = read_stats().expect("stats");
        assert!(after.allocated < during.allocated, "{during:?} → {after:?}");
        assert!(
            after.purged_pages > during.purged_pages,
            "{during:?} → {after:?}"
        );
        let mut registry = Registry::default();
        register_metrics(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for name in [
            "go_memstats_alloc_bytes ",
            "go_memstats_heap_inuse_bytes ",
            "meridian_jemalloc_resident_bytes ",
            "meridian_jemalloc_purges_total ",
            "meridian_jemalloc_purged_pages_total ",
        ] {
            assert!(text.contains(name), "{name} in\n{text}");
        }
    }

    crate::jemalloc_malloc_conf!();

    /// The test binary exports the binaries' `malloc_conf`: jemalloc
    /// starts with its profiler inactive, and activating it yields a
    /// gzipped pprof heap profile.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_heap_profiler_starts_inactive_and_dumps_pprof() {
        assert!(jemalloc_pprof::PROF_CTL.is_some(), "opt.prof is true");
        assert!(matches!(
            heap_profile().await,
            Err(HeapProfileError::Inactive)
        ));
        activate_heap_profiling().expect("activate");
        let profile = heap_profile().await.expect("heap profile");
        assert_eq!(&profile[..2], &[0x1f, 0x8b], "gzip magic");
    }

    #[test]
    fn purging_every_arena_is_accepted() {
        // A value passed where jemalloc takes none would make it EPERM.
        let kept: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 64 + i]).collect();
        drop(kept);
        purge_now().expect("jemalloc accepts the purge");
    }
}
