//! Fuzz target `outbound_target`: see `fuzz_checks::policy_checks::outbound_target` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::policy_checks::outbound_target(data));
