//! Fuzz target `policy_webhook`: see `fuzz_checks::policy_checks::policy_webhook` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::policy_checks::policy_webhook(data));
