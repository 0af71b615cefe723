//! Fuzz target `workload`: see `fuzz_checks::policy_checks::workload` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::policy_checks::workload(data));
