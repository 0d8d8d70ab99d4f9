// `make bench` (Node part): the large-stream translation through the npm package in Node, on the
// bytes bench-core wrote (DIR/large-stream.sse), checked against the native output first.
//   node pkg-js/bench/node-bench.mjs DIR PACKAGE_DIR
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";

const [dir, packageDir] = process.argv.slice(2);
const CHUNK = 4096;
const loadStarted = performance.now();
const core = await import(pathToFileURL(join(packageDir, "node.js")).href);
const loadMs = performance.now() - loadStarted;

const upstream = new Uint8Array(readFileSync(join(dir, "large-stream.sse")));
const expected = readFileSync(join(dir, "expected.sse"), "utf8");
const converted = core.prepare("openai_chat", readFileSync(join(dir, "request.json")));
const options = { stream: true, model: converted.client_model, input_tokens_estimate: converted.input_tokens_estimate, id_seed: 42 };

function translateOnce(keep) {
  const started = performance.now();
  const session = new core.Translator(options);
  let out = keep ? "" : 0;
  for (let at = 0; at < upstream.length; at += CHUNK) {
    const piece = session.feed(upstream.subarray(at, at + CHUNK));
    out = keep ? out + piece : out + Buffer.byteLength(piece);
  }
  const last = session.finish().body;
  out = keep ? out + last : out + Buffer.byteLength(last);
  session.free();
  return [(performance.now() - started) / 1000, out];
}

const [, output] = translateOnce(true);
if (output !== expected) {
  console.error("node-bench: Node's output differs from the native core's on the bench stream");
  process.exit(1);
}
const times = [];
let produced = 0;
const started = performance.now();
while (times.length < 5 || (performance.now() - started < 3000 && times.length < 50)) {
  const [secs, out] = translateOnce(false);
  times.push(secs);
  produced = out;
}
times.sort((a, b) => a - b);
const secs = times[Math.floor(times.length / 2)];
const wasm = readFileSync(join(packageDir, "bridge_core_bg.wasm"));
console.log(JSON.stringify({
  node: { runs: times.length, median_ms: secs * 1000, mb_per_s: upstream.length / secs / 1e6, output_bytes: produced, load_ms: loadMs },
  wasm_bytes: statSync(join(packageDir, "bridge_core_bg.wasm")).size,
  wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length,
  node_version: process.version,
}));
