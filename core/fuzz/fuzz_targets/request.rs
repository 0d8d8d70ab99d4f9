//! libFuzzer entry for `bridge_core::fuzz::request` (`make fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = bridge_core::fuzz::request(data) {
        panic!("request: {violation}");
    }
});
