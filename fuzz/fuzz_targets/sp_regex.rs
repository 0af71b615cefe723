//! Fuzz target `sp_regex`: see `fuzz_checks::admission_checks::sp_regex` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::admission_checks::sp_regex(data));
