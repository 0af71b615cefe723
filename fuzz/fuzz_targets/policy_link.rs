//! Fuzz target `policy_link`: see `fuzz_checks::destination_checks::policy_link` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::destination_checks::policy_link(data));
