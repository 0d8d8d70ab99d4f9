// Drives the official TypeScript SDK (@anthropic-ai/sdk) against a bridge.
//
//   node sdk_stream.mjs BASE_URL SCENARIO [MODE]
//
// BASE_URL  the bridge, e.g. http://127.0.0.1:3456 (or env ANTHROPIC_BASE_URL)
// SCENARIO  text | tools | thinking  (or env E2E_SCENARIO): which request to send
// MODE      both | stream | create  (default both)
//
// Prints one JSON object on stdout:
//   {"sdk":"typescript","version":..,"stream":RESULT?,"create":RESULT?}
//   RESULT = {"ok":true,"message":<final Message>,"events":[event types]}
//          | {"ok":false,"error":{"class","status","type","message","request_id"}}
// Errors are reported, not thrown: the exit code is 0 unless the driver itself is broken.

import Anthropic from "@anthropic-ai/sdk";
import { VERSION } from "@anthropic-ai/sdk/version";

const baseURL = process.argv[2] || process.env.ANTHROPIC_BASE_URL;
const scenario = process.argv[3] || process.env.E2E_SCENARIO || "text";
const mode = process.argv[4] || process.env.E2E_MODE || "both";
const timeoutMs = Number(process.env.E2E_CLIENT_TIMEOUT_MS || 30000);

if (!baseURL) {
  console.error("usage: node sdk_stream.mjs BASE_URL SCENARIO [MODE]");
  process.exit(2);
}

const TOOLS = [
  {
    name: "get_weather",
    description: "Get the current weather in a city.",
    input_schema: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
      required: ["city"],
    },
  },
  {
    name: "get_time",
    description: "Get the local time in a city.",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];

function params(name) {
  const base = { model: "claude-sonnet-4-6", max_tokens: 1024 };
  switch (name) {
    case "text":
      return { ...base, messages: [{ role: "user", content: "Say hello." }] };
    case "tools":
      return {
        ...base,
        tools: TOOLS,
        messages: [{ role: "user", content: "What is the weather and the time in Paris?" }],
      };
    case "thinking":
      return {
        ...base,
        max_tokens: 4096,
        thinking: { type: "enabled", budget_tokens: 2048 },
        tools: TOOLS,
        messages: [{ role: "user", content: "Think, then answer: weather in Paris?" }],
      };
    default:
      throw new Error(`unknown scenario ${name}`);
  }
}

function describeError(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    status: e?.status ?? null,
    type: e?.error?.error?.type ?? e?.error?.type ?? null,
    message: String(e?.message ?? e),
    request_id: e?.requestID ?? null,
  };
}

const client = new Anthropic({ baseURL, apiKey: "sk-test", maxRetries: 0, timeout: timeoutMs });
const out = { sdk: "typescript", version: VERSION, scenario };

if (mode === "both" || mode === "stream") {
  const events = [];
  try {
    const stream = client.messages.stream(params(scenario));
    stream.on("streamEvent", (ev) => events.push(ev.type));
    const message = await stream.finalMessage();
    out.stream = { ok: true, message, events };
  } catch (e) {
    out.stream = { ok: false, error: describeError(e), events };
  }
}

if (mode === "both" || mode === "create") {
  try {
    const message = await client.messages.create(params(scenario));
    out.create = { ok: true, message };
  } catch (e) {
    out.create = { ok: false, error: describeError(e) };
  }
}

process.stdout.write(JSON.stringify(out) + "\n");
