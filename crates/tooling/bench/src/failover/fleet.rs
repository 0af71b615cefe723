//! The failover benchmark's proxies: each one HTTP/2 connection with
//! linkerd2-proxy's settings ([`crate::proxy_client`]) to one replica,
//! holding its streams and decoding what they are sent ([`super::held`]).
//! When a stream of its connection ends, a proxy drops the connection,
//! backs off (100 ms doubling to 10 s, jittered, as the proxy's control
//! client) and connects to the next replica (as a proxy's balancer over the
//! headless Service's addresses skips the one that failed); a refused
//! connection moves it on likewise. On command it moves to its home
//! replica at once (clients rebalancing once a replica is back).
//!
//! Every stream end is counted with its reason ([`crate::ends`]); the
//! streams a proxy gives up after another stream of its connection ended
//! are counted as such.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use tokio::{sync::Notify, task::JoinSet};

use super::held::{self, Check, Frames, Held, Truth};
use crate::{ends, proxy_client};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long a proxy waits for the other streams of its connection to end
/// after one did, before it gives them up.
const LINGER: Duration = Duration::from_millis(500);
/// No replica.
const NONE: usize = usize::MAX;

/// One stream a proxy opens: its method, request and check.
#[derive(Clone)]
pub struct StreamSpec {
    pub path: &'static str,
    pub frame: Bytes,
    pub check: Check,
}

/// One stream's state.
#[derive(Default)]
pub struct StreamState {
    /// When its current stream received its first message (`None`: not
    /// served now).
    pub served_at: Option<Instant>,
    pub held: Held,
    pub decode_errors: u64,
}

struct Proxy {
    /// The replica it goes to when told to move.
    home: AtomicUsize,
    /// The replica its connection is to ([`NONE`]: none now).
    on: AtomicUsize,
    moved: Notify,
    specs: Vec<StreamSpec>,
    states: Vec<Arc<Mutex<StreamState>>>,
}

/// Every proxy, and what they did.
pub struct Fleet {
    replicas: Vec<SocketAddr>,
    proxies: Vec<Arc<Proxy>>,
    tasks: JoinSet<()>,
    /// Connections made, and attempts refused or failed.
    pub connects: Arc<AtomicU64>,
    pub connect_failures: Arc<AtomicU64>,
}

