//! `make bench` (core translation part): throughput of the large-stream translation through the
//! native core and through the WASI component in wasmtime, measured in the same run, the time
//! one small stream takes when every upstream chunk is fed on its own (what a model server
//! writing token by token costs per chunk; against the same stream fed in one call, what a call
//! itself costs), and the time one conversion of a captured Claude
//! Code request takes in each. Writes the input to `DIR/large-stream.sse` (+ `DIR/request.json`)
//! so the Node run (`pkg-js/bench/node-bench.mjs`) translates the very same bytes, and prints a
//! JSON result.
//!
//! ```text
//! cargo run --release -p bridge-tests --bin bench-core -- DIR [MEGABYTES]
//! ```
//!
//! `BENCH_CORE_COMPONENT=FILE` runs that component (e.g. one built with its name section, for
//! `perf` with `CLAUDE_BRIDGE_WASM_PERFMAP=1`) in place of the embedded one;
//! `BENCH_CORE_ONLY=chunks` runs only the per-chunk measurement (for a profile).

use std::path::PathBuf;
use std::time::Instant;

use bridge_tests::bench_stream::{REQUEST, large_stream, small_stream_parts};
use claude_bridge::engine::{self, ConvertOptions, Engine, StreamEnd, StreamOptions};

/// Bytes fed per call: what one network read of a busy upstream typically gives.
const CHUNK: usize = 4096;

