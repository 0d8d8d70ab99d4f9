// Writes the playground's samples.json: every golden fixture with an upstream stream (tests/fixtures)
// as an "OpenAI Chat stream" sample, every raw-text fixture (tests/fixtures/fabstir) as a "Fabstir
// host reply" sample, and a few Anthropic streams to check.
//   node make-samples.mjs FIXTURES_DIR OUT.json
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [fixtures, out] = process.argv.slice(2);
const read = (dir, file) => (existsSync(join(dir, file)) ? readFileSync(join(dir, file), "utf8") : undefined);
const samples = readdirSync(fixtures)
  .sort()
  .filter((name) => existsSync(join(fixtures, name, "upstream.sse")))
  .map((name) => ({ mode: "chat", name, request: read(join(fixtures, name), "request.json"), stream: read(join(fixtures, name), "upstream.sse") }));

// Raw-text (Fabstir) replies: the model's tokens joined, with the request they answer.
const fabstir = join(fixtures, "fabstir");
if (existsSync(fabstir)) {
  for (const name of readdirSync(fabstir).sort()) {
    const tokens = read(join(fabstir, name), "tokens.json");
    if (!tokens) continue;
    samples.push({ mode: "fabstir", name, request: read(join(fabstir, name), "request.json"), stream: JSON.parse(tokens).join("") });
  }
}

const ev = (e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
const start = { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "claude-x", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 0 } } };
const open = { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } };
const delta = { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hello" } };
const close = { type: "content_block_stop", index: 0 };
const end = { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { input_tokens: 12, output_tokens: 1 } };
const stop = { type: "message_stop" };
samples.push(
  { mode: "anthropic", name: "valid text stream", stream: [start, open, delta, close, end, stop].map(ev).join("") },
  { mode: "anthropic", name: "broken: delta after its block closed", stream: [start, open, close, delta, end, stop].map(ev).join("") },
  { mode: "anthropic", name: "broken: ends without message_stop", stream: [start, open, delta, close].map(ev).join("") },
);
writeFileSync(out, JSON.stringify(samples, null, 1));
console.log(`playground: ${samples.length} samples -> ${out}`);
