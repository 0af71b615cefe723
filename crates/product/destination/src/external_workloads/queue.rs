//! The writer's work queue of Service keys (`namespace/name`), as
//! client-go's rate-limited workqueue: a key waits at most once however
//! often it is added, a key being processed is not handed out twice (an
//! add meanwhile brings it back once it is done), and a failed key comes
//! back after a per-key exponential backoff until its retry budget is
//! spent, then it is dropped. Its metrics are the original's
//! `workqueue_*{name}` series ([`QueueMetrics`], and [`QueueCollector`]
//! for the two read when scraped).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::Counter,
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};
use tokio::sync::Notify;

/// The first retry's delay; each further one doubles it.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// The longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// The queue's metrics (no-ops unless registered).
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    drops: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        Self {
            depth: Gauge::default(),
            adds: Counter::default(),
            retries: Counter::default(),
            drops: Counter::default(),
            queue_duration: duration_histogram(),
            work_duration: duration_histogram(),
        }
    }
}

impl QueueMetrics {
    /// Registers `workqueue_{depth,adds_total,retries_total,drops_total,
    /// queue_duration_seconds,work_duration_seconds}{name}`.
    pub fn register(registry: &mut Registry, name: &str) -> Self {
        let labels = QueueLabels {
            name: name.to_string(),
        };
        let depth = Family::<QueueLabels, Gauge>::default();
        let adds = Family::<QueueLabels, Counter>::default();
        let retries = Family::<QueueLabels, Counter>::default();
        let drops = Family::<QueueLabels, Counter>::default();
        let queue_duration =
            Family::<QueueLabels, Histogram>::new_with_constructor(duration_histogram as fn() -> _);
        let work_duration =
            Family::<QueueLabels, Histogram>::new_with_constructor(duration_histogram as fn() -> _);
        let sub = registry.sub_registry_with_prefix("workqueue");
        sub.register("depth", "Current depth of workqueue", depth.clone());
        sub.register(
            "adds",
            "Total number of adds handled by workqueue",
            adds.clone(),
        );
        sub.register(
            "retries",
            "Total number of retries handled by workqueue",
            retries.clone(),
        );
        sub.register(
            "drops",
            "Total number of dropped items from the queue due to exceeding retry threshold",
            drops.clone(),
        );
        sub.register(
            "queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            queue_duration.clone(),
        );
        sub.register(
            "work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            work_duration.clone(),
        );
        Self {
            depth: depth.get_or_create(&labels).clone(),
            adds: adds.get_or_create(&labels).clone(),
            retries: retries.get_or_create(&labels).clone(),
            drops: drops.get_or_create(&labels).clone(),
            queue_duration: queue_duration.get_or_create(&labels).clone(),
            work_duration: work_duration.get_or_create(&labels).clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    queue: VecDeque<String>,
    /// Keys waiting (in `queue`, or to be re-queued after processing).
    dirty: HashSet<String>,
    processing: HashMap<String, Instant>,
    added_at: HashMap<String, Instant>,
    requeues: HashMap<String, u32>,
    /// Bumped by `clear`: delayed re-adds from before it are void.
    epoch: u64,
}

/// A queue of keys, shared by its producers (watch callbacks, which never
/// block) and its one worker.
#[derive(Debug)]
pub struct WorkQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    metrics: QueueMetrics,
}

impl WorkQueue {
    pub fn new(metrics: QueueMetrics) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner::default()),
            notify: Notify::new(),
            metrics,
        })
    }

    /// Adds `key` unless it already waits.
    pub fn add(&self, key: &str) {
        let mut inner = self.inner.lock();
        if !inner.dirty.insert(key.to_string()) {
            return;
        }
        self.metrics.adds.inc();
        inner.added_at.insert(key.to_string(), Instant::now());
        if inner.processing.contains_key(key) {
            // Queued again once `done`.
            return;
        }
        inner.queue.push_back(key.to_string());
        self.metrics.depth.set(inner.queue.len() as i64);
        drop(inner);
        self.notify.notify_one();
    }

    /// The next key to process (marked as processing until [`Self::done`]).
    pub async fn next(&self) -> String {
        loop {
            let notified = self.notify.notified();
            if let Some(key) = self.try_next() {
                return key;
            }
            notified.await;
        }
    }

    pub(crate) fn try_next(&self) -> Option<String> {
        let mut inner = self.inner.lock();
        let key = inner.queue.pop_front()?;
        self.metrics.depth.set(inner.queue.len() as i64);
        inner.dirty.remove(&key);
        if let Some(at) = inner.added_at.remove(&key) {
            self.metrics
                .queue_duration
                .observe(at.elapsed().as_secs_f64());
        }
        inner.processing.insert(key.clone(), Instant::now());
        Some(key)
    }

    /// `key` is processed; if it was added meanwhile it waits again.
    pub fn done(&self, key: &str) {
        let mut inner = self.inner.lock();
        if let Some(started) = inner.processing.remove(key) {
            self.metrics
                .work_duration
                .observe(started.elapsed().as_secs_f64());
        }
        if inner.dirty.contains(key) {
            inner.queue.push_back(key.to_string());
            self.metrics.depth.set(inner.queue.len() as i64);
            drop(inner);
            self.notify.notify_one();
        }
    }

    /// Processing `key` succeeded: its retry history is wiped.
    pub fn forget(&self, key: &str) {
        self.inner.lock().requeues.remove(key);
    }

    /// Retries so far of `key`.
    pub fn requeues(&self, key: &str) -> u32 {
        self.inner.lock().requeues.get(key).copied().unwrap_or(0)
    }

    /// Processing `key` failed: adds it again after its backoff, unless it
    /// has been retried `budget` times already (then it is dropped and
    /// forgotten; returns `false`).
    pub fn retry(self: &Arc<Self>, key: &str, budget: u32) -> bool {
        let (delay, epoch) = {
            let mut inner = self.inner.lock();
            let n = inner.requeues.get(key).copied().unwrap_or(0);
            if n >= budget {
                inner.requeues.remove(key);
                self.metrics.drops.inc();
                return false;
            }
            inner.requeues.insert(key.to_string(), n + 1);
            (backoff(n), inner.epoch)
        };
        self.metrics.retries.inc();
        let queue = Arc::clone(self);
        let key = key.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if queue.inner.lock().epoch == epoch {
                queue.add(&key);
            }
        });
        true
    }

    /// Empties the queue and every retry history (leadership was lost).
    /// Keys being processed stay marked until `done`.
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.queue.clear();
        inner.dirty.clear();
        inner.added_at.clear();
        inner.requeues.clear();
        inner.epoch += 1;
        self.metrics.depth.set(0);
    }

    /// How long each key being processed has been (seconds).
    fn running(&self) -> Vec<f64> {
        self.inner
            .lock()
            .processing
            .values()
            .map(|at| at.elapsed().as_secs_f64())
            .collect()
    }

    /// Keys waiting.
    pub fn len(&self) -> usize {
        self.inner.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `workqueue_unfinished_work_seconds{name}` and
/// `workqueue_longest_running_processor_seconds{name}`, computed from the
/// keys in processing when scraped.
#[derive(Debug)]
pub struct QueueCollector {
    queue: Arc<WorkQueue>,
    labels: QueueLabels,
}

impl QueueCollector {
    pub fn new(queue: Arc<WorkQueue>, name: &str) -> Self {
        Self {
            queue,
            labels: QueueLabels {
                name: name.to_string(),
            },
        }
    }
}

impl Collector for QueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let running = self.queue.running();
        let unfinished: f64 = running.iter().sum();
        let longest = running.iter().copied().fold(0.0, f64::max);
        for (name, help, value) in [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work in progress has not been observed by work_duration yet",
                unfinished,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds the longest running processor of the workqueue has been running",
                longest,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(value).encode(family.encode_family(&self.labels)?)?;
        }
        Ok(())
    }
}

