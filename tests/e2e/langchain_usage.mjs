// Drives LangChain JS's Anthropic chat model (`@langchain/anthropic`) against a bridge's
// `/v1/messages`, streaming, and reports the usage it aggregated. LangChain reads the input and
// cached tokens from `message_start` alone (its `message_delta` chunks carry output tokens
// only), so what it reports is what the bridge announced there.
//
//   node langchain_usage.mjs BRIDGE_URL
//
// Prints one JSON object: {"ok":true,"text","usage"} or {"ok":false,"error":{...}}.

import { ChatAnthropic } from "@langchain/anthropic";

const [baseURL] = process.argv.slice(2);
try {
  const model = new ChatAnthropic({
    model: "claude-sonnet-4-5",
    apiKey: "any",
    anthropicApiUrl: baseURL,
    maxTokens: 64,
    maxRetries: 0,
    streamUsage: true,
  });
  let total;
  for await (const chunk of await model.stream("Say hello.")) {
    total = total === undefined ? chunk : total.concat(chunk);
  }
  console.log(JSON.stringify({ ok: true, text: total.text, usage: total.usage_metadata }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: { class: e?.constructor?.name, message: String(e?.message ?? e) } }));
}
