//! The bridge's Fabstir encryption against an independent implementation: the @noble libraries
//! the Fabstir TS SDK uses (`tests/e2e/noble_crypto.mjs`, run with Node). noble seals an init
//! envelope and a prompt that our host side opens; we seal them and noble opens them; both
//! recover the signer's address from the init signature.
#![expect(clippy::panic, reason = "test helpers: a failed call is a failed test")]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use bridge_core::fabstir::protocol::SessionInitPlain;
use claude_bridge::fabstir::crypto::{
    self, Key, Nonce, address, compressed, derive_key, from_hex, open, seal, secret_key, shared_x,
    sign_sha256, to_hex,
};
use serde_json::{Value, json};

fn noble(request: &Value) -> Value {
    let e2e = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e");
    assert!(
        e2e.join("node_modules/@noble/secp256k1").is_dir(),
        "@noble libraries missing: run scripts/setup-e2e.sh (make setup)"
    );
    let mut child = Command::new("node")
        .arg("noble_crypto.mjs")
        .current_dir(&e2e)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(request.to_string().as_bytes()))
        .transpose()
        .unwrap_or_else(|e| panic!("{e}"));
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "noble_crypto.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
}

fn field(v: &Value, name: &str) -> Vec<u8> {
    from_hex(v[name].as_str().unwrap_or_default(), "noble output").unwrap_or_else(|e| panic!("{e}"))
}

const HOST_PRIV: [u8; 32] = [0x5a; 32];
const WALLET_PRIV: [u8; 32] = [0x3c; 32];
const EPH_PRIV: [u8; 32] = [0x21; 32];
const SESSION_KEY: Key = [0x77; 32];
const INIT_NONCE: Nonce = [0x0a; 24];
const MSG_NONCE: Nonce = [0x0b; 24];

fn init_plain() -> String {
    serde_json::to_string(&SessionInitPlain {
        session_key: format!("0x{}", to_hex(&SESSION_KEY)),
        job_id: "4711".into(),
        model_name: "org/repo:model.gguf".into(),
        price_per_token: 2000,
        recovery_public_key: None,
    })
    .unwrap_or_default()
}

const PROMPT: &str = r#"{"prompt":"<|im_start|>user\nSalut, ça va? 😀<|im_end|>\n<|im_start|>assistant\n","model":"m","max_tokens":64,"temperature":0.2,"stream":true}"#;

#[test]
fn noble_seals_and_our_host_side_opens() {
    let host = secret_key(&HOST_PRIV, "host").unwrap_or_else(|e| panic!("{e}"));
    let wallet = secret_key(&WALLET_PRIV, "wallet").unwrap_or_else(|e| panic!("{e}"));
    let sealed = noble(&json!({
        "op": "seal",
        "host_pub": to_hex(&compressed(&host.public_key())),
        "wallet_priv": to_hex(&WALLET_PRIV),
        "eph_priv": to_hex(&EPH_PRIV),
        "init_nonce": to_hex(&INIT_NONCE), "init_aad": "", "init_plaintext": init_plain(),
        "session_key": to_hex(&SESSION_KEY),
        "msg_nonce": to_hex(&MSG_NONCE), "msg_aad": to_hex(b"message_0"), "msg_plaintext": PROMPT,
    }));
    // The host: ECDH with the ephemeral key from the frame, open the init, read the session key.
    let eph_pub =
        crypto::public_key(&field(&sealed, "eph_pub"), "eph").unwrap_or_else(|e| panic!("{e}"));
    let key = derive_key(&shared_x(&host, &eph_pub));
    let ciphertext = field(&sealed, "init_ciphertext");
    let init = open(&key, &INIT_NONCE, b"", &ciphertext).unwrap_or_else(|e| panic!("{e}"));
    let init: SessionInitPlain = serde_json::from_slice(&init).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(init.job_id, "4711");
    let session_key: Key =
        crypto::from_hex_array(&init.session_key, "session key").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(session_key, SESSION_KEY);
    let signer = crypto::recover_sha256_signer(&ciphertext, &field(&sealed, "signature"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(signer, address(&wallet.public_key()));
    let prompt = open(
        &session_key,
        &MSG_NONCE,
        b"message_0",
        &field(&sealed, "msg_ciphertext"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(String::from_utf8_lossy(&prompt), PROMPT);
    // And the same bytes as ours, since both sides are deterministic here.
    let eph = secret_key(&EPH_PRIV, "eph").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compressed(&eph.public_key()), field(&sealed, "eph_pub"));
    assert_eq!(
        seal(
            &derive_key(&shared_x(&eph, &host.public_key())),
            &INIT_NONCE,
            b"",
            init_plain().as_bytes()
        ),
        ciphertext
    );
    assert_eq!(
        sign_sha256(&wallet, &ciphertext).to_vec(),
        field(&sealed, "signature")
    );
}

#[test]
fn we_seal_and_noble_opens() {
    let host = secret_key(&HOST_PRIV, "host").unwrap_or_else(|e| panic!("{e}"));
    let wallet = secret_key(&WALLET_PRIV, "wallet").unwrap_or_else(|e| panic!("{e}"));
    let eph = secret_key(&[0x42; 32], "eph").unwrap_or_else(|e| panic!("{e}"));
    let key = derive_key(&shared_x(&eph, &host.public_key()));
    let aad = b"session_init";
    let ciphertext = seal(&key, &INIT_NONCE, aad, init_plain().as_bytes());
    let signature = sign_sha256(&wallet, &ciphertext);
    let msg = seal(&SESSION_KEY, &MSG_NONCE, b"message_3", PROMPT.as_bytes());
    let opened = noble(&json!({
        "op": "open",
        "host_priv": to_hex(&HOST_PRIV),
        "eph_pub": to_hex(&compressed(&eph.public_key())),
        "init_nonce": to_hex(&INIT_NONCE), "init_aad": to_hex(aad), "init_ciphertext": to_hex(&ciphertext),
        "signature": to_hex(&signature),
        "session_key": to_hex(&SESSION_KEY),
        "msg_nonce": to_hex(&MSG_NONCE), "msg_aad": to_hex(b"message_3"), "msg_ciphertext": to_hex(&msg),
    }));
    assert_eq!(
        opened["init_plaintext"].as_str(),
        Some(init_plain().as_str())
    );
    assert_eq!(opened["msg_plaintext"].as_str(), Some(PROMPT));
    assert_eq!(
        opened["signer"].as_str(),
        Some(format!("0x{}", to_hex(&address(&wallet.public_key()))).as_str())
    );
}
