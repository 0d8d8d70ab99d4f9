//! libFuzzer entry for `bridge_core::fuzz::responses_stream` (`make fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = bridge_core::fuzz::responses_stream(data) {
        panic!("responses_stream: {violation}");
    }
});
