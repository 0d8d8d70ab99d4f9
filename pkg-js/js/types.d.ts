// ---- Types of the values that cross the @fabstir/bridge-core facade -----------------------
// Declared once here and emitted into the package's generated declarations (wasm-bindgen
// `typescript_custom_section`). Field names are the core's JSON names (snake_case), the same
// shapes the Anthropic and OpenAI APIs use on the wire.

/** Anthropic error types; each has an HTTP status (`BridgeCoreError.status`). */
export type ErrorKind =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "timeout_error"
  | "overloaded_error";

/**
 * The upstream API `prepare` writes for and a `Translator` reads from: OpenAI Chat Completions,
 * the OpenAI Responses API, a raw-text host (Fabstir) that takes one ChatML prompt and answers
 * with the model's text, or Anthropic itself (pass-through).
 *
 * The two `front_*` dialects go the other way, for an OpenAI *client*: `prepare` takes its Chat
 * Completions or Responses request and returns a `FrontPrepared` JSON body (the Anthropic request
 * and the answer's `FrontOptions`, or a refusal); the `Translator` reads Anthropic SSE and writes
 * the client's chunks / `response.*` events, or folds one `chat.completion` / `response`.
 */
export type Dialect =
  | "openai_chat"
  | "openai_responses"
  | "chatml"
  | "anthropic"
  | "front_openai_chat"
  | "front_openai_responses";

/** How a front writes its answer: the `answer` of a `FrontPrepared` body, with `id`/`created` set. */
export interface FrontOptions {
  /** The completion / response id without its prefix; absent: derived from `id_seed`. */
  id?: string;
  /** The answer's time, Unix seconds. */
  created?: number;
  /** Chat: `stream_options.include_usage`. */
  include_usage?: boolean;
  /** Responses: the request's `custom` tools (their calls become `custom_tool_call` items). */
  custom_tools?: string[];
  /** Responses: tools that came inside a `namespace` (their calls go back with it). */
  namespaced_tools?: { sent: string; namespace: string; name: string }[];
  /** Responses: `include: ["reasoning.encrypted_content"]`. */
  include_encrypted_reasoning?: boolean;
}

/** The body `prepare` returns for a `front_*` dialect (JSON text): one of the two shapes. */
export type FrontPrepared =
  | { request: Record<string, unknown>; answer: FrontOptions }
  | {
      refusal: {
        status: number;
        error: { message: string; type: string; param: string | null; code: string | null };
      };
    };

/** How `prepare("openai_responses", …)` shapes a Responses request. Every field is optional. */
export interface ResponsesOptions {
  /** Upstream model for every request; absent: the client's model name is forwarded. */
  model?: string | null;
  /** Upper bound for `max_output_tokens`. */
  max_tokens_cap?: number | null;
  /** Clean tool schemas for strict validators. */
  strict_schemas?: boolean;
  /** absent: as the client asks; "off": never; or an effort sent on every request. */
  reasoning_effort?: "off" | "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | null;
  /** Send neither `tool_choice` nor `parallel_tool_calls`. */
  drop_tool_choice?: boolean;
  /** Require `max_tokens` as `/v1/messages` does (default true). */
  require_max_tokens?: boolean;
  /**
   * The upstream runs web search itself (OpenAI's hosted `web_search`): a `web_search_…` server
   * tool becomes that tool and its searches come back as `server_tool_use` +
   * `web_search_tool_result` blocks. Off (default): server tools are dropped with a warning.
   */
  hosted_web_search?: boolean;
}

/** How `prepare("openai_chat", …)` shapes a Chat Completions request. Every field is optional. */
export interface ConvertOptions {
  /** Upstream model for every request; absent: the client's model name is forwarded. */
  model?: string | null;
  /** Upper bound for `max_tokens` sent upstream. */
  max_tokens_cap?: number | null;
  /** Send `max_completion_tokens` instead of `max_tokens` (OpenAI o-series, gpt-5). */
  use_max_completion_tokens?: boolean;
  /** Clean tool schemas for strict validators. */
  strict_schemas?: boolean;
  /** Map `thinking` / `output_config.effort` to `reasoning_effort`. */
  reasoning_effort?: boolean;
  /** Send earlier thinking back as `reasoning_content` (default true). */
  reasoning_passback?: boolean;
  /** Keep mid-conversation `role: "system"` messages in place instead of folding them. */
  keep_mid_conversation_system?: boolean;
  /** Send neither `tool_choice` nor `parallel_tool_calls`. */
  drop_tool_choice?: boolean;
  /** Require `max_tokens` as `/v1/messages` does (default true; false for count_tokens). */
  require_max_tokens?: boolean;
  /** Ask for usage on every chunk (`stream_options.continuous_usage_stats`: vLLM, SGLang). */
  continuous_usage_stats?: boolean;
  /**
   * What a PDF document becomes (text documents are always inlined): "file" — OpenAI's `file`
   * part with a data URL (OpenAI, OpenRouter); "text" (default) — text a host extracted into a
   * text document, else a note; "omit" — a note.
   */
  documents?: "file" | "text" | "omit";
  /**
   * The upstream runs web search itself (OpenRouter's `openrouter:web_search` server tool): a
   * `web_search_…` server tool becomes that tool and the pages it cites come back as
   * `server_tool_use` + `web_search_tool_result` blocks. Off (default): server tools are
   * dropped with a warning.
   */
  hosted_web_search?: boolean;
}

