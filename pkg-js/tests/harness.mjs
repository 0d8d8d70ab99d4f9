// One golden fixture case through @fabstir/bridge-core, rendered as the parts the native core's
// runner renders (tests/src/conformance.rs): the Node suite and the Chromium page both call
// `runCase`, and the result must equal `conformance-dump`'s native output byte for byte.
//
// `core` is the imported package; `files` holds the case's files as Uint8Array or undefined:
// { request, options, upstream }.

export const CHUNKINGS = [["all", Infinity], ["1", 1], ["7", 7]];
const SEED = 42;

function showError(error) {
  if (error?.name !== "BridgeCoreError") throw error;
  return `error ${error.kind}: ${error.message}`;
}

function* pieces(bytes, size) {
  if (size === Infinity || bytes.length === 0) {
    if (bytes.length > 0) yield bytes;
    return;
  }
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

export function runStream(core, options, upstream, chunk, failAt) {
  const session = new core.Translator(options);
  try {
    const fed = failAt === undefined ? upstream : upstream.subarray(0, Math.min(failAt, upstream.length));
    let out = "";
    for (const piece of pieces(fed, chunk)) out += session.feed(piece);
    if (failAt !== undefined) out += session.fail("overloaded_error", "the upstream connection was reset");
    const finished = session.finish();
    return `${out}\n--- finish\nstatus: ${finished.status}\n${finished.body}`;
  } finally {
    session.free();
  }
}

/** The upstream dialect of a golden case, from its name (`<folder>/<case>`, or a bare Chat case). */
export function dialectOf(name) {
  if (name.startsWith("responses/")) return "openai_responses";
  if (name.startsWith("anthropic/")) return "anthropic";
  if (name.startsWith("front_chat/")) return "front_openai_chat";
  if (name.startsWith("front_responses/")) return "front_openai_responses";
  return "openai_chat";
}

/** The `created` time of a front's answer in these runs (tests/src/conformance.rs `FRONT_CREATED`). */
const FRONT_CREATED = 1_700_000_000;

/** A front dialect's answer options from its prepared body (tests/src/conformance.rs `front_options`). */
function frontOptions(body) {
  return { ...(JSON.parse(body).answer ?? {}), created: FRONT_CREATED };
}

/** One golden case as tests/src/conformance.rs `run_case_in` renders it; `dialect` is the upstream's. */
export function runCase(core, files, dialect = "openai_chat") {
  const parts = [];
  const decoder = new TextDecoder();
  const options = files.options ? JSON.parse(decoder.decode(files.options)) : undefined;
  let model = "claude-conformance";
  let estimate = 0;
  let front;
  let toolNames = [];
  if (files.request) {
    try {
      const c = core.prepare(dialect, files.request, options);
      model = c.client_model;
      estimate = c.input_tokens_estimate;
      toolNames = c.tool_names ?? [];
      if (dialect.startsWith("front_")) front = frontOptions(c.body);
      const meta = {
        upstream_model: c.upstream_model,
        client_model: c.client_model,
        client_stream: c.client_stream,
        input_tokens_estimate: c.input_tokens_estimate,
        warnings: c.warnings,
      };
      if (toolNames.length) meta.tool_names = toolNames;
      parts.push(["request", JSON.stringify(meta)], ["request.body", c.body]);
    } catch (error) {
      parts.push(["request", showError(error)]);
    }
    let tokens;
    try {
      tokens = String(core.countTokens(files.request));
    } catch (error) {
      tokens = showError(error);
    }
    parts.push(["count_tokens", tokens]);
  }
  if (files.upstream) {
    for (const stream of [true, false]) {
      const streamOptions = { stream, model, input_tokens_estimate: estimate, id_seed: SEED, dialect, front, tool_names: toolNames };
      const mode = stream ? "stream" : "folded";
      for (const [label, chunk] of CHUNKINGS) {
        parts.push([`${mode} chunk=${label}`, runStream(core, streamOptions, files.upstream, chunk)]);
      }
      const half = Math.floor(files.upstream.length / 2);
      parts.push([`${mode} failed at ${half}`, runStream(core, streamOptions, files.upstream, 7, half)]);
    }
  }
  return parts;
}

/** Compare parts with the native reference; returns a list of readable mismatches. */
export function compareParts(name, expected, got) {
  const failures = [];
  const names = (parts) => parts.map(([what]) => what).join(", ");
  if (names(expected) !== names(got)) {
    return [`${name}: different parts: [${names(expected)}] vs [${names(got)}]`];
  }
  expected.forEach(([what, a], i) => {
    const b = got[i][1];
    if (a !== b) {
      let at = 0;
      while (at < a.length && a[at] === b[at]) at++;
      const around = (s) => JSON.stringify(s.slice(Math.max(0, at - 60), at + 60));
      failures.push(`${name}: \`${what}\` differs at char ${at} (lengths ${a.length} vs ${b.length}):\n    native ${around(a)}\n    js     ${around(b)}`);
    }
  });
  return failures;
}

/**
 * One raw-text (Fabstir) case, as tests/src/conformance.rs `run_fabstir_case` renders it.
 * `files`: { request, options, tokens, end, fail, session_init } as Uint8Array or undefined.
 */
export function runFabstirCase(core, files) {
  const decoder = new TextDecoder();
  const json = (bytes) => (bytes ? JSON.parse(decoder.decode(bytes)) : undefined);
  const tokens = json(files.tokens);
  const end = json(files.end);
  const fail = json(files.fail);
  const parts = [];
  let model = "claude-fabstir";
  let estimate = 0;
  let tools = [];
  if (files.request) {
    try {
      const p = JSON.parse(core.prepare("chatml", files.request, json(files.options)).body);
      const meta = {
        upstream_model: p.upstream_model,
        client_model: p.client_model,
        client_stream: p.client_stream,
        max_tokens: p.max_tokens,
        temperature: p.temperature,
        input_tokens_estimate: p.input_tokens_estimate,
        images: p.images,
        tools: p.tools,
        warnings: p.warnings,
      };
      parts.push(["prompt", `${JSON.stringify(meta)}\n--- prompt\n${p.prompt}`]);
      model = p.client_model;
      estimate = p.input_tokens_estimate;
      tools = p.tools;
    } catch (error) {
      parts.push(["prompt", showError(error)]);
    }
  }
  if (files.session_init) {
    try {
      parts.push(["session init", core.fabstirSessionInit(decoder.decode(files.session_init).trimEnd())]);
    } catch (error) {
      parts.push(["session init", showError(error)]);
    }
  }
  const encoder = new TextEncoder();
  const asTokens = tokens.map((t) => encoder.encode(t));
  const whole = encoder.encode(tokens.join(""));
  const asBytes = Array.from(whole, (_, at) => whole.subarray(at, at + 1));
  for (const stream of [true, false]) {
    const mode = stream ? "stream" : "folded";
    for (const [label, pieces] of [["tokens", asTokens], ["bytes", asBytes]]) {
      const reply = new core.Translator({ stream, model, input_tokens_estimate: estimate, id_seed: SEED, dialect: "chatml", tools });
      try {
        let text = "";
        for (const piece of pieces) text += reply.feed(piece);
        if (fail) text += reply.fail(fail.kind ?? "api_error", fail.message ?? "");
        const finished = reply.finish(end);
        parts.push([`${mode} ${label}`, `${text}\n--- finish\nstatus: ${finished.status}\n${finished.body}`]);
      } finally {
        reply.free();
      }
    }
  }
  return parts;
}
