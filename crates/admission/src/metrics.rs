//! Prometheus counters of answered reviews and rejected request bodies.

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

/// The outcome of one HTTP request to the webhook.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// The object was admitted.
    Allowed,
    /// The object was denied.
    Denied,
    /// The body was not a usable AdmissionReview (HTTP 4xx).
    Invalid,
}

impl Outcome {
    /// The label value: `allowed`, `denied` or `invalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Invalid => "invalid",
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
}

impl Metrics {
    /// Creates the counters and registers them as `admission_reviews_total`
    /// (with a `result` label) in `registry`; give a sub-registry with the
    /// component's prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "admission_reviews",
            "AdmissionReview requests handled, by result (allowed, denied, invalid)",
            metrics.reviews.clone(),
        );
        metrics
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
