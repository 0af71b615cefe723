//! The properties behind Meridian's fuzz targets, one function per target,
//! each taking the raw input bytes and panicking when a property fails.
//!
//! The libFuzzer targets in `fuzz/fuzz_targets/` are one-line calls of
//! these functions, and `tests/fuzz_regressions.rs` replays every committed
//! input of `fuzz/regressions/<target>/` through the same function on the
//! stable toolchain, so a fixed crash stays fixed in `cargo test`.
//!
//! Panicking is the point here: a failed property is a finding.
#![allow(clippy::unwrap_used, clippy::panic)]

pub mod admission_checks;
pub mod destination_checks;
pub mod go_format;
pub mod k8s_api_checks;
pub mod policy_checks;
pub mod quantity;

/// A target's check: panics when a property fails.
pub type Check = fn(&[u8]);

/// Every target: its name (the `fuzz/fuzz_targets/<name>.rs` file and the
/// `fuzz/regressions/<name>/` directory) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("authority", destination_checks::authority),
    ("context_token", destination_checks::context_token),
    (
        "destination_request",
        destination_checks::destination_request,
    ),
    ("policy_link", destination_checks::policy_link),
    ("quantity", quantity::check),
    ("workload", policy_checks::workload),
    ("outbound_target", policy_checks::outbound_target),
    ("policy_webhook", policy_checks::policy_webhook),
    ("admission_review", admission_checks::admission_review),
    ("service_profile", admission_checks::service_profile),
    ("sp_regex", admission_checks::sp_regex),
    ("go_duration", k8s_api_checks::go_duration),
    ("port_lists", k8s_api_checks::port_lists),
];

/// The input as text, if it is UTF-8 (gRPC strings and JSON bodies are).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