/** An Anthropic request prepared for an upstream (`prepare`). */
/** A tool offered upstream under another name than the client's. */
export interface ToolName {
  /** The name the upstream was offered. */
  upstream: string;
  /** The client's own name. */
  client: string;
}

export interface ConvertedRequest {
  /**
   * The upstream body (JSON text): a Chat Completions or Responses request, always with
   * `stream: true`; for "chatml" a `ChatmlPrompt` object.
   */
  body: string;
  /** The model sent upstream. */
  upstream_model: string;
  /** The model the client asked for (report it back to the client). */
  client_model: string;
  /** Whether the client asked for SSE (`stream: true`) or one JSON message. */
  client_stream: boolean;
  /** Estimated input tokens, reported until the upstream reports real usage. */
  input_tokens_estimate: number;
  /**
   * Tools the upstream is offered under other names (it refuses the client's: over 64
   * characters, or characters outside `[a-zA-Z0-9_-]`); absent when none. Pass them to the
   * answer's `Translator` as `StreamOptions.tool_names`.
   */
  tool_names?: ToolName[];
  /** What the conversion dropped or degraded. */
  warnings: string[];
}

/** How a `Translator` reads its input and presents its output. */
export interface StreamOptions {
  /** true: `feed`/`finish` return Anthropic SSE text; false: `finish` returns the folded message. */
  stream: boolean;
  /** The model name reported to the client. */
  model: string;
  /** Input-token estimate for `message_start` (e.g. `ConvertedRequest.input_tokens_estimate`). */
  input_tokens_estimate: number;
  /** Seed for the ids the bridge invents (`msg_…`, `toolu_…`): same seed, same bytes. */
  id_seed: number | bigint;
  /** The upstream's stream format (default "openai_chat"). */
  dialect?: Dialect;
  /** "chatml": `ChatmlPrompt.tools`, to type the tool calls the model writes inline. */
  tools?: ToolHint[];
  /** `ConvertedRequest.tool_names`: calls by those names come back with the client's. */
  tool_names?: ToolName[];
  /** The `front_*` dialects: how the client's answer is written. */
  front?: FrontOptions;
  /** "openai_chat": the upstream reports usage on its first chunk (`continuous_usage_stats`), so
   * `message_start` waits for that chunk and announces the real input and cache tokens. */
  usage_on_first_chunk?: boolean;
  /** The `front_*` dialects, streaming: each call stops making output once it holds about this
   * many bytes, and a call given at least this many bytes makes none yet; after either, feed an
   * empty chunk for the rest (otherwise nothing was held back). Unset: every call returns all
   * it has. */
  output_limit?: number;
}

/** What `Translator.finish` and `foldSse` return. */
export interface Finished {
  /** HTTP status of a non-streaming response (200, or the error's status). */
  status: number;
  /** Streaming: the last SSE text. Folded: the `Message` JSON or the error envelope. */
  body: string;
}

/** One dispatched Server-Sent Event. */
export interface SseFrame {
  event: string | null;
  /** The `data:` lines joined with "\n". */
  data: string;
  id: string | null;
}

export interface Usage {
  input_tokens: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  /** Cache writes by lifetime (always present in the bridge's own streams). */
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  output_tokens: number;
  /** Server tool calls the answer made (web searches, fetches), when it made any. */
  server_tool_use?: { web_search_requests: number; web_fetch_requests: number };
}

export type StopReason =
  | "end_turn"
  | "max_tokens"
  | "stop_sequence"
  | "tool_use"
  | "refusal"
  | "pause_turn";

export interface ApiError {
  type: ErrorKind;
  message: string;
}

export type ContentBlock =
  | { type: "text"; text: string; citations?: unknown[] }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: "redacted_thinking"; data: string }
  | { type: "server_tool_use"; id: string; name: string; input: unknown }
  /** Results (`web_search_result` objects) or `{type: "web_search_tool_result_error", error_code}`. */
  | { type: "web_search_tool_result"; tool_use_id: string; content: unknown }
  /** A `web_fetch_result` or `{type: "web_fetch_tool_result_error", error_code}`. */
  | { type: "web_fetch_tool_result"; tool_use_id: string; content: unknown };

