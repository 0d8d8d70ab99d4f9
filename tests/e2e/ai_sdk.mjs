// Drives the Vercel AI SDK (`ai` + `@ai-sdk/openai`) against a bridge's Responses front with the
// provider's default options — `openai(model)` speaks the Responses API with `store: true`, so
// from its second step on it sends the answers it got back as `item_reference`s — or with the
// official `openai` SDK for `previous_response_id` and `GET`/`DELETE /v1/responses/{id}`.
//
//   node ai_sdk.mjs BASE_URL MODE
//
// BASE_URL  the bridge's OpenAI base URL, e.g. http://127.0.0.1:3456/v1
// MODE      generate | stream  (a multi-step tool loop: a weather tool, then the answer)
//           previous           (openai SDK: a turn, then one with previous_response_id, then
//                               retrieve and delete the first response)
//           strict             (openai SDK: a strict JSON schema on Chat and on Responses)
//
// Prints one JSON object on stdout: {"ok":true,...} or {"ok":false,"error":{...}}. Errors are
// reported, not thrown: exit code 0 unless the driver itself is broken.

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, stepCountIs, tool } from "ai";
import OpenAI from "openai";
import { z } from "zod";

const [baseURL, mode] = process.argv.slice(2);
if (!baseURL || !mode) {
  console.error("usage: node ai_sdk.mjs BASE_URL generate|stream|previous");
  process.exit(2);
}

function report(value) {
  console.log(JSON.stringify(value));
}

function failure(e) {
  return {
    ok: false,
    error: {
      class: e?.constructor?.name,
      status: e?.statusCode ?? e?.status,
      message: String(e?.message ?? e),
      body: e?.responseBody,
    },
  };
}

async function toolLoop() {
  const provider = createOpenAI({ baseURL, apiKey: "any" });
  const weather = tool({
    description: "Get the current weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, weather: "sunny" }),
  });
  const options = {
    // Not a reasoning model: the SDK sends its text parts back as item references.
    model: provider("gpt-4.1"),
    tools: { get_weather: weather },
    stopWhen: stepCountIs(4),
    prompt: "Weather in Paris?",
    maxRetries: 0,
  };
  let steps, text;
  if (mode === "stream") {
    let streamError;
    const result = streamText({ ...options, onError: ({ error }) => (streamError = error) });
    await result.consumeStream();
    if (streamError) throw streamError;
    steps = await result.steps;
    text = await result.text;
  } else {
    const result = await generateText(options);
    steps = result.steps;
    text = result.text;
  }
  return {
    ok: true,
    text,
    steps: steps.map((s) => ({
      finishReason: s.finishReason,
      text: s.text,
      toolCalls: s.toolCalls.map((c) => c.toolName),
      toolResults: s.toolResults.map((r) => r.output),
      responseId: s.response?.id,
      inputTokens: s.usage?.inputTokens,
    })),
  };
}

async function previous() {
  const client = new OpenAI({ baseURL, apiKey: "any", maxRetries: 0 });
  const first = await client.responses.create({ model: "gpt-4.1", input: "My name is Ada." });
  const second = await client.responses.create({
    model: "gpt-4.1",
    input: "What is my name?",
    previous_response_id: first.id,
  });
  const retrieved = await client.responses.retrieve(first.id);
  const deleted = await client.responses.delete(first.id);
  let afterDelete;
  try {
    await client.responses.retrieve(first.id);
    afterDelete = { status: 200 };
  } catch (e) {
    afterDelete = { status: e.status, message: e.message };
  }
  let gone;
  try {
    await client.responses.create({ model: "gpt-4.1", input: "Again?", previous_response_id: first.id });
    gone = { status: 200 };
  } catch (e) {
    gone = { status: e.status, code: e.code, param: e.param, message: e.message };
  }
  return {
    ok: true,
    first: { id: first.id, text: first.output_text, store: first.store },
    second: {
      id: second.id,
      text: second.output_text,
      previous_response_id: second.previous_response_id,
    },
    retrieved: { id: retrieved.id, text: retrieved.output_text },
    deleted,
    afterDelete,
    gone,
  };
}

async function strict() {
  const client = new OpenAI({ baseURL, apiKey: "any", maxRetries: 0 });
  const schema = {
    type: "object",
    properties: { name: { type: "string" }, age: { type: "integer" } },
    required: ["name", "age"],
    additionalProperties: false,
  };
  const chat = await client.chat.completions.create({
    model: "gpt-4.1",
    messages: [{ role: "user", content: "Describe Ada Lovelace." }],
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema } },
  });
  const responses = await client.responses.create({
    model: "gpt-4.1",
    input: "Describe Ada Lovelace.",
    store: false,
    text: { format: { type: "json_schema", name: "person", strict: true, schema } },
  });
  return {
    ok: true,
    chat: JSON.parse(chat.choices[0].message.content),
    responses: JSON.parse(responses.output_text),
    echoed: responses.text,
    store: responses.store,
  };
}

try {
  const run = { previous, strict }[mode] ?? toolLoop;
  report(await run());
} catch (e) {
  report(failure(e));
}
