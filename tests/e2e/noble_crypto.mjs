// The Fabstir encryption done by an independent implementation — the @noble libraries the
// Fabstir TS SDK uses — for tests/tests/fabstir_crypto_interop.rs. Reads one JSON request on
// stdin, prints one JSON answer.
//   {"op":"seal", host_pub, wallet_priv, eph_priv, init_nonce, init_aad, init_plaintext,
//                 session_key, msg_nonce, msg_aad, msg_plaintext}
//     -> {eph_pub, init_ciphertext, signature, msg_ciphertext}        (all hex)
//   {"op":"open", host_priv, eph_pub, init_nonce, init_aad, init_ciphertext, signature,
//                 session_key, msg_nonce, msg_aad, msg_ciphertext}
//     -> {init_plaintext, msg_plaintext, signer}                       (signer: 0x address)
import * as secp from "@noble/secp256k1";
import { xchacha20poly1305 } from "@noble/ciphers/chacha.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, hexToBytes, utf8ToBytes } from "@noble/hashes/utils.js";

secp.hashes.sha256 = sha256;
secp.hashes.hmacSha256 = (key, message) => hmac(sha256, key, message);

const input = JSON.parse(await new Promise((ok) => {
  let text = "";
  process.stdin.on("data", (d) => (text += d));
  process.stdin.on("end", () => ok(text));
}));
const h = (name) => hexToBytes(input[name].replace(/^0x/, ""));

/** HKDF-SHA256 of the ECDH x coordinate (noble returns the compressed shared point). */
const envelopeKey = (priv, pub) => hkdf(sha256, secp.getSharedSecret(priv, pub, true).slice(1), undefined, new Uint8Array(0), 32);

let output;
if (input.op === "seal") {
  const eph = h("eph_priv");
  const key = envelopeKey(eph, h("host_pub"));
  const initCiphertext = xchacha20poly1305(key, h("init_nonce"), h("init_aad")).encrypt(utf8ToBytes(input.init_plaintext));
  // noble's "recovered" format is v‖r‖s; the host expects r‖s‖v.
  const recovered = secp.sign(sha256(initCiphertext), h("wallet_priv"), { prehash: false, format: "recovered" });
  const signature = new Uint8Array([...recovered.slice(1), recovered[0]]);
  const msgCiphertext = xchacha20poly1305(h("session_key"), h("msg_nonce"), h("msg_aad")).encrypt(utf8ToBytes(input.msg_plaintext));
  output = {
    eph_pub: bytesToHex(secp.getPublicKey(eph, true)),
    init_ciphertext: bytesToHex(initCiphertext),
    signature: bytesToHex(signature),
    msg_ciphertext: bytesToHex(msgCiphertext),
  };
} else if (input.op === "open") {
  const key = envelopeKey(h("host_priv"), h("eph_pub"));
  const initCiphertext = h("init_ciphertext");
  const init = xchacha20poly1305(key, h("init_nonce"), h("init_aad")).decrypt(initCiphertext);
  const msg = xchacha20poly1305(h("session_key"), h("msg_nonce"), h("msg_aad")).decrypt(h("msg_ciphertext"));
  const rsv = h("signature");
  const vrs = new Uint8Array([rsv[64], ...rsv.slice(0, 64)]);
  const signerPub = secp.recoverPublicKey(vrs, sha256(initCiphertext), { prehash: false });
  const uncompressed = secp.Point.fromBytes(signerPub).toBytes(false);
  output = {
    init_plaintext: new TextDecoder().decode(init),
    msg_plaintext: new TextDecoder().decode(msg),
    signer: `0x${bytesToHex(keccak_256(uncompressed.slice(1)).slice(12))}`,
  };
} else {
  throw new Error(`unknown op ${input.op}`);
}
console.log(JSON.stringify(output));
