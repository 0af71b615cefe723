//! Fuzz target `destination_request`: see `fuzz_checks::destination_checks::destination_request` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(
    |data: &[u8]| fuzz_checks::destination_checks::destination_request(data)
);
