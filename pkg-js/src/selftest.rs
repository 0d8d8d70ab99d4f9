//! The purity proof: a plain export that drives every core operation over built-in inputs, so
//! any host import the core might pull in (clock, randomness, `env`) would show up in the
//! module's import section (`make purity`).

use bridge_core::api;

/// Run every core operation the package exposes over built-in inputs; returns the number of
/// bytes produced (so nothing is optimised away).
#[must_use]
pub fn selftest() -> usize {
    const REQUEST: &[u8] = br#"{"model":"claude-x","max_tokens":64,"system":"s","tools":[{"name":"t","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}"#;
    const UPSTREAM: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"r\",\"content\":\"a\",\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let mut produced = 0;
    for dialect in api::Dialect::ALL {
        let Ok(converted) = api::prepare(dialect, REQUEST, "{}") else {
            continue;
        };
        produced += converted.body.len();
        let (upstream, tools): (&[u8], _) = match dialect {
            api::Dialect::Chatml => (
                "<think>r</think>a<tool_call>{\"name\":\"t\",\"arguments\":{}}</tool_call>"
                    .as_bytes(),
                serde_json::from_str::<api::ChatmlPrompt>(&converted.body)
                    .map(|p| p.tools)
                    .unwrap_or_default(),
            ),
            _ => (UPSTREAM, Vec::new()),
        };
        for stream in [true, false] {
            let mut translator = api::Translator::new(api::StreamOptions {
                stream,
                model: converted.client_model.clone(),
                input_tokens_estimate: converted.input_tokens_estimate,
                id_seed: 1,
                dialect,
                tools: tools.clone(),
                ..api::StreamOptions::default()
            });
            let mut sse = translator.feed(upstream);
            sse.push_str(&translator.finish(&api::StreamEnd::default()).body);
            produced += sse.len();
            if stream {
                produced += api::validate_sse(sse.as_bytes()).map_or(0, |events| {
                    events.iter().map(|e| api::encode_event(e).len()).sum()
                });
                produced += api::fold_sse(sse.as_bytes()).body.len();
                let mut decoder = api::SseDecoder::new();
                produced += decoder.feed(sse.as_bytes()).len() + decoder.finish().len();
            }
        }
    }
    produced += api::encode_sse_frame("x", "a\nb").map_or(0, |s| s.len());
    // The Fabstir protocol pieces (keccak for model ids included).
    if let Ok(id) = bridge_core::fabstir::model_id::ModelId::parse("org/repo:file.gguf") {
        produced += id.to_hex().len();
    }
    if let Ok(frame) = bridge_core::fabstir::protocol::parse_host_frame(
        r#"{"type":"stream_end","reason":"complete","tokens_used":3}"#,
    ) {
        produced += format!("{frame:?}").len();
    }
    let ranked = bridge_core::fabstir::scoring::rank(
        &[bridge_core::fabstir::scoring::Candidate::default()],
        bridge_core::fabstir::scoring::Selection::Auto,
    );
    produced += bridge_core::fabstir::scoring::choose(&ranked, 0.5).unwrap_or(0);
    produced += api::route(
        r#"{"default":"a","think":"b,m","rules":[{"model":"claude-?","to":"c"}],"fallback":["d"]}"#,
        REQUEST,
    )
    .map_or(0, |chosen| {
        chosen.reason.to_string().len() + chosen.fallbacks.len()
    });
    produced + api::count_tokens(REQUEST).map_or(0, |n| n as usize)
}

/// The wasm export the import check builds (`wasm32-unknown-unknown`, without `bindings`).
#[cfg(all(target_arch = "wasm32", not(feature = "bindings")))]
#[unsafe(no_mangle)]
#[expect(
    unsafe_code,
    reason = "an exported symbol is how a cdylib exposes a function to the wasm host"
)]
pub extern "C" fn bridge_core_selftest() -> usize {
    selftest()
}

#[cfg(test)]
mod tests {
    #[test]
    fn selftest_produces_output() {
        assert!(super::selftest() > 2500, "{}", super::selftest());
    }
}
