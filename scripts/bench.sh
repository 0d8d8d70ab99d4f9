#!/usr/bin/env bash
# make bench: measurements, never pass/fail thresholds. Today: the core's translation throughput
# on one large stream through the native core, the WASI component in wasmtime and the npm package
# in Node (same bytes, same run), and the npm package's .wasm size. Prints a table with ratios and
# writes tests/bench/results/core-<UTC time>.json.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
megabytes="${BENCH_MB:-4}"
work="$target_dir/bench"
mkdir -p "$work" tests/bench/results

cargo build --release -q -p bridge-tests --bin bench-core
rust_json="$("$target_dir/release/bench-core" "$work" "$megabytes")"
node_json="$(node pkg-js/bench/node-bench.mjs "$work" pkg-js/dist/package)"

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="tests/bench/results/core-$stamp.json"
node -e '
  const [rust, nodeRun, out, stamp] = process.argv.slice(1);
  const r = JSON.parse(rust), n = JSON.parse(nodeRun);
  const os = require("node:os");
  const result = {
    when: stamp,
    machine: `${os.cpus().length} × ${os.cpus()[0].model}`,
    input_bytes: r.input_bytes,
    chunk_bytes: r.chunk_bytes,
    native: r.native,
    wasmtime: r.wasmtime,
    node: n.node,
    chunks: r.chunks,
    prepare: r.prepare,
    node_version: n.node_version,
    npm_wasm_bytes: n.wasm_bytes,
    npm_wasm_gzip_bytes: n.wasm_gzip_bytes,
    ratios: {
      wasmtime_time_vs_native: r.wasmtime.median_ms / r.native.median_ms,
      node_time_vs_native: n.node.median_ms / r.native.median_ms,
    },
  };
  require("node:fs").writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
  const row = (name, m) => `${name.padEnd(10)} ${m.mb_per_s.toFixed(1).padStart(8)} MB/s ${m.median_ms.toFixed(1).padStart(9)} ms ${(m.median_ms / r.native.median_ms).toFixed(2).padStart(7)}x`;
  console.log(`core translation: ${(r.input_bytes / 1e6).toFixed(1)} MB OpenAI stream -> Anthropic SSE, fed ${r.chunk_bytes} B at a time (median of ${r.native.runs}/${r.wasmtime.runs}/${n.node.runs} runs)`);
  console.log(`${"engine".padEnd(10)} ${"throughput".padStart(13)} ${"median".padStart(12)} ${"vs native".padStart(9)}`);
  console.log(row("native", r.native));
  console.log(row("wasmtime", r.wasmtime));
  console.log(row("node", n.node));
  const c = r.chunks;
  console.log(`a small stream (${c.native.chunks} chunks, each fed on its own): native ${c.native.median_us_per_chunk.toFixed(2)} µs a chunk, wasmtime ${c.wasmtime.median_us_per_chunk.toFixed(2)} µs (${(c.wasmtime.median_us_per_chunk / c.native.median_us_per_chunk).toFixed(2)}x)`);
  console.log(`  of which the calls (the stream fed in one call instead): native ${c.native.us_per_call.toFixed(2)} µs a call, wasmtime ${c.wasmtime.us_per_call.toFixed(2)} µs`);
  const p = r.prepare;
  console.log(`converting a captured ${(p.native.request_bytes / 1000).toFixed(0)} KB Claude Code request for a Chat upstream: native ${p.native.median_us.toFixed(0)} µs, wasmtime ${p.wasmtime.median_us.toFixed(0)} µs (${(p.wasmtime.median_us / p.native.median_us).toFixed(2)}x; medians of ${p.native.runs}/${p.wasmtime.runs})`);
  console.log(`npm .wasm: ${result.npm_wasm_bytes} bytes raw, ${result.npm_wasm_gzip_bytes} gzipped (gzip -9); Node load + compile ${n.node.load_ms.toFixed(1)} ms`);
  console.log(`written to ${out}`);
' "$rust_json" "$node_json" "$out" "$stamp"
