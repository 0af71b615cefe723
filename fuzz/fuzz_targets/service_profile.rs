//! Fuzz target `service_profile`: see `fuzz_checks::admission_checks::service_profile` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::admission_checks::service_profile(data));
