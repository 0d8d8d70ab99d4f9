// The playground: paste or pick an upstream stream (and optionally the Anthropic request it
// answers), see the Anthropic events, the folded message and any validator complaint. All of it
// is @fabstir/bridge-core running in this page.
import init, { SseDecoder, Translator, foldSse, prepare, validateSse } from "./bridge-core/web.js";

const $ = (id) => document.getElementById(id);
const ui = {
  mode: $("mode"), sample: $("sample"), request: $("request"), stream: $("stream"), seed: $("seed"), run: $("run"),
  status: $("status"), events: $("events"), eventCount: $("event-count"), message: $("message"), sse: $("sse"),
  upstreamRequest: $("upstream-request"), upstreamDetails: $("upstream-details"), requestLabel: $("request-label"),
  streamLabel: $("stream-label"), seedLabel: $("seed-label"), upstreamSummary: $("upstream-summary"),
};

function setStatus(kind, text) {
  ui.status.className = `status ${kind}`;
  ui.status.textContent = text;
}

const pretty = (text) => {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
};

function summary(event) {
  switch (event.type) {
    case "message_start": return `${event.message.model}, input_tokens ${event.message.usage.input_tokens}`;
    case "content_block_start": {
      const b = event.content_block;
      return `[${event.index}] ${b.type}${b.type === "tool_use" ? ` ${b.name} (${b.id})` : ""}`;
    }
    case "content_block_delta": {
      const d = event.delta;
      const piece = d.text ?? d.thinking ?? d.partial_json ?? d.signature ?? "";
      return `[${event.index}] ${d.type} ${JSON.stringify(piece)}`;
    }
    case "content_block_stop": return `[${event.index}]`;
    case "message_delta": return `stop_reason ${event.delta.stop_reason}, output_tokens ${event.usage.output_tokens}`;
    case "error": return `${event.error.type}: ${event.error.message}`;
    default: return "";
  }
}

/** Show events (parsed objects, or raw frames that did not parse); `bad` marks a violation. */
function showEvents(events, bad) {
  ui.events.replaceChildren(
    ...events.map((event, i) => {
      const li = document.createElement("li");
      const type = document.createElement("span");
      type.className = `type ${event.type ?? ""}`;
      type.textContent = event.type ?? "(not an event)";
      li.append(type, " ", event.type ? summary(event) : event.raw);
      if (i === bad) li.classList.add("bad");
      return li;
    }),
  );
  ui.eventCount.textContent = `(${events.length})`;
}

function showFolded(finished) {
  ui.message.textContent = `status ${finished.status}\n${pretty(finished.body)}`;
}

function showValidation(sse) {
  const validation = validateSse(sse);
  if (validation.valid) {
    showEvents(validation.events);
    const delta = validation.events.find((e) => e.type === "message_delta");
    const failed = validation.events.find((e) => e.type === "error");
    setStatus(
      failed ? "invalid" : "valid",
      failed
        ? `✓ well-formed, ended by an error event: ${failed.error.type}: ${failed.error.message}`
        : `✓ valid Anthropic stream: ${validation.events.length} events, stop_reason ${delta?.delta.stop_reason}`,
    );
    return;
  }
  // Show what could be decoded, marking the offending event.
  const decoder = new SseDecoder();
  const frames = [...decoder.feed(sse), ...decoder.finish()];
  decoder.free();
  const events = frames.map((f) => {
    try {
      return JSON.parse(f.data);
    } catch {
      return { raw: f.data };
    }
  });
  showEvents(events, validation.violation.position);
  const v = validation.violation;
  setStatus("invalid", `✗ event #${v.position} (${v.event}): ${v.rule}`);
}

function translateChat() {
  const seed = BigInt(ui.seed.value || "0");
  let model = "claude-playground";
  let estimate = 0;
  ui.upstreamRequest.textContent = "";
  if (ui.request.value.trim()) {
    const converted = prepare("openai_chat", ui.request.value);
    model = converted.client_model;
    estimate = converted.input_tokens_estimate;
    const warnings = converted.warnings.length ? `\n\n// dropped or changed:\n// ${converted.warnings.join("\n// ")}` : "";
    ui.upstreamRequest.textContent = pretty(converted.body) + warnings;
  }
  const run = (stream) => {
    const session = new Translator({ stream, model, input_tokens_estimate: estimate, id_seed: seed });
    try {
      const head = session.feed(ui.stream.value);
      const finished = session.finish();
      return stream ? head + finished.body : finished;
    } finally {
      session.free();
    }
  };
  const sse = run(true);
  ui.sse.textContent = sse;
  showValidation(sse);
  showFolded(run(false));
}

