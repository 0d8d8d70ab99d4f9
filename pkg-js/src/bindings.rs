//! The JS facade: one wasm-bindgen function or class per core operation. Nothing here decides
//! anything; it converts JS values to the core's types and back, and core errors to
//! `BridgeCoreError` (`js/error.js`).
//!
//! Values cross as plain JS objects with the core's JSON field names (`snake_case`, as on the
//! wire and in the WASI component's JSON strings), so a TypeScript program sees exactly the
//! shapes documented by the Anthropic and OpenAI APIs. Byte inputs accept a string (UTF-8) or a
//! `Uint8Array` (Node's `Buffer` included).

use bridge_core::api::{self, ErrorKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = include_str!("../js/types.d.ts");

#[wasm_bindgen(module = "/js/error.js")]
extern "C" {
    #[wasm_bindgen(js_name = bridgeCoreError)]
    fn bridge_core_error(kind: &str, status: u16, message: &str) -> JsValue;
}

/// A `BridgeCoreError` of Anthropic type `kind`.
fn core_error(kind: ErrorKind, message: &str) -> JsValue {
    bridge_core_error(kind.as_str(), kind.status(), message)
}

/// An argument of the wrong JS type: a programming error, not a core failure.
fn type_error(message: &str) -> JsValue {
    js_sys::TypeError::new(message).into()
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            core_error(
                ErrorKind::Api,
                &format!("cannot convert a result to JS: {e}"),
            )
        })
}

/// A JS object → a core type; `kind` says whose fault a mismatch is.
fn from_js<T: DeserializeOwned>(value: JsValue, what: &str, kind: ErrorKind) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        // Its Display is the JS error's ("Error: missing field `model`").
        let text = e.to_string();
        let reason = text.strip_prefix("Error: ").unwrap_or(&text);
        core_error(kind, &format!("invalid {what}: {reason}"))
    })
}

/// Optional options: absent, `undefined` or `null` → the defaults.
fn options_or_default<T: DeserializeOwned + Default>(
    value: Option<JsValue>,
    what: &str,
) -> Result<T, JsValue> {
    match value {
        Some(value) if !value.is_undefined() && !value.is_null() => {
            from_js(value, what, ErrorKind::Api)
        }
        _ => Ok(T::default()),
    }
}

/// A string (UTF-8) or a `Uint8Array` → bytes.
fn bytes(value: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
    if let Some(text) = value.as_string() {
        return Ok(text.into_bytes());
    }
    if let Some(array) = value.dyn_ref::<js_sys::Uint8Array>() {
        return Ok(array.to_vec());
    }
    Err(type_error(&format!(
        "{what} must be a string or a Uint8Array"
    )))
}

fn request_error(error: &bridge_core::error::RequestError) -> JsValue {
    core_error(error.kind(), &error.to_string())
}

/// Anthropic Messages request → the upstream request of `dialect` (`"openai_chat"`,
/// `"openai_responses"`, `"chatml"`), with that dialect's options.
///
/// # Errors
/// `BridgeCoreError` (`invalid_request_error`) naming the field to fix; `api_error` for an
/// unknown dialect or options that do not parse.
#[wasm_bindgen(js_name = prepare, unchecked_return_type = "ConvertedRequest")]
pub fn prepare(
    #[wasm_bindgen(unchecked_param_type = "Dialect")] dialect: &str,
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] request: JsValue,
    #[wasm_bindgen(
        unchecked_optional_param_type = "ConvertOptions | ResponsesOptions | ChatmlOptions"
    )]
    options: Option<JsValue>,
) -> Result<JsValue, JsValue> {
    let request = bytes(&request, "the request")?;
    let options: serde_json::Value = options_or_default(options, "prepare options")?;
    let dialect = api::Dialect::parse(dialect).map_err(|e| request_error(&e))?;
    let options = if options.is_null() {
        String::from("{}")
    } else {
        options.to_string()
    };
    let converted = api::prepare(dialect, &request, &options).map_err(|e| request_error(&e))?;
    to_js(&converted)
}

/// Estimated input tokens of an Anthropic request (`/v1/messages/count_tokens`).
///
/// # Errors
/// `BridgeCoreError` when the body is not a Messages request.
#[wasm_bindgen(js_name = countTokens)]
pub fn count_tokens(
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] request: JsValue,
) -> Result<u32, JsValue> {
    api::count_tokens(&bytes(&request, "the request")?).map_err(|e| request_error(&e))
}

