//! Prometheus counters of answered reviews and rejected request bodies, and
//! a gauge of the bodies being read.

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// The outcome of one HTTP request to the webhook.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// The object was admitted.
    Allowed,
    /// The object was denied.
    Denied,
    /// The body was not a usable AdmissionReview (HTTP 4xx, 413 when too
    /// large).
    Invalid,
    /// The body did not arrive within the read deadline (HTTP 408).
    Timeout,
    /// The body was still arriving when a newer request needed its read
    /// slot (HTTP 503).
    Shed,
}

impl Outcome {
    /// The label value: `allowed`, `denied`, `invalid`, `timeout` or `shed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Invalid => "invalid",
            Outcome::Timeout => "timeout",
            Outcome::Shed => "shed",
        }
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    result: Outcome,
}

/// Counters of the webhook's work, cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    reviews: Family<Labels, Counter>,
    reading: Gauge,
}

impl Metrics {
    /// Creates the metrics and registers them as `admission_reviews_total`
    /// (with a `result` label) and `admission_requests_reading` in
    /// `registry`; give a sub-registry with the component's prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "admission_reviews",
            "AdmissionReview requests handled, by result (allowed, denied, invalid, timeout, shed)",
            metrics.reviews.clone(),
        );
        registry.register(
            "admission_requests_reading",
            "Requests whose body is being read, each holding a read slot",
            metrics.reading.clone(),
        );
        metrics
    }

    /// Counts a request reading its body until the guard is dropped.
    pub(crate) fn reading(&self) -> ReadingGuard {
        self.reading.inc();
        ReadingGuard(self.reading.clone())
    }

    /// Requests reading their body now (for tests and logs).
    pub fn reading_now(&self) -> i64 {
        self.reading.get()
    }

    /// Counts one request.
    pub fn record(&self, result: Outcome) {
        self.reviews.get_or_create(&Labels { result }).inc();
    }

    /// The count for one outcome (for tests and logs).
    pub fn count(&self, result: Outcome) -> u64 {
        self.reviews.get_or_create(&Labels { result }).get()
    }
}

/// One request counted in `admission_requests_reading`.
pub(crate) struct ReadingGuard(Gauge);

impl Drop for ReadingGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_lowercase_result() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(registry.sub_registry_with_prefix("sp_validator"));
        metrics.record(Outcome::Denied);
        metrics.record(Outcome::Denied);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("sp_validator_admission_reviews_total{result=\"denied\"} 2"),
            "{text}"
        );
    }
}