function translateFabstir() {
  const seed = BigInt(ui.seed.value || "0");
  let options = { stream: true, model: "claude-playground", input_tokens_estimate: 0, id_seed: seed, dialect: "chatml", tools: [] };
  ui.upstreamRequest.textContent = "";
  if (ui.request.value.trim()) {
    const rendered = JSON.parse(prepare("chatml", ui.request.value).body);
    options = { ...options, model: rendered.client_model, input_tokens_estimate: rendered.input_tokens_estimate, tools: rendered.tools };
    const notes = [
      rendered.images.length ? `// ${rendered.images.length} image(s) sent beside the prompt` : "",
      ...rendered.warnings.map((w) => `// dropped or changed: ${w}`),
    ].filter(Boolean);
    ui.upstreamRequest.textContent = rendered.prompt + (notes.length ? `\n\n${notes.join("\n")}` : "");
  }
  const run = (stream) => {
    const reply = new Translator({ ...options, stream });
    try {
      const head = reply.feed(ui.stream.value);
      const finished = reply.finish({ finish_reason: "stop" });
      return stream ? head + finished.body : finished;
    } finally {
      reply.free();
    }
  };
  const sse = run(true);
  ui.sse.textContent = sse;
  showValidation(sse);
  showFolded(run(false));
}

function checkAnthropic() {
  ui.sse.textContent = ui.stream.value;
  ui.upstreamRequest.textContent = "";
  showValidation(ui.stream.value);
  showFolded(foldSse(ui.stream.value));
}

function run() {
  try {
    if (ui.mode.value === "chat") translateChat();
    else if (ui.mode.value === "fabstir") translateFabstir();
    else checkAnthropic();
  } catch (error) {
    ui.events.replaceChildren();
    ui.eventCount.textContent = "";
    ui.message.textContent = "";
    setStatus("error", error.name === "BridgeCoreError" ? `✗ ${error.kind} (${error.status}): ${error.message}` : `✗ ${error}`);
  }
}

const MODES = {
  chat: { stream: "Upstream stream (OpenAI Chat Completions SSE)", upstream: "Upstream request (OpenAI Chat Completions)", run: "Translate" },
  fabstir: { stream: "Model text, as a Fabstir host streams it (tool calls inline: <tool_call>…</tool_call>)", upstream: "ChatML prompt sent to the host", run: "Translate" },
  anthropic: { stream: "Anthropic stream (SSE)", upstream: "", run: "Check" },
};

function applyMode() {
  const mode = MODES[ui.mode.value];
  const translating = ui.mode.value !== "anthropic";
  ui.requestLabel.hidden = !translating;
  ui.upstreamDetails.hidden = !translating;
  ui.seedLabel.hidden = !translating;
  ui.streamLabel.textContent = mode.stream;
  ui.upstreamSummary.textContent = mode.upstream;
  ui.run.textContent = mode.run;
  const samples = window.playgroundSamples.filter((s) => s.mode === ui.mode.value);
  ui.sample.replaceChildren(
    new Option("— pick a sample —", ""),
    ...samples.map((s) => new Option(s.name, s.name)),
  );
}

function applySample() {
  const sample = window.playgroundSamples.find((s) => s.name === ui.sample.value && s.mode === ui.mode.value);
  if (!sample) return;
  ui.request.value = sample.request ?? "";
  ui.stream.value = sample.stream;
  run();
}

window.playgroundSamples = await fetch("samples.json").then((r) => r.json());
applyMode();
ui.mode.addEventListener("change", applyMode);
ui.sample.addEventListener("change", applySample);
ui.run.addEventListener("click", run);
await init();
ui.run.disabled = false;
setStatus("pending", "ready: pick a sample or paste a stream, then Translate");
document.body.dataset.ready = "true";