/// An upstream's reply (bytes of its dialect) → Anthropic response, as SSE text or folded.
#[wasm_bindgen(js_name = Translator)]
#[derive(Debug)]
pub struct JsTranslator {
    inner: api::Translator,
}

#[wasm_bindgen(js_class = Translator)]
impl JsTranslator {
    /// A translator for one upstream reply; `options.dialect` says what the upstream speaks.
    ///
    /// # Errors
    /// `BridgeCoreError` (`api_error`) when the options lack a field.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "StreamOptions")] options: JsValue,
    ) -> Result<JsTranslator, JsValue> {
        let options: api::StreamOptions = from_js(options, "stream options", ErrorKind::Api)?;
        Ok(Self {
            inner: api::Translator::new(options),
        })
    }

    /// Feed upstream bytes or text (any chunking); returns the SSE text to write now.
    ///
    /// # Errors
    /// `TypeError` when `chunk` is neither a string nor a `Uint8Array`.
    pub fn feed(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] chunk: JsValue,
    ) -> Result<String, JsValue> {
        Ok(self.inner.feed(&bytes(&chunk, "the chunk")?))
    }

    /// The upstream failed: end the response with an error of Anthropic type `kind`.
    pub fn fail(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ErrorKind")] kind: &str,
        message: &str,
    ) -> String {
        self.inner.fail(ErrorKind::from_type_str(kind), message)
    }

    /// The reply ended: the last SSE text, or the folded message. `end` is what the upstream
    /// reported outside its stream (a raw-text host's finish reason and token counts, all
    /// optional); the SSE dialects leave it out.
    ///
    /// # Errors
    /// `BridgeCoreError` (`api_error`) when `end` has fields of the wrong type.
    #[wasm_bindgen(unchecked_return_type = "Finished")]
    pub fn finish(
        &mut self,
        #[wasm_bindgen(unchecked_optional_param_type = "StreamEnd")] end: Option<JsValue>,
    ) -> Result<JsValue, JsValue> {
        let end: api::StreamEnd = options_or_default(end, "stream end")?;
        to_js(&self.inner.finish(&end))
    }
}

/// A Fabstir session init (`SessionInitPlain` as JSON text) → the exact plaintext a host
/// accepts (`jobId` a string, `pricePerToken` an integer).
///
/// # Errors
/// `BridgeCoreError` (`api_error`) naming the field that is missing or of the wrong type.
#[wasm_bindgen(js_name = fabstirSessionInit)]
pub fn fabstir_session_init(init_json: &str) -> Result<String, JsValue> {
    api::fabstir_session_init(init_json).map_err(|e| request_error(&e))
}

/// Incremental Server-Sent Events decoder.
#[wasm_bindgen(js_name = SseDecoder)]
#[derive(Debug, Default)]
pub struct JsSseDecoder {
    inner: api::SseDecoder,
}

#[wasm_bindgen(js_class = SseDecoder)]
impl JsSseDecoder {
    /// A decoder at the start of a stream.
    #[wasm_bindgen(constructor)]
    #[must_use]
    pub fn new() -> JsSseDecoder {
        Self::default()
    }

    /// Feed bytes (any chunking); returns the frames they complete.
    ///
    /// # Errors
    /// `TypeError` when `chunk` is neither a string nor a `Uint8Array`.
    #[wasm_bindgen(unchecked_return_type = "SseFrame[]")]
    pub fn feed(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] chunk: JsValue,
    ) -> Result<JsValue, JsValue> {
        to_js(&self.inner.feed(&bytes(&chunk, "the chunk")?))
    }

    /// The stream ended: the frame still pending, if any.
    ///
    /// # Errors
    /// Only if the result cannot be converted to JS.
    #[wasm_bindgen(unchecked_return_type = "SseFrame[]")]
    pub fn finish(&mut self) -> Result<JsValue, JsValue> {
        to_js(&self.inner.finish())
    }
}

/// One Anthropic stream event → its exact SSE text.
///
/// # Errors
/// `BridgeCoreError` (`invalid_request_error`) when `event` is not an Anthropic stream event.
#[wasm_bindgen(js_name = encodeEvent)]
pub fn encode_event(
    #[wasm_bindgen(unchecked_param_type = "StreamEvent")] event: JsValue,
) -> Result<String, JsValue> {
    let event: api::StreamEvent = from_js(event, "stream event", ErrorKind::InvalidRequest)?;
    Ok(api::encode_event(&event))
}

