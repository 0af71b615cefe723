//! Fuzz target `authority`: see `fuzz_checks::destination_checks::authority` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::destination_checks::authority(data));
