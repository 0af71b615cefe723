//! `-enable-pprof`: the `/debug/pprof/` routes of the admin server, as the
//! Go controllers serve them (`pkg/admin` of Linkerd 2.20), in pprof's
//! format (gzipped protobuf) so that `go tool pprof` reads them:
//!
//! - `/debug/pprof/profile?seconds=N`: a CPU profile of the whole process
//!   over N seconds (30 if not given, as Go's; at most [`MAX_SECONDS`]),
//!   sampled 100 times a second by pprof-rs (`SIGPROF`). One at a time: a
//!   second request while one runs is refused with 409. The profiler runs
//!   only while a request asks for it.
//! - `/debug/pprof/heap`: jemalloc's sampled heap profile (what is
//!   allocated and not freed), when jemalloc is the allocator; 501 with the
//!   reason otherwise.
//! - `/debug/pprof/`: a list of the two; any other profile name is 404
//!   (`Unknown profile`, as Go's index says).
//!
//! Without the flag none of these routes exists: 404, as the original's.

use std::{
    collections::HashMap,
    io::Write as _,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use axum::{
    Router,
    extract::{Query, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use pprof::protos::Message as _;

/// The longest CPU profile served (Go's default is 30 s; it refuses what
/// exceeds its server's write timeout).
pub const MAX_SECONDS: u64 = 60;

/// The CPU profile's length when `seconds` is not given (Go's default).
pub const DEFAULT_SECONDS: u64 = 30;

/// Samples per second of the CPU profiler (Go's rate).
const FREQUENCY: i32 = 100;

/// Set while a CPU profile runs: the profiler is process-wide.
static CPU_PROFILE_RUNNING: AtomicBool = AtomicBool::new(false);

/// Where heap profiles come from.
#[derive(Clone, Copy, Debug)]
pub enum HeapProfiler {
    /// jemalloc's profiler ([`crate::jemalloc::activate_heap_profiling`]
    /// must have been called at start-up).
    Jemalloc,
    /// No heap profile: `/debug/pprof/heap` answers 501 with this reason.
    Unavailable(&'static str),
}

/// Activates jemalloc's heap profiler and says where heap profiles come
/// from: jemalloc, or (if it cannot be activated: the binary exports no
/// `malloc_conf` with `prof:true`) unavailable, logged.
#[cfg(feature = "jemalloc")]
pub fn jemalloc_heap_profiler() -> HeapProfiler {
    match crate::jemalloc::activate_heap_profiling() {
        Ok(()) => {
            tracing::info!("jemalloc heap profiling active: /debug/pprof/heap");
            HeapProfiler::Jemalloc
        }
        Err(error) => {
            tracing::warn!(%error, "no heap profiles");
            HeapProfiler::Unavailable(
                "jemalloc's heap profiler could not be activated (see the log at start-up)",
            )
        }
    }
}

/// The `/debug/pprof/` routes, to add to the admin server
/// ([`crate::AdminServer::with_routes`]) when `-enable-pprof` is given.
pub fn routes(heap: HeapProfiler) -> Router {
    Router::new()
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(cpu))
        .route("/debug/pprof/heap", get(heap_profile))
        .route("/debug/pprof/{*name}", get(unknown))
        .with_state(heap)
}

async fn index() -> &'static str {
    "/debug/pprof/\n\
     heap: a sampled profile of the memory in use (jemalloc)\n\
     profile: a CPU profile; ?seconds=N (default 30, at most 60)\n"
}

async fn unknown() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "Unknown profile\n")
}

/// Why a CPU profile was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CpuProfileError {
    #[error("seconds must be a whole number from 1 to {MAX_SECONDS}, not {0:?}")]
    BadSeconds(String),
    #[error("a CPU profile is already running; try again when it ends")]
    Busy,
    #[error("the CPU profiler failed (it needs a writable TMPDIR): {0}")]
    Profiler(#[from] pprof::Error),
    #[error("encoding the profile failed: {0}")]
    Encode(#[from] std::io::Error),
    #[error("the profiling task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl IntoResponse for CpuProfileError {
    fn into_response(self) -> Response {
        let status = match self {
            Self::BadSeconds(_) => StatusCode::BAD_REQUEST,
            Self::Busy => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, format!("{self}\n")).into_response()
    }
}

/// The profile's length from the `seconds` parameter.
pub fn parse_seconds(value: Option<&str>) -> Result<Duration, CpuProfileError> {
    let Some(value) = value else {
        return Ok(Duration::from_secs(DEFAULT_SECONDS));
    };
    match value.parse::<u64>() {
        Ok(seconds) if (1..=MAX_SECONDS).contains(&seconds) => Ok(Duration::from_secs(seconds)),
        _ => Err(CpuProfileError::BadSeconds(value.to_string())),
    }
}

/// Clears [`CPU_PROFILE_RUNNING`] when the profile ends, however it ends.
struct Running;

impl Running {
    fn claim() -> Result<Self, CpuProfileError> {
        CPU_PROFILE_RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Self)
            .map_err(|_| CpuProfileError::Busy)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        CPU_PROFILE_RUNNING.store(false, Ordering::Release);
    }
}

