//! The Fabstir backend in direct mode, end to end: the real bridge binary
//! (`--provider fabstir --host-url --host-pubkey --job-id`, wallet key from the environment) in
//! front of a local host node that speaks the live host's protocol with real crypto
//! (`tests/src/fabstir_node/`, as strict as the real node); only the model is scripted. Driven
//! by the real Claude Code CLI (a tool round trip that really runs) and by raw HTTP for the
//! stream's shape, the forwarded parameters, cancellation, a killed host and a refused session;
//! and the node itself over a raw WebSocket (it refuses what the real node refuses).

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

use std::sync::Arc;
use std::time::Duration;

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::clients::run_claude_code_with;
use bridge_tests::fabstir_node::{HostNode, NodePrompt, Script};
use bridge_tests::{http, sse};
use claude_bridge::fabstir::crypto;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);
const CLI_TIMEOUT: Duration = Duration::from_secs(90);
const NODE_KEY: [u8; 32] = [0x4e; 32];
const WALLET_KEY: [u8; 32] = [0x57; 32];
const JOB_ID: &str = "4242";
const MODEL: &str =
    "bartowski/Qwen2.5-Coder-7B-Instruct-GGUF:Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf";

fn wallet_address() -> String {
    let key = crypto::secret_key(&WALLET_KEY, "wallet").unwrap();
    format!("0x{}", crypto::to_hex(&crypto::address(&key.public_key())))
}

async fn bridge_for(node: &HostNode, name: &str, extra: &[&str]) -> Bridge {
    let mut args = vec![
        "--host-url".to_owned(),
        node.url(),
        "--host-pubkey".to_owned(),
        node.pubkey_hex(),
        "--job-id".to_owned(),
        JOB_ID.to_owned(),
        "--max-tokens-cap".to_owned(),
        "2048".to_owned(),
        "--ping-interval".to_owned(),
        "1".to_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let opts = BridgeOptions::fabstir(MODEL, &WALLET_KEY).args(&args);
    Bridge::start_with("http://127.0.0.1:9/unused", name, opts)
        .await
        .unwrap()
}

/// Tokens of `text`, a few characters each (tags split anywhere, as real tokenizers do).
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(3).map(|c| c.iter().collect()).collect()
}

fn script(f: impl Fn(&NodePrompt) -> String + Send + Sync + 'static) -> Script {
    Arc::new(move |p: &NodePrompt| tokens(&f(p)))
}

fn request(stream: bool, max_tokens: u64) -> Value {
    json!({
        "model": "claude-sonnet-4-6", "max_tokens": max_tokens, "stream": stream, "temperature": 0.3,
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "list the files"}]
    })
}

