// Drives the official OpenAI TypeScript SDK (`openai`) against a bridge's OpenAI fronts.
//
//   node openai_client.mjs BASE_URL API SCENARIO MODE [API SCENARIO MODE ...]
//
// BASE_URL  the bridge's OpenAI base URL, e.g. http://127.0.0.1:3456/v1
// API       chat | responses | models (SCENARIO and MODE ignored: list, then retrieve the first)
// SCENARIO  text | tools | parallel (two tools, called at once) | reasoning | custom (responses
//           only: Codex's free-form `apply_patch` tool)
// MODE      stream | create
//
// Each API SCENARIO MODE triple is one job (one process for many: loading the SDK takes longer
// than a job). Prints one JSON object per job on stdout, one per line, in order:
//   {"ok":true,"result":<final ChatCompletion / Response>,"events":[chunk count or event types]}
//   {"ok":false,"error":{"class","status","message","type","code"}}
// The SDK's stream helpers assemble the answer and throw on a malformed stream, so a stream the
// SDK cannot read is an error here. Errors are reported, not thrown: exit code 0 unless the
// driver itself is broken.

import OpenAI from "openai";

const [baseURL, ...jobArgs] = process.argv.slice(2);
if (!baseURL || jobArgs.length === 0 || jobArgs.length % 3 !== 0) {
  console.error(
    "usage: node openai_client.mjs BASE_URL chat|responses|models SCENARIO stream|create [...]",
  );
  process.exit(2);
}
const client = new OpenAI({
  baseURL,
  apiKey: process.env.OPENAI_API_KEY || "any",
  maxRetries: 0,
  timeout: Number(process.env.E2E_CLIENT_TIMEOUT_MS || 30000),
});

const WEATHER = {
  name: "get_weather",
  description: "Get the current weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
};
const TIME = {
  name: "get_time",
  description: "Get the local time in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const PROMPTS = {
  text: "Say hello.",
  tools: "Weather in Paris?",
  parallel: "Weather and time in Paris?",
  reasoning: "Think, then say hello.",
  custom: "Do the task.",
};
const APPLY_PATCH = {
  type: "custom",
  name: "apply_patch",
  description: "Apply a patch to files.",
  format: {
    type: "grammar",
    syntax: "lark",
    definition: 'start: "*** Begin Patch" /(.|\\n)*/ "*** End Patch"',
  },
};

function chatParams(scenario) {
  const p = {
    model: "gpt-test",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: PROMPTS[scenario] },
    ],
  };
  if (scenario === "tools") p.tools = [{ type: "function", function: WEATHER }];
  if (scenario === "parallel")
    p.tools = [WEATHER, TIME].map((f) => ({ type: "function", function: f }));
  if (scenario === "reasoning") p.reasoning_effort = "medium";
  return p;
}

function responsesParams(scenario) {
  const p = {
    model: "gpt-test",
    instructions: "Be brief.",
    input: [{ role: "user", content: PROMPTS[scenario] }],
    store: false,
  };
  if (scenario === "tools") p.tools = [{ type: "function", ...WEATHER, strict: false }];
  if (scenario === "parallel")
    p.tools = [WEATHER, TIME].map((f) => ({ type: "function", ...f, strict: false }));
  if (scenario === "reasoning") p.reasoning = { effort: "medium" };
  if (scenario === "custom") p.tools = [APPLY_PATCH];
  return p;
}

async function run(api, scenario, mode) {
  if (api === "models") {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model);
    const first = await client.models.retrieve(ids[0].id);
    return { result: { data: ids, first }, events: [] };
  }
  if (api === "chat" && mode === "stream") {
    const stream = client.chat.completions.stream({
      ...chatParams(scenario),
      stream_options: { include_usage: true },
    });
    let chunks = 0;
    for await (const _ of stream) chunks += 1;
    return { result: await stream.finalChatCompletion(), events: chunks };
  }
  if (api === "chat") {
    return { result: await client.chat.completions.create(chatParams(scenario)), events: 0 };
  }
  if (mode === "stream") {
    const stream = client.responses.stream(responsesParams(scenario));
    const events = [];
    for await (const event of stream) events.push(event.type);
    return { result: await stream.finalResponse(), events };
  }
  return { result: await client.responses.create(responsesParams(scenario)), events: [] };
}

async function report(api, scenario, mode) {
  try {
    const { result, events } = await run(api, scenario, mode);
    return { ok: true, result, events };
  } catch (e) {
    return {
      ok: false,
      error: {
        class: e?.constructor?.name,
        status: e?.status,
        message: String(e?.message ?? e),
        type: e?.type ?? e?.error?.type,
        code: e?.code ?? e?.error?.code,
      },
    };
  }
}

for (let i = 0; i < jobArgs.length; i += 3) {
  console.log(JSON.stringify(await report(jobArgs[i], jobArgs[i + 1], jobArgs[i + 2])));
}
