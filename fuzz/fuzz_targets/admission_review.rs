//! Fuzz target `admission_review`: see `fuzz_checks::admission_checks::admission_review` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::admission_checks::admission_review(data));