fn ctx(bridge: &Bridge, node: &HostNode) -> String {
    format!(
        "node saw: {:?}\n--- bridge log:\n{}",
        node.log(),
        bridge.log()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_through_an_encrypted_fabstir_session() {
    let node = HostNode::start(
        NODE_KEY,
        script(|p| {
            // A real result block (the system turn only names the tag).
            if p.prompt.contains("<tool_response>\n") {
                String::from("Done: made-by-fabstir.txt is there.")
            } else if p.prompt.contains("# Tools") {
                String::from(
                    "<think>I need Bash.</think>\nI'll create it.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo fabstir > made-by-fabstir.txt\", \"description\": \"Create the file\"}}\n</tool_call>",
                )
            } else {
                String::from("Fabstir file test")
            }
        }),
    )
    .await
    .unwrap();
    let bridge = bridge_for(&node, "fabstir-claude-code", &[]).await;
    let run = run_claude_code_with(
        &bridge.base_url(),
        "Create the file made-by-fabstir.txt containing the word fabstir.",
        &["--allowedTools", "Bash"],
        &[],
        CLI_TIMEOUT,
    )
    .await
    .unwrap();
    let made = run.cwd.path().join("made-by-fabstir.txt");
    assert!(
        made.is_file(),
        "the Bash tool did not run\n{}\n{}",
        run.describe(),
        ctx(&bridge, &node)
    );
    assert_eq!(std::fs::read_to_string(&made).unwrap().trim(), "fabstir");
    assert_eq!(
        run.result_text(),
        Some("Done: made-by-fabstir.txt is there."),
        "{}\n{}",
        run.describe(),
        ctx(&bridge, &node)
    );
    let log = node.log();
    // Every prompt went over one socket, each after a fresh init signed by our wallet.
    assert!(log.prompts.len() >= 2, "{log:?}");
    assert_eq!(log.inits.len(), log.prompts.len(), "{log:?}");
    assert!(
        log.inits
            .iter()
            .all(|(job, signer)| job == JOB_ID && *signer == wallet_address()),
        "{log:?}"
    );
    assert_eq!(log.connections, 1, "{log:?}");
    let tool_turn = log
        .prompts
        .iter()
        .find(|p| p.prompt.contains("<tool_response>\n"))
        .unwrap();
    assert!(tool_turn.prompt.ends_with("<|im_start|>assistant\n"));
    assert!(
        tool_turn
            .prompt
            .contains("\"command\":\"echo fabstir > made-by-fabstir.txt\"")
    );
    assert_eq!(tool_turn.model, MODEL);
    assert!(
        tool_turn.max_tokens <= 2048,
        "--max-tokens-cap: {}",
        tool_turn.max_tokens
    );
}

/// The real OpenAI Codex CLI runs its task (`exec_command`, then its free-form `apply_patch`,
/// then an answer) through `claude-bridge codex` on an encrypted Fabstir session: Responses in,
/// a ChatML prompt to the host, the model's raw-text tool calls back as Codex's items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_its_tools_through_an_encrypted_fabstir_session() {
    use bridge_tests::codex::{
        ANSWER, CodexTurn, EXEC_CMD, EXEC_CMD_2, PATCH, REASONING, run_task,
    };
    let node = HostNode::start(
        NODE_KEY,
        script(|p| {
            let call = |name: &str, arguments: Value| {
                format!(
                    "<tool_call>\n{}\n</tool_call>",
                    json!({"name": name, "arguments": arguments})
                )
            };
            match CodexTurn::after(p.prompt.matches("<tool_response>\n").count()) {
                CodexTurn::Exec => format!(
                    "<think>{REASONING}</think>{}\n{}",
                    call("exec_command", json!({ "cmd": EXEC_CMD })),
                    call("exec_command", json!({ "cmd": EXEC_CMD_2 }))
                ),
                CodexTurn::Patch => call("apply_patch", json!({ "input": PATCH })),
                CodexTurn::Answer => String::from(ANSWER),
            }
        }),
    )
    .await
    .unwrap();
    let args: Vec<String> = [
        "--provider",
        "fabstir",
        "--model",
        MODEL,
        "--host-url",
        &node.url(),
        "--host-pubkey",
        &node.pubkey_hex(),
        "--job-id",
        JOB_ID,
        "--max-tokens-cap",
        "2048",
    ]
    .map(String::from)
    .to_vec();
    let env = BridgeOptions::fabstir(MODEL, &WALLET_KEY).env;
    run_task(&args, &env, &|| format!("node saw: {:?}", node.log()))
        .await
        .unwrap();
    let log = node.log();
    assert!(log.prompts.len() >= 3, "{log:?}");
    assert!(
        log.inits
            .iter()
            .all(|(job, signer)| job == JOB_ID && *signer == wallet_address()),
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_is_well_formed_and_parameters_are_forwarded() {
    let node = HostNode::start(
        NODE_KEY,
        script(|_| {
            String::from("Looking.<tool_call>Bash<arg_key>command</arg_key><arg_value>ls -la</arg_value></tool_call>")
        }),
    )
    .await
    .unwrap();
    let bridge = bridge_for(&node, "fabstir-raw", &["--tool-format", "glm"]).await;

    let r = http::post_messages(&bridge.base_url(), &request(true, 500), T)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx(&bridge, &node));
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
    let message = sse::accumulate(&events).unwrap();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["text"], "Looking.");
    assert_eq!(message["content"][1]["input"], json!({"command": "ls -la"}));
    // Real usage from stream_end.
    let tokens_sent = tokens("Looking.<tool_call>Bash<arg_key>command</arg_key><arg_value>ls -la</arg_value></tool_call>").len();
    assert_eq!(message["usage"]["output_tokens"], json!(tokens_sent));

    let folded = http::post_messages(&bridge.base_url(), &request(false, 5000), T)
        .await
        .unwrap();
    assert_eq!(folded.status, 200, "{}", folded.text());
    let folded = folded.json().unwrap();
    assert_eq!(folded["content"][1]["name"], "Bash");
    assert_eq!(folded["stop_reason"], "tool_use");

    let log = node.log();
    assert_eq!(log.prompts.len(), 2);
    assert_eq!(
        (log.prompts[0].max_tokens, log.prompts[0].temperature),
        (500, 0.3)
    );
    assert_eq!(
        log.prompts[1].max_tokens, 2048,
        "capped by --max-tokens-cap"
    );
    assert!(
        log.prompts[0].prompt.contains("<arg_key>"),
        "--tool-format glm asks for GLM calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_cancels_the_reply_and_the_session_goes_on() {
    let node = HostNode::start(
        NODE_KEY,
        script(|p| {
            if p.prompt.contains("second") {
                String::from("second answer")
            } else {
                "word ".repeat(600)
            }
        }),
    )
    .await
    .unwrap();
    let bridge = bridge_for(&node, "fabstir-cancel", &[]).await;
    let url = format!("{}/v1/messages", bridge.base_url());
    let body = request(true, 4000).to_string().into_bytes();
    let r = http::send_until(
        "POST",
        &url,
        http::MESSAGES_HEADERS,
        Some(body),
        T,
        // Leave after the first text delta (about a thousand more are coming).
        Some(r#""text_delta","text":"wor""#),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let mut waited = Duration::ZERO;
    while node.log().cancels == 0 && waited < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    assert_eq!(
        node.log().cancels,
        1,
        "no stream_cancel\n{}",
        ctx(&bridge, &node)
    );
    // The same paid session answers the next prompt.
    let mut next = request(false, 100);
    next["messages"][0]["content"] = json!("second question");
    let r = http::post_messages(&bridge.base_url(), &next, T)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx(&bridge, &node));
    assert_eq!(r.json().unwrap()["content"][0]["text"], "second answer");
    assert_eq!(node.log().connections, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_host_ends_the_reply_with_an_error_and_direct_mode_says_to_use_a_new_job() {
    let node = HostNode::start(NODE_KEY, script(|_| "slow ".repeat(2000)))
        .await
        .unwrap();
    let bridge = bridge_for(&node, "fabstir-killed", &[]).await;
    let body = request(true, 4000).to_string().into_bytes();
    let r = node
        .kill_mid_stream(&bridge.base_url(), body, T)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let events = sse::parse(&r.body);
    sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
    let error =
        sse::error_event(&events).unwrap_or_else(|| panic!("no error event:\n{}", r.text()));
    assert_eq!(error["error"]["type"], "overloaded_error", "{error}");

    // The job is settled: direct mode cannot open a new one and says what to do.
    let r = http::post_messages(&bridge.base_url(), &request(false, 100), T)
        .await
        .unwrap();
    let error = r
        .anthropic_error(&[502], "api_error")
        .unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--job-id"),
        "{error}"
    );
}

/// An `encrypted_session_init` frame sealed to `node` with this plaintext, signed by the wallet.
fn init_frame(node: &HostNode, plaintext: &str, nonce: &[u8], session_id: Value) -> Value {
    let node_pub = crypto::public_key(
        &crypto::from_hex(&node.pubkey_hex(), "node").unwrap(),
        "node",
    )
    .unwrap();
    let eph = crypto::secret_key(&[0x21; 32], "eph").unwrap();
    let wallet = crypto::secret_key(&WALLET_KEY, "wallet").unwrap();
    let key = crypto::derive_key(&crypto::shared_x(&eph, &node_pub));
    let ciphertext = match <[u8; 24]>::try_from(nonce) {
        Ok(n) => crypto::seal(&key, &n, b"", plaintext.as_bytes()),
        Err(_) => vec![0xab; 64],
    };
    let signature = crypto::sign_sha256(&wallet, &ciphertext);
    json!({"type": "encrypted_session_init", "chain_id": 84532, "session_id": session_id, "job_id": "42",
        "payload": {"ephPubHex": crypto::to_hex(&crypto::compressed(&eph.public_key())),
            "saltHex": "00".repeat(32), "nonceHex": crypto::to_hex(nonce),
            "ciphertextHex": crypto::to_hex(&ciphertext), "signatureHex": crypto::to_hex(&signature),
            "recid": signature[64], "alg": "x", "info": "", "aadHex": ""}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_node_refuses_what_the_real_node_refuses() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let node = HostNode::start(NODE_KEY, script(|_| "ok".into()))
        .await
        .unwrap();
    let url = format!("{}/v1/ws", node.url().replacen("http", "ws", 1));
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let (mut tx, mut rx) = ws.split();
    let mut next = async || -> Value {
        loop {
            let frame = tokio::time::timeout(T, rx.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let Message::Text(text) = frame {
                return serde_json::from_str(&text).unwrap();
            }
        }
    };
    assert_eq!(next().await["type"], "connected");
    let key = format!("0x{}", "77".repeat(32));
    let plain = |job: &str, price: &str| {
        format!(
            r#"{{"sessionKey":"{key}","jobId":{job},"modelName":"m","pricePerToken":{price},"extra":1}}"#
        )
    };
    let refusals = [
        // The real node's words for a float price (fabstir-llm-node 8.38).
        (
            plain(r#""42""#, "1.0"),
            "DECRYPTION_FAILED",
            "Failed to decrypt session init payload: Failed to parse session data JSON: invalid type: floating point `1.0`, expected u64 at line 1 column ",
        ),
        (
            plain(r#""42""#, r#""1""#),
            "DECRYPTION_FAILED",
            "invalid type: string \"1\", expected u64",
        ),
        (
            plain(r#""42""#, "-1"),
            "DECRYPTION_FAILED",
            "invalid value: integer `-1`, expected u64",
        ),
        (
            plain("42", "1"),
            "DECRYPTION_FAILED",
            "invalid type: integer `42`, expected a string",
        ),
        (
            format!(r#"{{"sessionKey":"{key}","jobId":"42","pricePerToken":1}}"#),
            "DECRYPTION_FAILED",
            "missing field `modelName`",
        ),
        (
            plain(r#""42""#, "1").replace(&key, "0x1234"),
            "DECRYPTION_FAILED",
            "Invalid session key length: expected 32 bytes, got 2",
        ),
    ];
    let mut sent = Vec::new();
    for (plaintext, code, words) in &refusals {
        let frame = init_frame(&node, plaintext, &[0x0a; 24], json!("42"));
        tx.send(Message::text(frame.to_string())).await.unwrap();
        let answer = next().await;
        assert_eq!(
            (answer["type"].as_str(), answer["code"].as_str()),
            (Some("error"), Some(*code)),
            "{plaintext}: {answer}"
        );
        assert!(
            answer["message"].as_str().unwrap().contains(words),
            "{plaintext}: {answer}"
        );
        assert_eq!(answer["session_id"], "42", "{answer}");
        sent.push(*code);
    }
    // The envelope itself: a short nonce, a missing field.
    let frame = init_frame(&node, &plain(r#""42""#, "1"), &[0x0a; 12], json!("42"));
    tx.send(Message::text(frame.to_string())).await.unwrap();
    let answer = next().await;
    assert_eq!(answer["code"], "INVALID_NONCE_SIZE", "{answer}");
    assert_eq!(
        answer["message"],
        "Invalid nonce size: expected 24 bytes, got 12"
    );
    let mut frame = init_frame(&node, &plain(r#""42""#, "1"), &[0x0a; 24], json!("42"));
    frame["payload"].as_object_mut().unwrap().remove("aadHex");
    tx.send(Message::text(frame.to_string())).await.unwrap();
    assert_eq!(next().await["code"], "INVALID_PAYLOAD");
    // Not JSON and JSON pings: no answer at all (the next answer is the ack below).
    tx.send(Message::text("not json")).await.unwrap();
    tx.send(Message::text(r#"{"type":"ping"}"#)).await.unwrap();

    // What the real node accepts: an integer price, a `0x` key, unknown fields ignored.
    let frame = init_frame(&node, &plain(r#""42""#, "2000"), &[0x0a; 24], json!("42"));
    tx.send(Message::text(frame.to_string())).await.unwrap();
    let ack = next().await;
    assert_eq!(
        (ack["type"].as_str(), ack["status"].as_str()),
        (Some("session_init_ack"), Some("success")),
        "{ack}"
    );
    assert_eq!(ack["job_id"], 42);

    // A prompt the node's validation refuses: `max_tokens: 0`.
    let session_key = [0x77u8; 32];
    let prompt = r#"{"prompt":"hi","model":"m","max_tokens":0,"temperature":0.5,"stream":true}"#;
    let sealed = crypto::seal(&session_key, &[0x0b; 24], b"message_0", prompt.as_bytes());
    let message = json!({"type": "encrypted_message", "session_id": "42", "id": "1-a",
        "payload": {"ciphertextHex": crypto::to_hex(&sealed), "nonceHex": crypto::to_hex(&[0x0b; 24]),
                    "aadHex": crypto::to_hex(b"message_0")}});
    tx.send(Message::text(message.to_string())).await.unwrap();
    let error = next().await;
    assert_eq!(
        error["error"], "Validation error for max_tokens: must be greater than 0",
        "{error}"
    );
    assert_eq!(next().await["reason"], "error");
    // A session id that was never initialised has no key.
    let mut other = message.clone();
    other["session_id"] = json!("43");
    tx.send(Message::text(other.to_string())).await.unwrap();
    assert_eq!(next().await["code"], "SESSION_KEY_NOT_FOUND");
    assert!(node.log().prompts.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_refuses_the_session_is_a_bad_gateway_naming_the_host() {
    let node = HostNode::start(NODE_KEY, script(|_| "never".into()))
        .await
        .unwrap();
    // Sealed to another key: the node cannot open the init and says DECRYPTION_FAILED.
    let other = crypto::secret_key(&[0x11; 32], "other").unwrap();
    let args = [
        "--host-url".to_owned(),
        node.url(),
        "--host-pubkey".to_owned(),
        crypto::to_hex(&crypto::compressed(&other.public_key())),
        "--job-id".to_owned(),
        JOB_ID.to_owned(),
    ];
    let opts = BridgeOptions::fabstir(MODEL, &WALLET_KEY).args(&args);
    let bridge = Bridge::start_with("http://127.0.0.1:9/unused", "fabstir-refused", opts)
        .await
        .unwrap();
    for stream in [true, false] {
        let r = http::post_messages(&bridge.base_url(), &request(stream, 100), T)
            .await
            .unwrap();
        let error = r
            .anthropic_error(&[502], "api_error")
            .unwrap_or_else(|e| panic!("{e}: {}", r.text()));
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(&node.url()), "names the host: {message}");
        assert!(
            message.contains("DECRYPTION_FAILED"),
            "says what the host said: {message}"
        );
    }
    assert!(
        node.log()
            .errors
            .iter()
            .all(|code| code == "DECRYPTION_FAILED"),
        "{:?}",
        node.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_fabstir_flags_are_named_at_start() {
    let opts = BridgeOptions {
        provider: "fabstir".into(),
        model: Some(MODEL.into()),
        api_key: None,
        ..BridgeOptions::default()
    };
    let error = Bridge::start_with("http://127.0.0.1:9/unused", "fabstir-flags", opts)
        .await
        .err()
        .unwrap_or_else(|| panic!("started without --host-url"));
    assert!(error.to_string().contains("--host-url"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_host_is_reached_over_wss_with_a_private_ca() {
    let cert = bridge_tests::tls::TestCert::generate().unwrap();
    let node = HostNode::start_tls(
        NODE_KEY,
        script(|_| String::from("over TLS")),
        cert.acceptor().unwrap(),
    )
    .await
    .unwrap();
    assert!(node.url().starts_with("https://"));
    let ca = cert.pem_path().to_string_lossy().into_owned();
    let bridge = bridge_for(&node, "fabstir-wss", &["--ca-cert", &ca]).await;
    let r = http::post_messages(&bridge.base_url(), &request(false, 50), T)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx(&bridge, &node));
    assert_eq!(r.json().unwrap()["content"][0]["text"], "over TLS");

    // Without the private CA the certificate is refused, and the error says where it failed.
    let untrusted = bridge_for(&node, "fabstir-wss-untrusted", &[]).await;
    let r = http::post_messages(&untrusted.base_url(), &request(false, 50), T)
        .await
        .unwrap();
    let error = r
        .anthropic_error(&[529], "overloaded_error")
        .unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("wss://"),
        "{error}"
    );
}
