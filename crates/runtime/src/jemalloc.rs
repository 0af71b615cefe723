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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purging_every_arena_is_accepted() {
        // A value passed where jemalloc takes none would make it EPERM.
        let kept: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 64 + i]).collect();
        drop(kept);
        purge_now().expect("jemalloc accepts the purge");
    }
}
