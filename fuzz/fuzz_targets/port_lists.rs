//! Fuzz target `port_lists`: see `fuzz_checks::k8s_api_checks::port_lists` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::k8s_api_checks::port_lists(data));
