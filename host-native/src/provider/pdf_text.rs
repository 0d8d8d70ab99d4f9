//! PDF documents as text, for upstreams that take no files (`documents = "text"` on an
//! OpenAI-compatible upstream; always for Fabstir hosts).
//!
//! Before the core converts a request for such an upstream, every base64 PDF `document` block —
//! in a user turn or inside a tool result, where Claude Code's Read tool puts the PDFs it reads —
//! becomes a text document holding the PDF's text (pdf-extract), its title kept. The core then
//! inlines it like any text document. A PDF whose text cannot be had (damaged, encrypted, a scan
//! without a text layer, too large, too slow) stays as it is, and the core puts a note in its
//! place that says so; the log says why.
//!
//! Extraction runs on the blocking pool with a time limit: a hostile PDF can neither stall the
//! runtime nor, by panicking inside the parser, take the request down with it.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use claude_bridge::provider::pdf_text::inline_pdf_text;
//! let body = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}"#;
//! // No PDF: the same bytes come back, not even parsed.
//! let same = inline_pdf_text(bytes::Bytes::from_static(body)).await;
//! assert_eq!(&same[..], &body[..]);
//! # });
//! ```

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};
use tracing::warn;

/// Largest decoded PDF the bridge reads for its text.
const MAX_PDF_BYTES: usize = 32 << 20;
/// How long one PDF's extraction may take.
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(20);

/// `body` with each base64 PDF document replaced by a text document of its text (see the
/// module docs); `body` itself when it holds no PDF or is not a JSON object.
pub async fn inline_pdf_text(body: Bytes) -> Bytes {
    if memchr::memmem::find(&body, b"application/pdf").is_none() {
        return body;
    }
    let Ok(mut request) = serde_json::from_slice::<Value>(&body) else {
        // The core refuses it with the parse error.
        return body;
    };
    let mut changed = false;
    for document in pdf_documents(&mut request) {
        let title = document
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("document.pdf")
            .to_owned();
        let data = document
            .pointer("/source/data")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match pdf_text(data).await {
            Ok(text) => {
                document["source"] =
                    json!({"type": "text", "media_type": "text/plain", "data": text});
                if document.get("title").is_none() {
                    document["title"] = Value::String(title);
                }
                changed = true;
            }
            Err(why) => warn!(document = %title, %why, "PDF sent without its text"),
        }
    }
    if !changed {
        return body;
    }
    serde_json::to_vec(&request).map_or(body, Bytes::from)
}

/// The base64 PDF document blocks of the request's messages, tool results included.
fn pdf_documents(request: &mut Value) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) else {
        return out;
    };
    for message in messages {
        let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        for block in blocks {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                if let Some(inner) = block.get_mut("content").and_then(Value::as_array_mut) {
                    out.extend(inner.iter_mut().filter(|b| is_pdf(b)));
                }
            } else if is_pdf(block) {
                out.push(block);
            }
        }
    }
    out
}

fn is_pdf(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("document")
        && block.pointer("/source/type").and_then(Value::as_str) == Some("base64")
        && block.pointer("/source/media_type").and_then(Value::as_str) == Some("application/pdf")
}

/// The text of the base64 PDF `data`, or why there is none.
async fn pdf_text(data: &str) -> Result<String, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("its base64 does not decode: {e}"))?;
    text_of_pdf(bytes).await
}

/// The text of the PDF `bytes`, or why there is none (on the blocking pool, time-limited).
pub(crate) async fn text_of_pdf(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.len() > MAX_PDF_BYTES {
        return Err(format!(
            "{} bytes is more than the {MAX_PDF_BYTES} bytes read for text",
            bytes.len()
        ));
    }
    let extraction =
        tokio::task::spawn_blocking(move || pdf_extract::extract_text_from_mem(&bytes));
    let text = match tokio::time::timeout(EXTRACT_TIMEOUT, extraction).await {
        Err(_) => return Err(format!("extraction took more than {EXTRACT_TIMEOUT:?}")),
        Ok(Err(join)) => return Err(format!("the PDF reader failed on it: {join}")),
        Ok(Ok(Err(e))) => return Err(format!("the PDF reader refused it: {e}")),
        Ok(Ok(Ok(text))) => text,
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(String::from("it has no text layer (a scan?)"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-page PDF reading "Quarterly revenue grew 12 percent" (tests/fixtures/documents).
    const REPORT_PDF: &[u8] = include_bytes!("../../../tests/fixtures/documents/report.pdf");

    fn request_with(pdf: &[u8]) -> Bytes {
        let data = base64::engine::general_purpose::STANDARD.encode(pdf);
        let body = json!({"model": "m", "max_tokens": 9, "messages": [
            {"role": "user", "content": [
                {"type": "document", "title": "report.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": data}},
                {"type": "tool_result", "tool_use_id": "t", "content": [
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}]},
                {"type": "text", "text": "summarise"}]}]});
        Bytes::from(serde_json::to_vec(&body).unwrap())
    }

    #[tokio::test]
    async fn pdfs_become_text_documents_in_turns_and_tool_results() {
        let out = inline_pdf_text(request_with(REPORT_PDF)).await;
        let out: Value = serde_json::from_slice(&out).unwrap();
        let blocks = &out["messages"][0]["content"];
        assert_eq!(blocks[0]["title"], "report.pdf");
        assert_eq!(blocks[0]["source"]["type"], "text");
        let text = blocks[0]["source"]["data"].as_str().unwrap();
        assert!(
            text.contains("Quarterly revenue grew 12 percent"),
            "{text:?}"
        );
        let inner = &blocks[1]["content"][0];
        assert_eq!(inner["title"], "document.pdf");
        assert!(
            inner["source"]["data"]
                .as_str()
                .unwrap()
                .contains("Quarterly revenue grew")
        );
        assert_eq!(blocks[2]["text"], "summarise");
    }

    #[tokio::test]
    async fn a_pdf_without_text_stays_for_the_core_to_note() {
        let body = request_with(b"%PDF-1.4 this is no PDF at all");
        let out = inline_pdf_text(body.clone()).await;
        assert_eq!(out, body, "nothing changed, nothing re-encoded");
        let bad_base64 = Bytes::from_static(
            br#"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"***"}}]}]}"#,
        );
        assert_eq!(inline_pdf_text(bad_base64.clone()).await, bad_base64);
    }
}
