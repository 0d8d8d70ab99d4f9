//! libFuzzer entry for `bridge_core::fuzz::agui_ndjson` (`make fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = bridge_core::fuzz::agui_ndjson(data) {
        panic!("agui_ndjson: {violation}");
    }
});
