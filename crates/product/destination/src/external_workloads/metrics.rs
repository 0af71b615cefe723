//! Meridian's own metrics of the EndpointSlice writer (the original
//! exports only its queue's `workqueue_*`): whether this replica holds the
//! Lease and writes (`endpointslice_writer_leader`), and the writes it
//! made (`endpointslice_writer_writes_total{op}`: `create`, `update`,
//! `delete`), so that an operator, and the soak, can see which replica
//! writes and that no other one does.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

/// The writer's metrics (no-ops unless registered).
#[derive(Clone, Debug, Default)]
pub struct WriterMetrics {
    leader: Gauge,
    writes: Family<OpLabels, Counter>,
}

impl WriterMetrics {
    /// Registers `endpointslice_writer_leader` and
    /// `endpointslice_writer_writes_total{op}`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("endpointslice_writer");
        sub.register(
            "leader",
            "Whether this replica holds the EndpointSlice writer's Lease and writes (1) or not (0)",
            m.leader.clone(),
        );
        sub.register(
            "writes",
            "EndpointSlice writes the API server accepted from this replica, by operation",
            m.writes.clone(),
        );
        // Every operation is listed from the start (at 0).
        for op in ["create", "update", "delete"] {
            drop(m.writes.get_or_create(&OpLabels { op }));
        }
        m
    }

    pub fn set_leader(&self, leads: bool) {
        self.leader.set(i64::from(leads));
    }

    /// One accepted write of `op` (`create`, `update` or `delete`).
    pub fn wrote(&self, op: &'static str) {
        self.writes.get_or_create(&OpLabels { op }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leadership_and_writes_are_exported() {
        let mut registry = Registry::default();
        let m = WriterMetrics::register(&mut registry);
        m.set_leader(true);
        m.wrote("create");
        m.wrote("create");
        m.wrote("delete");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("endpointslice_writer_leader 1"), "{text}");
        assert!(
            text.contains(r#"endpointslice_writer_writes_total{op="create"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"endpointslice_writer_writes_total{op="update"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"endpointslice_writer_writes_total{op="delete"} 1"#),
            "{text}"
        );
    }
}
