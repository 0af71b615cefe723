//! Fuzz target `go_duration`: see `fuzz_checks::k8s_api_checks::go_duration` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::k8s_api_checks::go_duration(data));
