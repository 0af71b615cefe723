//! [`ActiveKinds`]: which Gateway API route kinds are being watched right
//! now, and at which version. The supervisors write it; the status writer
//! reads it (to patch at the served version), `/ready` states it and the
//! `gateway_api_route_kind_active{kind,version}` gauge exports it.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use meridian_runtime::InfoHandle;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindVersion {
    kind: String,
    version: String,
}

/// The active route kinds (by plural) and their versions; cheap to clone,
/// all clones share the state.
#[derive(Clone, Debug, Default)]
pub struct ActiveKinds {
    versions: Arc<RwLock<BTreeMap<String, String>>>,
    gauge: Family<KindVersion, Gauge>,
    info: Option<InfoHandle>,
}

impl ActiveKinds {
    /// Registers the gauge (`gateway_api_route_kind_active`) under
    /// `registry` and states the active kinds through `info` (`/ready`).
    pub fn register(registry: &mut Registry, info: InfoHandle) -> Self {
        let active = Self {
            info: Some(info),
            ..Self::default()
        };
        registry.register(
            "gateway_api_route_kind_active",
            "1 while the Gateway API route kind is watched at this version, 0 once it no longer is",
            active.gauge.clone(),
        );
        active.state();
        active
    }

    /// The version `plural` (e.g. `httproutes`) is watched at, if it is.
    pub fn version(&self, plural: &str) -> Option<String> {
        self.read().get(plural).cloned()
    }

    /// Records that `plural` is now watched at `version` (or, with `None`,
    /// not watched).
    pub fn set(&self, plural: &str, version: Option<&str>) {
        let previous = {
            let mut versions = self
                .versions
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match version {
                Some(v) => versions.insert(plural.to_string(), v.to_string()),
                None => versions.remove(plural),
            }
        };
        if let Some(previous) = previous {
            self.gauge_of(plural, &previous).set(0);
        }
        if let Some(version) = version {
            self.gauge_of(plural, version).set(1);
        }
        self.state();
    }

    /// `httproutes v1, grpcroutes v1`, or `none`.
    pub fn describe(&self) -> String {
        let versions = self.read();
        if versions.is_empty() {
            return "none".to_string();
        }
        versions
            .iter()
            .map(|(kind, version)| format!("{kind} {version}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn state(&self) {
        if let Some(info) = &self.info {
            info.set(self.describe());
        }
    }

    fn gauge_of(&self, kind: &str, version: &str) -> Gauge {
        self.gauge
            .get_or_create(&KindVersion {
                kind: kind.to_string(),
                version: version.to_string(),
            })
            .clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, String>> {
        self.versions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_gauge_and_description_follow_changes() {
        let mut registry = Registry::default();
        let readiness = meridian_runtime::Readiness::default();
        let active =
            ActiveKinds::register(&mut registry, readiness.register_info("gateway API", ""));
        assert_eq!(readiness.infos(), ["gateway API: none"]);
        active.set("httproutes", Some("v1"));
        active.set("grpcroutes", Some("v1"));
        active.set("httproutes", Some("v1beta1"));
        assert_eq!(active.version("httproutes").as_deref(), Some("v1beta1"));
        assert_eq!(
            readiness.infos(),
            ["gateway API: grpcroutes v1, httproutes v1beta1"]
        );
        active.set("grpcroutes", None);
        assert_eq!(active.version("grpcroutes"), None);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            r#"gateway_api_route_kind_active{kind="httproutes",version="v1"} 0"#,
            r#"gateway_api_route_kind_active{kind="httproutes",version="v1beta1"} 1"#,
            r#"gateway_api_route_kind_active{kind="grpcroutes",version="v1"} 0"#,
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
    }
}