/// The delay before retry `n` (from 0): 5 ms doubled each time, at most
/// 1000 s (client-go's per-item exponential limiter).
pub fn backoff(n: u32) -> Duration {
    let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
    BASE_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiting_key_is_added_once() {
        let q = WorkQueue::new(QueueMetrics::default());
        q.add("ns/a");
        q.add("ns/b");
        q.add("ns/a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, "ns/a");
        assert_eq!(q.next().await, "ns/b");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_processed_comes_back_after_done() {
        let q = WorkQueue::new(QueueMetrics::default());
        q.add("ns/a");
        let key = q.next().await;
        q.add("ns/a");
        assert!(q.is_empty(), "not handed out twice at once");
        q.done(&key);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, "ns/a");
    }

    #[tokio::test]
    async fn retries_back_off_then_drop() {
        let q = WorkQueue::new(QueueMetrics::default());
        q.add("ns/a");
        let key = q.next().await;
        assert!(q.retry(&key, 2));
        q.done(&key);
        assert!(q.is_empty(), "not before the backoff");
        assert_eq!(q.next().await, "ns/a");
        assert!(q.retry("ns/a", 2));
        q.done("ns/a");
        assert_eq!(q.next().await, "ns/a");
        assert_eq!(q.requeues("ns/a"), 2);
        assert!(!q.retry("ns/a", 2), "budget spent: dropped");
        assert_eq!(q.requeues("ns/a"), 0);
    }

    #[tokio::test]
    async fn clear_voids_pending_retries() {
        let q = WorkQueue::new(QueueMetrics::default());
        q.add("ns/a");
        let key = q.next().await;
        assert!(q.retry(&key, 5));
        q.done(&key);
        q.clear();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn the_metrics_have_the_originals_names() {
        let mut registry = Registry::default();
        let q = WorkQueue::new(QueueMetrics::register(
            &mut registry,
            "endpoints_controller_workqueue",
        ));
        registry.register_collector(Box::new(QueueCollector::new(
            q.clone(),
            "endpoints_controller_workqueue",
        )));
        q.add("ns/a");
        q.add("ns/b");
        let key = q.next().await;
        assert!(q.retry(&key, 1));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "workqueue_depth{name=\"endpoints_controller_workqueue\"} 1",
            "workqueue_adds_total{name=\"endpoints_controller_workqueue\"} 2",
            "workqueue_retries_total{name=\"endpoints_controller_workqueue\"} 1",
            "workqueue_drops_total{name=\"endpoints_controller_workqueue\"} 0",
            "workqueue_queue_duration_seconds_count{name=\"endpoints_controller_workqueue\"} 1",
            "workqueue_work_duration_seconds_count{name=\"endpoints_controller_workqueue\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        for name in [
            "workqueue_unfinished_work_seconds{name=\"endpoints_controller_workqueue\"} ",
            "workqueue_longest_running_processor_seconds{name=\"endpoints_controller_workqueue\"} ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} in:\n{text}"
            );
        }
        q.done(&key);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::from_millis(5));
        assert_eq!(backoff(1), Duration::from_millis(10));
        assert_eq!(backoff(14), Duration::from_millis(5 * 16384));
        assert_eq!(backoff(40), MAX_DELAY);
    }
}
