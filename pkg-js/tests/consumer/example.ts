// A typed program against the published declarations: `tsc --noEmit` must pass on it (the pack
// test runs it in a fresh directory where only the packed tarball is installed). The
// `@ts-expect-error` lines prove the types are precise, not `any`.
import {
  BridgeCoreError,
  SseDecoder,
  StreamValidator,
  Translator,
  type ChatmlPrompt,
  type StreamEnd,
  prepare,
  countTokens,
  encodeEvent,
  encodeSseFrame,
  foldSse,
  route,
  validateSse,
  type ConvertOptions,
  type ConvertedRequest,
  type ErrorKind,
  type Finished,
  type Message,
  type Route,
  type RouterConfig,
  type SseFrame,
  type StreamEvent,
  type Validation,
  type Violation,
} from "@fabstir/bridge-core";

const options: ConvertOptions = { model: "qwen3-coder", max_tokens_cap: 8192, strict_schemas: true };
const request = JSON.stringify({ model: "claude-sonnet-4-6", max_tokens: 1024, messages: [{ role: "user", content: "hi" }] });
const converted: ConvertedRequest = prepare("openai_chat", request, options);
const tokens: number = countTokens(new TextEncoder().encode(request));
const upstreamBody: { model: string; stream: boolean } = JSON.parse(converted.body);

const stream = new Translator({
  stream: true,
  model: converted.client_model,
  input_tokens_estimate: converted.input_tokens_estimate,
  id_seed: 42,
});
let sse: string = stream.feed('data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n');
const finished: Finished = stream.finish();
sse += finished.body;
stream.free();

const validation: Validation = validateSse(sse);
if (validation.valid) {
  for (const event of validation.events) {
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
      const text: string = event.delta.text;
      console.log(text);
    }
    const again: string = encodeEvent(event);
    console.log(again.length);
  }
} else {
  const violation: Violation = validation.violation;
  console.log(violation.position, violation.rule);
}

const folded = foldSse(sse);
if (folded.status === 200) {
  const message: Message = JSON.parse(folded.body);
  for (const block of message.content) {
    if (block.type === "tool_use") console.log(block.name, block.input);
  }
}

const decoder = new SseDecoder();
const frames: SseFrame[] = [...decoder.feed(sse), ...decoder.finish()];
const firstEvent: string | null = frames[0]?.event ?? null;
const validator = new StreamValidator();
const ping: StreamEvent = { type: "ping" };
const complaint: Violation | null = validator.push(ping);
console.log(firstEvent, complaint, validator.finish(), encodeSseFrame("x", "y"), tokens, upstreamBody.model);

try {
  prepare("openai_chat", "{}");
} catch (error) {
  if (error instanceof BridgeCoreError) {
    const kind: ErrorKind = error.kind;
    const status: number = error.status;
    console.log(kind, status, error.message);
  }
}

// A raw-text host (Fabstir): render the prompt, translate the model's tokens.
const chatml: ChatmlPrompt = JSON.parse(prepare("chatml", request, { model: "org/repo:file.gguf", tool_format: "glm" }).body);
const reply = new Translator({
  stream: true,
  model: chatml.client_model,
  input_tokens_estimate: chatml.input_tokens_estimate,
  id_seed: 7,
  dialect: "chatml",
  tools: chatml.tools,
});
const end: StreamEnd = { finish_reason: "stop", completion_tokens: 12 };
const replySse: string = reply.feed("<tool_call>Bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>") + reply.finish(end).body;
console.log(replySse, chatml.images.map((i) => i.format));
// @ts-expect-error: tool formats are "json" or "glm"
prepare("chatml", request, { tool_format: "xml" });
// @ts-expect-error: dialects are "openai_chat", "openai_responses" or "chatml"
prepare("fabstir", request);
// @ts-expect-error: a translator takes text or bytes, not numbers
reply.feed(42);

// The router: which provider and model serve a request, and the fallbacks.
const router: RouterConfig = {
  default: "local,qwen3-coder",
  think: "openai,o4-mini",
  fallback: ["openai,gpt-4.1-mini"],
  rules: [{ model: "claude-opus-*", to: "openai,gpt-5" }],
};
const chosen: Route = route(router, request);
const fallbacks: string[] = chosen.fallbacks;
console.log(chosen.primary, chosen.reason, fallbacks, route(JSON.stringify(router), request).primary);
// @ts-expect-error: a router configuration needs `default`
route({ think: "openai,o4-mini" }, request);
// @ts-expect-error: a rule's pattern is `model`, not `pattern`
route({ default: "local", rules: [{ pattern: "claude-*", to: "x" }] }, request);

// @ts-expect-error: `stream` must be a boolean
new Translator({ stream: "yes", model: "m", input_tokens_estimate: 0, id_seed: 1 });
// @ts-expect-error: options have no field `modle`
prepare("openai_chat", request, { modle: "typo" });
// @ts-expect-error: the request is text or bytes
prepare("openai_chat", { model: "m" });
// @ts-expect-error: kinds are Anthropic error types
stream.fail("teapot_error", "no");
// @ts-expect-error: a Finished has no `events`
console.log(finished.events);