async fn cpu(Query(query): Query<HashMap<String, String>>) -> Result<Response, CpuProfileError> {
    let duration = parse_seconds(query.get("seconds").map(String::as_str))?;
    let running = Running::claim()?;
    tracing::info!(seconds = duration.as_secs(), "CPU profile started");
    // The profiler's guard is not `Send`: it lives on a blocking thread,
    // which sleeps through the profile.
    let profile = tokio::task::spawn_blocking(move || cpu_profile(duration)).await;
    drop(running);
    let profile = profile??;
    tracing::info!(bytes = profile.len(), "CPU profile taken");
    Ok(pprof_response(profile, "profile"))
}

/// Profiles the process for `duration`: gzipped pprof protobuf.
pub fn cpu_profile(duration: Duration) -> Result<Vec<u8>, CpuProfileError> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        // Unwinding through these from a signal handler can deadlock.
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()?;
    std::thread::sleep(duration);
    let report = guard.report().build()?;
    drop(guard);
    let profile = report.pprof()?;
    let mut encoded = Vec::with_capacity(profile.encoded_len());
    profile
        .encode(&mut encoded)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    gzip(&encoded)
}

/// Gzips `bytes`, as Go's pprof handlers send their profiles.
fn gzip(bytes: &[u8]) -> Result<Vec<u8>, CpuProfileError> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes)?;
    Ok(gz.finish()?)
}

async fn heap_profile(State(heap): State<HeapProfiler>) -> Response {
    match heap {
        HeapProfiler::Unavailable(why) => {
            (StatusCode::NOT_IMPLEMENTED, format!("{why}\n")).into_response()
        }
        HeapProfiler::Jemalloc => jemalloc_heap().await,
    }
}

#[cfg(feature = "jemalloc")]
async fn jemalloc_heap() -> Response {
    match crate::jemalloc::heap_profile().await {
        Ok(profile) => pprof_response(profile, "heap"),
        Err(error) => {
            tracing::warn!(%error, "heap profile failed");
            let status = match error {
                crate::jemalloc::HeapProfileError::Inactive => StatusCode::NOT_IMPLEMENTED,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, format!("{error}\n")).into_response()
        }
    }
}

#[cfg(not(feature = "jemalloc"))]
async fn jemalloc_heap() -> Response {
    (
        StatusCode::NOT_IMPLEMENTED,
        "this build has no jemalloc heap profiler\n",
    )
        .into_response()
}

/// A profile as Go's handlers send it.
fn pprof_response(profile: Vec<u8>, name: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        profile,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(router: Router, path: &str) -> (StatusCode, Vec<u8>) {
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .expect("request");
        let response = router.oneshot(request).await.expect("response");
        let status = response.status();
        let body = response.into_body().collect().await.expect("body");
        (status, body.to_bytes().to_vec())
    }

    #[test]
    fn seconds_are_bounded_and_validated() {
        assert_eq!(parse_seconds(None).expect("default").as_secs(), 30);
        assert_eq!(parse_seconds(Some("1")).expect("1").as_secs(), 1);
        assert_eq!(parse_seconds(Some("60")).expect("60").as_secs(), 60);
        for bad in ["0", "61", "-1", "1.5", "ten", ""] {
            assert!(
                matches!(
                    parse_seconds(Some(bad)),
                    Err(CpuProfileError::BadSeconds(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn bad_requests_and_unknown_profiles_are_refused() {
        let routes = routes(HeapProfiler::Unavailable("mimalloc has no heap profiler"));
        let (status, _) = get(routes.clone(), "/debug/pprof/profile?seconds=600").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _) = get(routes.clone(), "/debug/pprof/profile?seconds=x").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, body) = get(routes.clone(), "/debug/pprof/heap").await;
        assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
        assert_eq!(body, b"mimalloc has no heap profiler\n");
        let (status, _) = get(routes.clone(), "/debug/pprof/goroutine").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = get(routes, "/debug/pprof/").await;
        assert_eq!(status, StatusCode::OK);
    }

    /// One profile at a time; the profile is gzipped pprof that names
    /// the function that burnt the CPU.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cpu_profile_is_gzipped_pprof_one_at_a_time() {
        let routes = routes(HeapProfiler::Unavailable("none"));
        let first = tokio::spawn(get(routes.clone(), "/debug/pprof/profile?seconds=1"));
        let spin = std::thread::spawn(|| burn_cpu(Duration::from_millis(1500)));
        // The first has claimed the profiler within this time.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (status, body) = get(routes.clone(), "/debug/pprof/profile?seconds=1").await;
        assert_eq!(
            status,
            StatusCode::CONFLICT,
            "{}",
            String::from_utf8_lossy(&body)
        );
        let (status, body) = first.await.expect("first profile");
        spin.join().expect("spinner");
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(&body[..2], &[0x1f, 0x8b], "gzip magic");
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut decoded)
            .expect("gunzip");
        let profile = pprof::protos::Profile::decode(&decoded[..]).expect("pprof protobuf");
        assert!(!profile.sample.is_empty(), "no samples");
        assert!(
            profile.string_table.iter().any(|s| s.contains("burn_cpu")),
            "the spinning function is named"
        );
        // Released: the next one may start.
        assert!(!CPU_PROFILE_RUNNING.load(Ordering::Acquire));
    }

    #[inline(never)]
    fn burn_cpu(for_: Duration) -> u64 {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < for_ {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        x
    }
}