/// One SSE frame with any event name and data → text (multi-line data → several `data:` lines).
///
/// # Errors
/// `BridgeCoreError` (`invalid_request_error`) when the event name holds CR or LF.
#[wasm_bindgen(js_name = encodeSseFrame)]
pub fn encode_sse_frame(event: &str, data: &str) -> Result<String, JsValue> {
    api::encode_sse_frame(event, data)
        .map_err(|e| core_error(ErrorKind::InvalidRequest, &e.to_string()))
}

/// Checks an Anthropic stream event by event (the rules every stream the bridge emits keeps).
#[wasm_bindgen(js_name = StreamValidator)]
#[derive(Debug, Default)]
pub struct JsStreamValidator {
    inner: api::Validator,
}

#[wasm_bindgen(js_class = StreamValidator)]
impl JsStreamValidator {
    /// A validator expecting `message_start`.
    #[wasm_bindgen(constructor)]
    #[must_use]
    pub fn new() -> JsStreamValidator {
        Self::default()
    }

    /// Check the next event: `null`, or the rule it breaks.
    ///
    /// # Errors
    /// `BridgeCoreError` (`invalid_request_error`) when `event` is not an Anthropic stream event.
    #[wasm_bindgen(unchecked_return_type = "Violation | null")]
    pub fn push(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "StreamEvent")] event: JsValue,
    ) -> Result<JsValue, JsValue> {
        let event: api::StreamEvent = from_js(event, "stream event", ErrorKind::InvalidRequest)?;
        self.inner
            .push(&event)
            .map_or_else(|violation| to_js(&violation), |()| Ok(JsValue::NULL))
    }

    /// The stream ended: `null` when it ended with `message_stop` or `error`.
    ///
    /// # Errors
    /// Only if the result cannot be converted to JS.
    #[wasm_bindgen(unchecked_return_type = "Violation | null")]
    pub fn finish(&self) -> Result<JsValue, JsValue> {
        self.inner
            .finish()
            .map_or_else(|violation| to_js(&violation), |()| Ok(JsValue::NULL))
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Validation {
    Valid {
        valid: bool,
        events: Vec<api::StreamEvent>,
    },
    Invalid {
        valid: bool,
        violation: api::Violation,
    },
}

/// Decode and check a whole Anthropic SSE stream.
///
/// # Errors
/// `TypeError` when `sse` is neither a string nor a `Uint8Array`.
#[wasm_bindgen(js_name = validateSse, unchecked_return_type = "Validation")]
pub fn validate_sse(
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] sse: JsValue,
) -> Result<JsValue, JsValue> {
    to_js(&match api::validate_sse(&bytes(&sse, "the stream")?) {
        Ok(events) => Validation::Valid {
            valid: true,
            events,
        },
        Err(violation) => Validation::Invalid {
            valid: false,
            violation,
        },
    })
}

/// Fold an Anthropic SSE stream into what a non-streaming client gets.
///
/// # Errors
/// `TypeError` when `sse` is neither a string nor a `Uint8Array`.
#[wasm_bindgen(js_name = foldSse, unchecked_return_type = "Finished")]
pub fn fold_sse(
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] sse: JsValue,
) -> Result<JsValue, JsValue> {
    to_js(&api::fold_sse(&bytes(&sse, "the stream")?))
}

/// Route an Anthropic request: its primary target, the fallbacks and why. `config` is the
/// `[router]` table as an object (or its JSON text), targets as `"provider,model"` strings.
///
/// # Errors
/// `BridgeCoreError` (`api_error`) naming the configuration key that does not parse;
/// `invalid_request_error` when the request is not a Messages request; `TypeError` when the
/// request is neither a string nor a `Uint8Array`.
#[wasm_bindgen(js_name = route, unchecked_return_type = "Route")]
pub fn route(
    #[wasm_bindgen(unchecked_param_type = "RouterConfig | string")] config: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] request: JsValue,
) -> Result<JsValue, JsValue> {
    let config = match config.as_string() {
        Some(json) => json,
        None => from_js::<serde_json::Value>(config, "router config", ErrorKind::Api)?.to_string(),
    };
    let chosen =
        api::route(&config, &bytes(&request, "the request")?).map_err(|e| request_error(&e))?;
    to_js(&chosen)
}
