//! Fuzz target `context_token`: see `fuzz_checks::destination_checks::context_token` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::destination_checks::context_token(data));
