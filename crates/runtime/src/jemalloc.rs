//! jemalloc, the controllers' default allocator: handing the memory it
//! holds freed back to the system, in the background after its decay time
//! and at once when a controller has just dropped a burst (its initial
//! lists).
//!
//! Without either, jemalloc returns freed pages only as the process
//! allocates again, so the memory of the initial lists (the API's pages,
//! decoded, then dropped) stayed resident in a quiet controller: most of
//! its memory per pod of the cluster (issue 21; `cargo xtask bench
//! cluster-size`, docs/performance.md).
//!
//! Also jemalloc's heap profiler, for `-enable-pprof`
//! ([`crate::profiling`]): built in (`prof:true` in the binaries'
//! [`MALLOC_CONF`]) but inactive until [`activate_heap_profiling`].

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
