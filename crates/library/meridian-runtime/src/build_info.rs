//! Which implementation runs: Meridian's version, the git commit it was
//! built from and the build profile (recorded by the crate's build
//! script), logged once at start ([`log_start`]) and exported as
//! `meridian_build_info{version,commit,profile} 1` ([`register`], at the
//! root of every binary's registry). Linkerd's controllers export no
//! build-info series, so there is no original name to mirror.

use prometheus_client::{
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

/// Meridian's version (the workspace's, shared by every binary).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The short git commit built, or `unknown`.
pub const COMMIT: &str = env!("MERIDIAN_GIT_COMMIT");
/// The cargo profile built (`debug` or `release`).
pub const PROFILE: &str = env!("MERIDIAN_BUILD_PROFILE");

/// Logs, at INFO, which binary of which build is starting.
pub fn log_start(binary: &str) {
    tracing::info!(
        version = VERSION,
        commit = COMMIT,
        profile = PROFILE,
        "Meridian {binary} {VERSION} ({COMMIT}, {PROFILE} build) starting"
    );
}

/// Registers `meridian_build_info` (a gauge at 1) in `registry`.
pub fn register(registry: &mut Registry) {
    let family = Family::<Vec<(&'static str, &'static str)>, Gauge>::default();
    family
        .get_or_create(&vec![
            ("version", VERSION),
            ("commit", COMMIT),
            ("profile", PROFILE),
        ])
        .set(1);
    registry.register(
        "meridian_build_info",
        "Meridian's version, git commit and build profile",
        family,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_is_one_series_at_one() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        let line = format!(
            "meridian_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\",profile=\"{PROFILE}\"}} 1"
        );
        assert!(text.contains(&line), "{text}");
        assert!(text.contains("# TYPE meridian_build_info gauge"), "{text}");
        assert!(!COMMIT.is_empty() && (PROFILE == "debug" || PROFILE == "release"));
    }
}
