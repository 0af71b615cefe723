//! Fuzz target `quantity`: see `fuzz_checks::quantity::check` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::quantity::check(data));