/// Translate `upstream` once; returns (seconds, SSE bytes produced).
fn translate_once(
    engine: &dyn Engine,
    options: &StreamOptions,
    upstream: &[u8],
) -> bridge_tests::Result<(f64, usize)> {
    let started = Instant::now();
    let mut session = engine.translator(options)?;
    let mut produced = 0;
    for piece in upstream.chunks(CHUNK) {
        produced += session.feed(piece)?.len();
    }
    produced += session.finish(&StreamEnd::default())?.body.len();
    Ok((started.elapsed().as_secs_f64(), produced))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn measure(
    engine: &dyn Engine,
    options: &StreamOptions,
    upstream: &[u8],
) -> bridge_tests::Result<serde_json::Value> {
    translate_once(engine, options, upstream)?; // warm-up
    let mut times = Vec::new();
    let mut produced = 0;
    let started = Instant::now();
    while times.len() < 5 || (started.elapsed().as_secs_f64() < 3.0 && times.len() < 50) {
        let (secs, out) = translate_once(engine, options, upstream)?;
        times.push(secs);
        produced = out;
    }
    let secs = median(times.clone());
    Ok(serde_json::json!({
        "runs": times.len(),
        "median_ms": secs * 1000.0,
        "mb_per_s": upstream.len() as f64 / secs / 1e6,
        "output_bytes": produced,
    }))
}

/// One small stream fed piece by piece; returns the SSE it produced.
fn stream_pieces(
    engine: &dyn Engine,
    options: &StreamOptions,
    pieces: &[bytes::Bytes],
) -> bridge_tests::Result<String> {
    let mut session = engine.translator(options)?;
    let mut produced = String::new();
    for piece in pieces {
        produced.push_str(&session.feed(piece)?);
    }
    produced.push_str(&session.finish(&StreamEnd::default())?.body);
    Ok(produced)
}

/// [`small_stream_parts`] (`make bench-proxy`'s small stream) translated over and over, a piece
/// at a time: the median time of one stream, and per chunk. Unless `only_pieces` (a profile of
/// the per-chunk loop), then the same stream fed in one call for as long: what the calls
/// themselves cost (`us_per_call`, the difference spread over the calls saved).
fn measure_chunks(
    engine: &dyn Engine,
    options: &StreamOptions,
    pieces: &[bytes::Bytes],
    seconds: f64,
    only_pieces: bool,
) -> bridge_tests::Result<serde_json::Value> {
    let (stream, runs) = median_stream(engine, options, pieces, seconds)?;
    let mut result = serde_json::json!({
        "runs": runs,
        "chunks": pieces.len(),
        "median_us_per_stream": stream * 1e6,
        "median_us_per_chunk": stream * 1e6 / pieces.len() as f64,
    });
    if !only_pieces {
        let whole = [bytes::Bytes::from(pieces.concat())];
        let (in_one_call, _) = median_stream(engine, options, &whole, seconds)?;
        let calls_saved = pieces.len().saturating_sub(1).max(1) as f64;
        result["median_us_per_stream_in_one_call"] = (in_one_call * 1e6).into();
        result["us_per_call"] = ((stream - in_one_call) * 1e6 / calls_saved).into();
    }
    Ok(result)
}

/// The median seconds of translating `pieces` (a call each), in batches for `seconds`, and how
/// many times it was translated.
fn median_stream(
    engine: &dyn Engine,
    options: &StreamOptions,
    pieces: &[bytes::Bytes],
    seconds: f64,
) -> bridge_tests::Result<(f64, usize)> {
    const BATCH: usize = 200;
    stream_pieces(engine, options, pieces)?; // warm-up
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 5 || started.elapsed().as_secs_f64() < seconds {
        let one = Instant::now();
        for _ in 0..BATCH {
            stream_pieces(engine, options, pieces)?;
        }
        times.push(one.elapsed().as_secs_f64() / BATCH as f64);
    }
    let runs = times.len() * BATCH;
    Ok((median(times), runs))
}

/// The captured Claude Code request (52 KB: 12 tools, a tool round trip), as Claude Code sends
/// it every turn.
const CLAUDE_CODE_REQUEST: &str =
    include_str!("../../fixtures/claude_code_tool_round_trip/request.json");

/// Converting [`CLAUDE_CODE_REQUEST`] for a Chat Completions upstream: the median time of one
/// conversion (what it adds before the first token).
fn measure_prepare(engine: &dyn Engine) -> bridge_tests::Result<serde_json::Value> {
    let request = CLAUDE_CODE_REQUEST.as_bytes();
    let options = ConvertOptions::default();
    engine.convert_request(request, &options)?; // warm-up
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 50 || (started.elapsed().as_secs_f64() < 2.0 && times.len() < 2000) {
        let one = Instant::now();
        engine.convert_request(request, &options)?;
        times.push(one.elapsed().as_secs_f64());
    }
    Ok(serde_json::json!({
        "request_bytes": request.len(),
        "runs": times.len(),
        "median_us": median(times) * 1e6,
    }))
}

fn main() -> bridge_tests::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: bench-core DIR [MEGABYTES]")?);
    let megabytes: f64 = args.next().map_or(Ok(4.0), |m| m.parse())?;
    std::fs::create_dir_all(&dir)?;
    let upstream = large_stream((megabytes * 1e6) as usize);
    std::fs::write(dir.join("large-stream.sse"), &upstream)?;
    std::fs::write(dir.join("request.json"), REQUEST)?;

    let native = engine::native();
    let converted = native.convert_request(REQUEST.as_bytes(), &ConvertOptions::default())?;
    let options = StreamOptions {
        stream: true,
        model: converted.client_model,
        input_tokens_estimate: converted.input_tokens_estimate,
        id_seed: 42,
        ..StreamOptions::default()
    };
    let component = std::env::var_os("BENCH_CORE_COMPONENT").filter(|v| !v.is_empty());
    let wasm = engine::wasm(component.as_deref().map(std::path::Path::new))?;
    let pieces = small_stream_parts();
    let small = stream_pieces(native.as_ref(), &options, &pieces)?;
    if small != stream_pieces(wasm.as_ref(), &options, &pieces)? {
        return Err("native and wasm outputs differ on the small stream".into());
    }
    if std::env::var("BENCH_CORE_ONLY").is_ok_and(|only| only == "chunks") {
        let result = serde_json::json!({
            "native": measure_chunks(native.as_ref(), &options, &pieces, 10.0, true)?,
            "wasmtime": measure_chunks(wasm.as_ref(), &options, &pieces, 10.0, true)?,
        });
        println!("{result}");
        return Ok(());
    }
    // Same bytes out of both before anything is timed.
    let mut a = native.translator(&options)?;
    let mut b = wasm.translator(&options)?;
    let mut expected = String::new();
    for piece in upstream.as_bytes().chunks(CHUNK) {
        let out = a.feed(piece)?;
        if out != b.feed(piece)? {
            return Err("native and wasm outputs differ on the bench stream".into());
        }
        expected.push_str(&out);
    }
    let last = a.finish(&StreamEnd::default())?;
    if last != b.finish(&StreamEnd::default())? {
        return Err("native and wasm outputs differ on the bench stream".into());
    }
    expected.push_str(&last.body);
    // The Node run checks it gives these bytes before it times anything.
    std::fs::write(dir.join("expected.sse"), &expected)?;

    let result = serde_json::json!({
        "input_bytes": upstream.len(),
        "chunk_bytes": CHUNK,
        "native": measure(native.as_ref(), &options, upstream.as_bytes())?,
        "wasmtime": measure(wasm.as_ref(), &options, upstream.as_bytes())?,
        "chunks": {
            "native": measure_chunks(native.as_ref(), &options, &pieces, 2.0, false)?,
            "wasmtime": measure_chunks(wasm.as_ref(), &options, &pieces, 2.0, false)?,
        },
        "prepare": {
            "native": measure_prepare(native.as_ref())?,
            "wasmtime": measure_prepare(wasm.as_ref())?,
        },
    });
    println!("{result}");
    Ok(())
}