fn lock(m: &Mutex<StreamState>) -> MutexGuard<'_, StreamState> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Fleet {
    /// Starts one proxy per entry of `specs`, proxy `i` on replica
    /// `i % replicas.len()`, a few connections at a time.
    pub fn start(replicas: Vec<SocketAddr>, specs: Vec<Vec<StreamSpec>>) -> Self {
        let n = replicas.len().max(1);
        let proxies: Vec<Arc<Proxy>> = specs
            .into_iter()
            .enumerate()
            .map(|(i, specs)| {
                Arc::new(Proxy {
                    home: AtomicUsize::new(i % n),
                    on: AtomicUsize::new(NONE),
                    moved: Notify::new(),
                    states: specs.iter().map(|_| Arc::default()).collect(),
                    specs,
                })
            })
            .collect();
        let mut fleet = Self {
            replicas,
            proxies,
            tasks: JoinSet::new(),
            connects: Arc::default(),
            connect_failures: Arc::default(),
        };
        let addrs = Arc::new(fleet.replicas.clone());
        for (i, proxy) in fleet.proxies.iter().enumerate() {
            let proxy = proxy.clone();
            let addrs = addrs.clone();
            let connects = fleet.connects.clone();
            let failures = fleet.connect_failures.clone();
            // Spread the first connects over ~1 s.
            let delay = Duration::from_micros((i as u64 * 400) % 1_000_000);
            fleet.tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                run(proxy, addrs, i as u64, connects, failures).await;
            });
        }
        fleet
    }

    /// Streams in all.
    pub fn streams(&self) -> usize {
        self.proxies.iter().map(|p| p.specs.len()).sum()
    }

    /// Proxies connected to each replica now.
    pub fn per_replica(&self) -> Vec<usize> {
        let mut counts = vec![0; self.replicas.len()];
        for p in &self.proxies {
            if let Some(c) = counts.get_mut(p.on.load(Ordering::Relaxed)) {
                *c += 1;
            }
        }
        counts
    }

    /// The proxies connected to replica `r` now.
    pub fn on(&self, r: usize) -> Vec<usize> {
        (0..self.proxies.len())
            .filter(|i| self.proxies[*i].on.load(Ordering::Relaxed) == r)
            .collect()
    }

    /// Streams served now, and the latest time one of them was first
    /// served.
    pub fn served(&self) -> (usize, Option<Instant>) {
        let mut n = 0;
        let mut latest: Option<Instant> = None;
        for p in &self.proxies {
            for s in &p.states {
                if let Some(at) = lock(s).served_at {
                    n += 1;
                    latest = Some(latest.map_or(at, |l| l.max(at)));
                }
            }
        }
        (n, latest)
    }

    /// When each stream of `proxies` was first served on its current
    /// connection (`None`: not served).
    pub fn served_times(&self, proxies: &[usize]) -> Vec<Option<Instant>> {
        proxies
            .iter()
            .flat_map(|i| self.proxies[*i].states.iter())
            .map(|s| lock(s).served_at)
            .collect()
    }

    /// Waits until every stream is served (or `timeout`); returns when the
    /// last one was, or `None`.
    pub async fn wait_served(&self, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        let total = self.streams();
        loop {
            let (n, latest) = self.served();
            if n == total {
                return latest;
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Streams not holding what `truth` says (a stream not served holds
    /// nothing, and is wrong unless its truth is empty).
    pub fn wrong(&self, truth: &Truth) -> usize {
        self.proxies
            .iter()
            .flat_map(|p| p.specs.iter().zip(&p.states))
            .filter(|(spec, state)| {
                let s = lock(state);
                s.served_at.is_none() || !truth.holds(spec.check, &s.held)
            })
            .count()
    }

    /// Waits until no stream is wrong (or `timeout`); returns how long it
    /// took, or the streams still wrong.
    pub async fn wait_correct(
        &self,
        truth: &Mutex<Truth>,
        timeout: Duration,
    ) -> Result<Duration, usize> {
        let start = Instant::now();
        loop {
            let truth = truth
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            let wrong = self.wrong(&truth);
            if wrong == 0 {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(wrong);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Tells `proxies` to move to replica `r` now.
    pub fn send_home(&self, proxies: &[usize], r: usize) {
        for i in proxies {
            let p = &self.proxies[*i];
            p.home.store(r, Ordering::Relaxed);
            p.moved.notify_one();
        }
    }

    /// Decode errors over every stream.
    pub fn decode_errors(&self) -> u64 {
        self.proxies
            .iter()
            .flat_map(|p| &p.states)
            .map(|s| lock(s).decode_errors)
            .sum()
    }
}

/// Why a proxy's connection ended.
enum Outcome {
    /// A stream ended (its server went, or ended it).
    Ended,
    /// Told to move.
    Moved,
}

async fn run(
    proxy: Arc<Proxy>,
    replicas: Arc<Vec<SocketAddr>>,
    seed: u64,
    connects: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
) {
    let n = replicas.len();
    let mut target = proxy.home.load(Ordering::Relaxed);
    let mut backoff = BACKOFF_MIN;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    loop {
        let conn = match proxy_client::connect_with_windows(
            replicas[target],
            proxy_client::STREAM_WINDOW,
            proxy_client::CONNECTION_WINDOW,
        )
        .await
        {
            Ok(conn) => conn,
            Err(_) => {
                failures.fetch_add(1, Ordering::Relaxed);
                sleep_jittered(&mut backoff, &mut rng).await;
                target = (target + 1) % n;
                continue;
            }
        };
        connects.fetch_add(1, Ordering::Relaxed);
        proxy.on.store(target, Ordering::Relaxed);
        let mut streams = JoinSet::new();
        for (spec, state) in proxy.specs.iter().zip(&proxy.states) {
            let mut s = lock(state);
            let decode_errors = s.decode_errors;
            *s = StreamState {
                decode_errors,
                ..Default::default()
            };
            drop(s);
            streams.spawn(stream(conn.clone(), spec.clone(), state.clone()));
        }
        let outcome = tokio::select! {
            _ = streams.join_next() => Outcome::Ended,
            () = proxy.moved.notified() => Outcome::Moved,
        };
        if matches!(outcome, Outcome::Ended) {
            // The others usually end with it: count their own reasons.
            let _ = tokio::time::timeout(LINGER, async {
                while streams.join_next().await.is_some() {}
            })
            .await;
            for _ in 0..streams.len() {
                ends::stream_ended(
                    "given up by the proxy: another stream of its connection ended".into(),
                    None,
                );
            }
        }
        streams.abort_all();
        drop(conn);
        proxy.on.store(NONE, Ordering::Relaxed);
        for state in &proxy.states {
            lock(state).served_at = None;
        }
        match outcome {
            Outcome::Moved => {
                target = proxy.home.load(Ordering::Relaxed);
                backoff = BACKOFF_MIN;
            }
            Outcome::Ended => {
                sleep_jittered(&mut backoff, &mut rng).await;
                target = (target + 1) % n;
            }
        }
    }
}

/// Sleeps `backoff` ± 10 %, then doubles it (up to the maximum).
async fn sleep_jittered(backoff: &mut Duration, rng: &mut u64) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let jitter = (*rng % 200) as f64 / 1000.0 - 0.1;
    tokio::time::sleep(backoff.mul_f64(1.0 + jitter)).await;
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
}

/// One stream on `conn` until it ends (counted with its reason).
async fn stream(conn: proxy_client::Conn, spec: StreamSpec, state: Arc<Mutex<StreamState>>) {
    let mut body = match proxy_client::call(&conn, spec.path, spec.frame.clone()).await {
        Ok(body) => body,
        Err(error) => {
            ends::stream_ended(proxy_client::call_failure(&error), None);
            return;
        }
    };
    let mut frames = Frames::default();
    let end = proxy_client::read_to_end(&mut body, |data| {
        let mut s = lock(&state);
        let s = &mut *s;
        frames.feed(data, |message| {
            if s.served_at.is_none() {
                s.served_at = Some(Instant::now());
            }
            if held::apply(spec.check, &mut s.held, message).is_err() {
                s.decode_errors += 1;
            }
        });
        true
    })
    .await;
    ends::stream_ended(end, None);
}
