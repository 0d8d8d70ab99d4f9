//! libFuzzer entry for `bridge_core::fuzz::sse_decoder` (`make fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = bridge_core::fuzz::sse_decoder(data) {
        panic!("sse_decoder: {violation}");
    }
});
