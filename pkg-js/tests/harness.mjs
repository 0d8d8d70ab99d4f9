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
  const session = new core.ChatStream(options);
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

export function runCase(core, files) {
  const parts = [];
  const decoder = new TextDecoder();
  const options = files.options ? JSON.parse(decoder.decode(files.options)) : undefined;
  let model = "claude-conformance";
  let estimate = 0;
  if (files.request) {
    try {
      const c = core.convertRequest(files.request, options);
      model = c.client_model;
      estimate = c.input_tokens_estimate;
      const meta = {
        upstream_model: c.upstream_model,
        client_model: c.client_model,
        client_stream: c.client_stream,
        input_tokens_estimate: c.input_tokens_estimate,
        warnings: c.warnings,
      };
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
      const streamOptions = { stream, model, input_tokens_estimate: estimate, id_seed: SEED };
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