/** A complete assistant message (the folded, non-streaming answer). */
export interface Message {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: ContentBlock[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  usage: Usage;
}

export type Delta =
  | { type: "text_delta"; text: string }
  | { type: "input_json_delta"; partial_json: string }
  | { type: "thinking_delta"; thinking: string }
  | { type: "signature_delta"; signature: string }
  | { type: "citations_delta"; citation: unknown };

/** One event of an Anthropic Messages stream; `type` is also its SSE event name. */
export type StreamEvent =
  | {
      type: "message_start";
      message: Omit<Message, "content" | "stop_reason"> & { content: unknown[]; stop_reason: string | null };
    }
  | { type: "content_block_start"; index: number; content_block: ContentBlock }
  | { type: "content_block_delta"; index: number; delta: Delta }
  | { type: "content_block_stop"; index: number }
  | {
      type: "message_delta";
      delta: { stop_reason: StopReason | null; stop_sequence: string | null };
      usage: Usage;
    }
  | { type: "message_stop" }
  | { type: "ping" }
  | { type: "error"; error: ApiError };

/** A broken stream rule, at the zero-based position of the offending event. */
export interface Violation {
  position: number;
  /** The event's name ("<end>" when the stream ended too early). */
  event: string;
  rule: string;
}

/** What `validateSse` returns. */
export type Validation =
  | { valid: true; events: StreamEvent[] }
  | { valid: false; violation: Violation };

// ---- Raw-text hosts (Fabstir): ChatML prompts and model text with inline tool calls ----------

/** The tool-call format the rendered system turn asks the model for (all are parsed). */
export type ToolFormat = "json" | "glm";

/** How `prepare("chatml", …)` renders the prompt. Every field is optional. */
export interface ChatmlOptions {
  /** The model to run (e.g. "org/repo:file.gguf"); absent: the client's model name. */
  model?: string | null;
  /** Upper bound for `max_tokens`. */
  max_tokens_cap?: number | null;
  /** The call format to ask for (default "json"). */
  tool_format?: ToolFormat;
  /** Require `max_tokens` as `/v1/messages` does (default true). */
  require_max_tokens?: boolean;
}

/** An image taken out of the conversation (base64 data and its format, e.g. "png"). */
export interface PromptImage {
  data: string;
  format: string;
}

/** What the reply parser knows about a tool: parameters whose values stay strings. */
export interface ToolHint {
  name: string;
  string_params: string[];
}

/** A request rendered as one ChatML prompt: `JSON.parse(prepare("chatml", …).body)`. */
export interface ChatmlPrompt {
  /** The ChatML text, ending with "<|im_start|>assistant\n" (or an assistant prefill). */
  prompt: string;
  images: PromptImage[];
  upstream_model: string;
  client_model: string;
  client_stream: boolean;
  /** `max_tokens` to forward (capped). */
  max_tokens: number | null;
  /** `temperature` to forward. */
  temperature: number | null;
  input_tokens_estimate: number;
  /** Pass to `StreamOptions.tools`. */
  tools: ToolHint[];
  /** What plain text could not carry. */
  warnings: string[];
}

/** A Fabstir `encrypted_session_init` plaintext, as `fabstirSessionInit` takes it (JSON text). */
export interface SessionInitPlain {
  /** The 32-byte session key, hex (`0x` optional). */
  sessionKey: string;
  /** The job id in decimal, as a string. */
  jobId: string;
  modelName: string;
  /** The on-chain price per token: an integer (hosts refuse a fraction). */
  pricePerToken: number;
  recoveryPublicKey?: string;
}

/**
 * How the upstream's reply ended, as it said outside its stream (a Fabstir host's `stream_end`),
 * for `Translator.finish`; every field is optional, and the SSE dialects leave it out.
 */
export interface StreamEnd {
  finish_reason?: string | null;
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
}

// ---- Routing: which provider and model serve a request ------------------------------------

/** Where a request goes: "provider,model", or "provider" alone to forward the client's model. */
export type Target = string;

/**
 * A route value: one target, or a list of equivalent targets (a pool) of which one serves each
 * request — by session (a conversation stays on one member), else by load.
 */
export type Pool = Target | Target[];

/** `[[router.rules]]`: a glob (`*`, `?`) on the client's model name, and where matches go. */
export interface RouterRule {
  model: string;
  to: Pool;
}

/** The `[router]` table of claude-bridge.toml; only `default` is required. */
export interface RouterConfig {
  /** Where a request goes when nothing else applies. */
  default: Pool;
  /** Requests whose model name contains "haiku". */
  background?: Pool | null;
  /** Requests with `thinking.type` "enabled", or `output_config.effort` "high" / "max". */
  think?: Pool | null;
  /** Requests whose estimated input tokens exceed `long_context_threshold`. */
  long_context?: Pool | null;
  /** Default 60000. */
  long_context_threshold?: number;
  /** Tried in order when a target fails before the client got a byte. */
  fallback?: Target[];
  /** Checked first, in order; the first match wins. */
  rules?: RouterRule[];
  /** How a pool's least loaded member is measured: "least_outstanding" (default) or "latency". */
  balance?: "least_outstanding" | "latency";
}

/** What `route` decides for one request. */
export interface Route {
  /** The first target to try (`pool[0]`). */
  primary: Target;
  /** The chosen pool's members in the order to try them (idle members of weight 1: a preview). */
  pool: Target[];
  /** The configured fallbacks in order, without the pool's members and without repeats. */
  fallbacks: Target[];
  /** What chose the pool: "rule 1 (claude-opus-*)", "long_context", "background", "think" or "default". */
  reason: string;
  /** Why the pool's first member: "only" (one member), "affinity", "load" or "none_available". */
  pick: "only" | "affinity" | "load" | "none_available";
}
