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
    // The fronts: an OpenAI client's request in, Anthropic SSE turned into its stream.
    const CHAT_REQUEST: &[u8] = br#"{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"t","parameters":{"type":"object"}}}]}"#;
    const RESPONSES_REQUEST: &[u8] = br#"{"model":"gpt-x","input":"hi","include":["reasoning.encrypted_content"],"tools":[{"type":"custom","name":"t"}]}"#;
    const ANTHROPIC_SSE: &[u8] = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"r\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"t\",\"input\":{}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"input\\\":\\\"x\\\"}\"}}\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut produced = 0;
    for dialect in api::Dialect::ALL {
        let request = match dialect {
            api::Dialect::FrontOpenaiChat => CHAT_REQUEST,
            api::Dialect::FrontOpenaiResponses => RESPONSES_REQUEST,
            _ => REQUEST,
        };
        let Ok(converted) = api::prepare(dialect, request, "{}") else {
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
            api::Dialect::FrontOpenaiChat | api::Dialect::FrontOpenaiResponses => {
                (ANTHROPIC_SSE, Vec::new())
            }
            _ => (UPSTREAM, Vec::new()),
        };
        let front = serde_json::from_str::<serde_json::Value>(&converted.body)
            .ok()
            .and_then(|body| {
                serde_json::from_value::<api::FrontOptions>(body["answer"].clone()).ok()
            })
            .unwrap_or_default();
        for stream in [true, false] {
            let mut translator = api::Translator::new(api::StreamOptions {
                stream,
                model: converted.client_model.clone(),
                input_tokens_estimate: converted.input_tokens_estimate,
                id_seed: 1,
                dialect,
                tools: tools.clone(),
                tool_names: converted.tool_names.clone(),
                front: front.clone(),
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
