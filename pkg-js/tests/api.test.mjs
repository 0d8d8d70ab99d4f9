// The facade's contract in Node: typed errors, inputs as string or bytes, the SSE decoder and
// encoders, the validator's complaints, and resources that behave like the core's.
import assert from "node:assert/strict";
import { test } from "node:test";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { packageDir, requireBuilt } from "./support.mjs";

requireBuilt();
const core = await import(pathToFileURL(join(packageDir, "node.js")).href);

const REQUEST = { model: "claude-sonnet-4-6", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
const upstream = (...chunks) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";

test("a bad request throws a BridgeCoreError naming the field to fix", () => {
  const bad = JSON.stringify({ model: "m", max_tokens: 10 });
  assert.throws(
    () => core.prepare("openai_chat", bad),
    (e) => {
      assert.ok(e instanceof core.BridgeCoreError, `not a BridgeCoreError: ${e}`);
      assert.ok(e instanceof Error);
      assert.equal(e.name, "BridgeCoreError");
      assert.equal(e.kind, "invalid_request_error");
      assert.equal(e.status, 400);
      assert.match(e.message, /messages/);
      return true;
    },
  );
  assert.throws(() => core.prepare("openai_chat", "{not json"), { name: "BridgeCoreError", kind: "invalid_request_error", message: /not valid JSON/ });
  assert.throws(() => core.countTokens("[1,2]"), { name: "BridgeCoreError", status: 400 });
});

test("inputs of the wrong JS type are TypeErrors, options of the wrong shape BridgeCoreErrors", () => {
  assert.throws(() => core.prepare("openai_chat", 42), TypeError);
  assert.throws(() => core.prepare("openai_chat", { model: "m" }), TypeError);
  assert.throws(() => core.prepare("openai_chat", JSON.stringify(REQUEST), { max_tokens_cap: "lots" }), {
    name: "BridgeCoreError",
    kind: "api_error",
    message: /invalid bridge options: invalid type: string "lots"/,
  });
  assert.throws(() => new core.Translator({ stream: true }), { name: "BridgeCoreError", message: /invalid stream options: missing field/ });
  const s = new core.Translator({ stream: true, model: "m", input_tokens_estimate: 1, id_seed: 1 });
  assert.throws(() => s.feed(null), TypeError);
  s.free();
});

test("string and bytes inputs give the same conversion; options apply", () => {
  const text = JSON.stringify(REQUEST);
  const a = core.prepare("openai_chat", text, { model: "qwen3-coder", max_tokens_cap: 16 });
  const b = core.prepare("openai_chat", new TextEncoder().encode(text), { model: "qwen3-coder", max_tokens_cap: 16 });
  assert.deepEqual(a, b);
  assert.equal(a.upstream_model, "qwen3-coder");
  assert.equal(a.client_model, "claude-sonnet-4-6");
  const body = JSON.parse(a.body);
  assert.equal(body.model, "qwen3-coder");
  assert.equal(body.max_tokens, 16);
  assert.equal(body.stream, true);
  assert.deepEqual(core.prepare("openai_chat", Buffer.from(text)), core.prepare("openai_chat", text));
  assert.ok(core.countTokens(text) > 0);
});

test("a Translator translates text split inside a UTF-8 character", () => {
  const bytes = new TextEncoder().encode(
    upstream({ choices: [{ index: 0, delta: { content: "héllo 😀" } }] }, { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
  );
  const s = new core.Translator({ stream: true, model: "claude-x", input_tokens_estimate: 5, id_seed: 7n });
  let sse = "";
  for (let i = 0; i < bytes.length; i++) sse += s.feed(bytes.subarray(i, i + 1));
  const finished = s.finish();
  sse += finished.body;
  assert.equal(finished.status, 200);
  const v = core.validateSse(sse);
  assert.equal(v.valid, true);
  const text = v.events.filter((e) => e.type === "content_block_delta").map((e) => e.delta.text).join("");
  assert.equal(text, "héllo 😀");
  assert.match(sse, /^event: message_start\n/);
  s.free();
});

test("fail ends a stream with an error event; folded, it is the error with its status", () => {
  const s = new core.Translator({ stream: false, model: "m", input_tokens_estimate: 1, id_seed: 1 });
  assert.equal(s.feed(upstream({ choices: [{ index: 0, delta: { content: "partial" } }] }).replace("data: [DONE]\n\n", "")), "");
  assert.equal(s.fail("rate_limit_error", "slow down"), "");
  const folded = s.finish();
  assert.equal(folded.status, 429);
  assert.deepEqual(JSON.parse(folded.body), { type: "error", error: { type: "rate_limit_error", message: "slow down" } });
  s.free();
});

test("SseDecoder keeps partial input and joins multi-line data", () => {
  const d = new core.SseDecoder();
  assert.deepEqual(d.feed("event: ping\r\nda"), []);
  assert.deepEqual(d.feed(new TextEncoder().encode("ta: {}\r\n\r\n: comment\ndata: a\ndata: b")), [{ event: "ping", data: "{}", id: null }]);
  assert.deepEqual(d.finish(), [{ event: null, data: "a\nb", id: null }]);
  d.free();
});

test("encoders give exact bytes and refuse a line break in an event name", () => {
  assert.equal(core.encodeEvent({ type: "ping" }), 'event: ping\ndata: {"type":"ping"}\n\n');
  assert.equal(
    core.encodeEvent({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "a\nb" } }),
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\\nb"}}\n\n',
  );
  assert.equal(core.encodeSseFrame("x", "one\ntwo"), "event: x\ndata: one\ndata: two\n\n");
  assert.throws(() => core.encodeSseFrame("a\nb", "{}"), { name: "BridgeCoreError", kind: "invalid_request_error", message: /CR or LF/ });
  assert.throws(() => core.encodeEvent({ type: "no_such_event" }), { name: "BridgeCoreError", message: /invalid stream event/ });
});

test("the validator names the broken rule and where", () => {
  const stop = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';
  assert.deepEqual(core.validateSse(stop), {
    valid: false,
    violation: { position: 0, event: "message_stop", rule: "the first event must be message_start" },
  });
  const v = new core.StreamValidator();
  assert.deepEqual(v.push({ type: "content_block_stop", index: 0 }), {
    position: 0,
    event: "content_block_stop",
    rule: "the first event must be message_start",
  });
  assert.equal(v.push({ type: "ping" }), null);
  assert.deepEqual(v.finish(), { position: 2, event: "<end>", rule: "the stream ended without message_stop or error" });
  v.free();
  const folded = core.foldSse("data: nonsense\n\n");
  assert.equal(folded.status, 500);
  assert.match(JSON.parse(folded.body).error.message, /SSE frame #0 is not an Anthropic stream event/);
});

test("the same id seed gives the same bytes; another seed other ids", () => {
  const run = (seed) => {
    const s = new core.Translator({ stream: true, model: "m", input_tokens_estimate: 1, id_seed: seed });
    const out = s.feed(upstream({ choices: [{ index: 0, delta: { content: "x" }, finish_reason: "stop" }] })) + s.finish().body;
    s.free();
    return out;
  };
  assert.equal(run(3), run(3));
  assert.notEqual(run(3), run(4));
});

test("init() resolves in Node (code shared with browsers can await it)", async () => {
  await core.init();
  assert.equal(typeof core.default, "function");
});

test("prepare(\"chatml\") and a chatml Translator: a raw-text host's reply with an inline tool call", () => {
  const request = JSON.stringify({
    model: "claude-x",
    max_tokens: 50000,
    tools: [{ name: "Bash", input_schema: { type: "object", properties: { command: { type: "string" } } } }],
    messages: [{ role: "user", content: "list" }],
  });
  const prepared = core.prepare("chatml", request, { model: "org/repo:m.gguf", max_tokens_cap: 4096 });
  assert.equal(prepared.upstream_model, "org/repo:m.gguf");
  const prompt = JSON.parse(prepared.body);
  assert.equal(prompt.max_tokens, 4096);
  assert.match(prompt.prompt, /<tools>\n\{"name":"Bash"/);
  assert.ok(prompt.prompt.endsWith("<|im_start|>assistant\n"));
  assert.deepEqual(prompt.tools, [{ name: "Bash", string_params: ["command"] }]);
  assert.throws(() => core.prepare("chatml", '{"model":"m","messages":[{"role":"user","content":"hi"}]}'), { name: "BridgeCoreError", kind: "invalid_request_error", message: /max_tokens/ });

  const reply = new core.Translator({ stream: false, model: prompt.client_model, input_tokens_estimate: prompt.input_tokens_estimate, id_seed: 1, dialect: "chatml", tools: prompt.tools });
  // Text or bytes, cut anywhere (here inside "é", a two-byte character).
  const bytes = new TextEncoder().encode("On it, café.");
  for (const token of [bytes.subarray(0, 10), bytes.subarray(10), "<tool_", "call>Bash<arg_key>command</arg_key><arg_value>", "42</arg_value></tool_call>"]) assert.equal(reply.feed(token), "");
  const folded = reply.finish({ finish_reason: "stop", prompt_tokens: 30, completion_tokens: 9 });
  assert.equal(folded.status, 200);
  const message = JSON.parse(folded.body);
  assert.equal(message.stop_reason, "tool_use");
  assert.deepEqual(message.content.map((b) => b.type), ["text", "tool_use"]);
  assert.equal(message.content[0].text, "On it, café.");
  assert.deepEqual(message.content[1].input, { command: "42" }, "a string parameter stays a string");
  // Anthropic always reports the cache counts; the bridge does too (zero when unknown).
  assert.deepEqual(message.usage, {
    input_tokens: 30,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    output_tokens: 9,
  });
  reply.free();

  const s = new core.Translator({ stream: true, model: "m", input_tokens_estimate: 1, id_seed: 1, dialect: "chatml" });
  const sse = s.feed("partial") + s.fail("overloaded_error", "host gone") + s.finish().body;
  assert.equal(core.validateSse(sse).valid, true);
  assert.match(sse, /event: error\ndata: .*host gone/);
  s.free();
  assert.throws(() => new core.Translator({ stream: true, dialect: "chatml" }), { name: "BridgeCoreError", message: /invalid stream options: missing field/ });
  assert.throws(() => core.prepare("raw", request), { name: "BridgeCoreError", kind: "api_error", message: /unknown dialect "raw": expected one of openai_chat, openai_responses, chatml/ });
});

test("route picks a target in the design's order and keeps the fallbacks in theirs", () => {
  const config = {
    default: "local,qwen3-coder",
    background: "local,qwen3-coder:1.7b",
    think: "openai,o4-mini",
    fallback: ["openai,gpt-4.1-mini", "local,qwen3-coder"],
    rules: [{ model: "claude-opus-*", to: "openai,gpt-5" }],
  };
  const ask = (extra) => JSON.stringify({ ...REQUEST, ...extra });
  assert.deepEqual(core.route(config, ask({ model: "claude-opus-4-1", thinking: { type: "enabled", budget_tokens: 2048 } })), {
    primary: "openai,gpt-5",
    pool: ["openai,gpt-5"],
    fallbacks: ["openai,gpt-4.1-mini", "local,qwen3-coder"],
    reason: "rule 1 (claude-opus-*)",
    pick: "only",
  });
  assert.deepEqual(core.route(config, ask({ model: "claude-haiku-4-5" })).reason, "background");
  const think = core.route(JSON.stringify(config), new TextEncoder().encode(ask({ output_config: { effort: "max" } })));
  assert.equal(think.primary, "openai,o4-mini");
  assert.equal(think.reason, "think");
  const plain = core.route(config, ask({ thinking: { type: "adaptive" } }));
  assert.deepEqual(plain, { primary: "local,qwen3-coder", pool: ["local,qwen3-coder"], fallbacks: ["openai,gpt-4.1-mini"], reason: "default", pick: "only" });
  // A pool: every member, one first; its members are not fallbacks again.
  const pooled = core.route({ ...config, default: ["gpu1,qwen3-coder", "gpu2,qwen3-coder"], fallback: ["gpu2,qwen3-coder", "cloud,gpt-5"] }, ask({}));
  assert.deepEqual([...pooled.pool].sort(), ["gpu1,qwen3-coder", "gpu2,qwen3-coder"]);
  assert.equal(pooled.primary, pooled.pool[0]);
  assert.deepEqual(pooled.fallbacks, ["cloud,gpt-5"]);
  assert.equal(pooled.pick, "load");
  assert.throws(() => core.route({ default: [] }, ask({})), { name: "BridgeCoreError", message: /an empty list/ });

  assert.throws(() => core.route({ default: "local," }, ask({})), { name: "BridgeCoreError", kind: "api_error", message: /router config: .*names no model/ });
  assert.throws(() => core.route({ default: "a", thinking: "b" }, ask({})), { name: "BridgeCoreError", message: /unknown field `thinking`/ });
  assert.throws(() => core.route({ default: "a" }, "{}"), { name: "BridgeCoreError", kind: "invalid_request_error" });
  assert.throws(() => core.route({ default: "a" }, 7), TypeError);
});
