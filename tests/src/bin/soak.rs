//! `make soak`: N concurrent streaming clients for M minutes against the release bridge and a
//! scripted upstream (in this process), the bridge's RSS sampled every few seconds, every answer
//! checked (200, a well-formed stream ending in `message_stop`), errors counted. Prints a summary
//! and writes `tests/bench/results/soak-<UTC time>.json`. Measurement only: it never fails on a
//! number (it exits non-zero only when it could not run).
//!
//! `soak STREAMS MINUTES` (make soak: SOAK_STREAMS, SOAK_MINUTES; default 200 streams, 5 min).
//!
//! `soak burst BODIES MB IDLE_S ROUNDS` (make soak-burst: SOAK_BODIES, SOAK_BODY_MB, SOAK_IDLE_S,
//! SOAK_ROUNDS; default 10 bodies of 31 MB, 60 s, 2 rounds): what large request bodies cost and
//! whether the bridge gives the memory back. Each round sends BODIES streaming requests of about
//! MB megabytes at once (a long Claude Code conversation: text, tool calls and tool results),
//! samples the bridge's RSS every 50 ms while they run, then waits IDLE_S seconds idle. Writes
//! `tests/bench/results/burst-<UTC time>.json`. The engine is the bridge's default, or
//! `E2E_ENGINE` (make: SOAK_ENGINE).
//!
//! `soak answer MB [PIECES]` (make soak-burst: SOAK_ANSWER_MB, default 20; run with one piece and
//! with SOAK_ANSWER_PIECES, default 1000): what one large answer costs through each front. The
//! upstream answers MB megabytes of text in one line (every layer then holds it whole at once),
//! or in PIECES deltas as a model writes it; each front
//! (Messages, Chat Completions, Responses), streamed and folded, gets it from a fresh bridge,
//! whose RSS is sampled every 10 ms. Prints the peak above the bridge's idle RSS as a multiple
//! of the answer, and writes `tests/bench/results/answer-<UTC time>.json`.

#![expect(clippy::print_stdout, reason = "a measurement tool prints its results")]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::chunks::ChatStream;
use bridge_tests::http;
use bridge_tests::sse;
use bridge_tests::upstream::Upstream;
use serde_json::json;

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
    malformed: AtomicU64,
}

/// Resident set size of `pid` in kB, from `/proc`.
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[tokio::main]
async fn main() -> bridge_tests::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("burst") {
        return burst(&args[2..]).await;
    }
    if args.get(1).map(String::as_str) == Some("answer") {
        return answer(&args[2..]).await;
    }
    let streams: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let minutes: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let duration = Duration::from_secs_f64(minutes * 60.0);

    // A realistic answer: 50 text chunks a few ms apart.
    let mut script = ChatStream::new().role();
    for i in 0..50 {
        script = script.text(&format!("word{i} "));
    }
    let script = script
        .delay(Duration::from_millis(5))
        .usage(40, 50, 0)
        .finish("stop")
        .build();
    let upstream = Upstream::always(script).await?;
    let bridge = Bridge::start_with(&upstream.base_url(), "soak", BridgeOptions::default()).await?;
    let pid = bridge.pid();
    let base = bridge.base_url();
    let idle_kb = rss_kb(pid).unwrap_or(0);
    println!("soak: {streams} streams for {minutes} min against pid {pid} (idle RSS {idle_kb} kB)");

    let counts = Arc::new(Counts::default());
    let started = Instant::now();
    let request = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": true,
                         "messages": [{"role": "user", "content": "Say something."}]});
    let clients: Vec<_> = (0..streams)
        .map(|_| {
            let (counts, base, request) = (Arc::clone(&counts), base.clone(), request.clone());
            tokio::spawn(async move {
                while started.elapsed() < duration {
                    match http::post_messages(&base, &request, Duration::from_secs(60)).await {
                        Ok(r) if r.status == 200 => {
                            let events = sse::parse(&r.body);
                            let ended = sse::names(&events).last().map(String::as_str)
                                == Some("message_stop");
                            if sse::validate(&events).is_ok() && ended {
                                counts.ok.fetch_add(1, Ordering::Relaxed);
                            } else {
                                counts.malformed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            counts.failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();

    let mut samples = Vec::new();
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let rss = rss_kb(pid).unwrap_or(0);
        let ok = counts.ok.load(Ordering::Relaxed);
        println!(
            "  {:>5.0} s  RSS {rss} kB  ok {ok}  failed {}  malformed {}",
            started.elapsed().as_secs_f64(),
            counts.failed.load(Ordering::Relaxed),
            counts.malformed.load(Ordering::Relaxed)
        );
        samples.push(json!({"s": started.elapsed().as_secs(), "rss_kb": rss, "ok": ok}));
    }
    for client in clients {
        let _ = client.await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after_kb = rss_kb(pid).unwrap_or(0);
    let elapsed = started.elapsed().as_secs_f64();
    let ok = counts.ok.load(Ordering::Relaxed);
    let result = json!({
        "streams": streams,
        "minutes": minutes,
        "ok": ok,
        "failed": counts.failed.load(Ordering::Relaxed),
        "malformed": counts.malformed.load(Ordering::Relaxed),
        "streams_per_s": ok as f64 / elapsed,
        "rss_idle_kb": idle_kb,
        "rss_max_kb": samples.iter().filter_map(|s| s["rss_kb"].as_u64()).max().unwrap_or(0),
        "rss_after_kb": after_kb,
        "samples": samples,
    });
    let path = write_result("soak", &result)?;
    println!(
        "soak: {ok} streams ok, {} failed, {} malformed, {:.0} streams/s; RSS idle {idle_kb} kB, max {} kB, 5 s after {after_kb} kB -> {}",
        result["failed"],
        result["malformed"],
        result["streams_per_s"].as_f64().unwrap_or(0.0),
        result["rss_max_kb"],
        path.display()
    );
    Ok(())
}

/// Write `result` to `tests/bench/results/<kind>-<UTC time>.json`; returns the path.
fn write_result(kind: &str, result: &serde_json::Value) -> bridge_tests::Result<PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let stamp = std::process::Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| String::from("now"));
    let path = dir.join(format!("{kind}-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(result)?)?;
    Ok(path)
}

/// A streaming request of about `bytes` bytes: a long conversation of tool calls (`Read`) and
/// their results, 4 KB each, as Claude Code sends after many turns.
fn large_request(bytes: usize) -> String {
    let result_text: String = (0..400).map(|i| format!("line{i:04} ")).collect();
    let mut messages =
        vec![json!({"role": "user", "content": "Read the project and summarise it."})];
    let mut size = 0;
    let mut turn = 0;
    while size < bytes {
        let id = format!("toolu_{turn:08}");
        let assistant = json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading file {turn}.")},
            {"type": "tool_use", "id": id, "name": "Read",
             "input": {"file_path": format!("/project/src/file{turn}.rs")}}]});
        let user = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": result_text}]});
        size += assistant.to_string().len() + user.to_string().len();
        messages.push(assistant);
        messages.push(user);
        turn += 1;
    }
    json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": true,
           "tools": [{"name": "Read", "description": "Read a file",
                      "input_schema": {"type": "object",
                                       "properties": {"file_path": {"type": "string"}}}}],
           "messages": messages})
    .to_string()
}

/// `soak burst BODIES MB IDLE_S ROUNDS`: see the module docs.
async fn burst(args: &[String]) -> bridge_tests::Result<()> {
    let arg = |i: usize, default: u64| {
        args.get(i)
            .and_then(|a| a.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let (bodies, mb, idle_s, rounds) = (arg(0, 10), arg(1, 31), arg(2, 60), arg(3, 2));
    let body = Arc::new(large_request(
        usize::try_from(mb << 20).unwrap_or(usize::MAX),
    ));
    let upstream = Upstream::always(
        ChatStream::new()
            .role()
            .text("Summary.")
            .finish("stop")
            .build(),
    )
    .await?;
    // SOAK_BRIDGE_ARGS: more bridge flags (e.g. `--body-budget-bytes 40000000`); the bridge's
    // own CLAUDE_BRIDGE_* environment does not reach it.
    let extra = std::env::var("SOAK_BRIDGE_ARGS").unwrap_or_default();
    let mut flags = vec![String::from("--max-body-bytes"), (64u64 << 20).to_string()];
    flags.extend(extra.split_whitespace().map(str::to_owned));
    let opts = BridgeOptions::default().args(&flags);
    let bridge = Bridge::start_with(&upstream.base_url(), "soak-burst", opts).await?;
    let pid = bridge.pid();
    let base = bridge.base_url();
    // One small request first, so "idle" is a bridge that has served.
    let small = json!({"model": "claude-sonnet-4-6", "max_tokens": 16, "stream": true,
                       "messages": [{"role": "user", "content": "hi"}]});
    http::post_messages(&base, &small, Duration::from_secs(60)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_kb = rss_kb(pid).unwrap_or(0);
    let engine = std::env::var("E2E_ENGINE")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| String::from("default (wasm)"));
    println!(
        "burst: {rounds} rounds of {bodies} concurrent bodies of {:.1} MB, {idle_s} s idle after each, engine {engine}, pid {pid}; idle RSS {idle_kb} kB",
        body.len() as f64 / 1e6
    );
    let mut results = Vec::new();
    for round in 1..=rounds {
        let started = Instant::now();
        let clients: Vec<_> = (0..bodies)
            .map(|_| {
                let (base, body) = (base.clone(), Arc::clone(&body));
                tokio::spawn(async move {
                    let url = format!("{base}/v1/messages");
                    let r = http::send(
                        "POST",
                        &url,
                        http::MESSAGES_HEADERS,
                        Some(body.as_bytes().to_vec()),
                        Duration::from_secs(300),
                    )
                    .await;
                    matches!(r, Ok(r) if r.status == 200
                        && sse::names(&sse::parse(&r.body)).last().map(String::as_str) == Some("message_stop"))
                })
            })
            .collect();
        // `/health` on fresh connections meanwhile: the slowest answer.
        let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let prober = {
            let (base, probing) = (base.clone(), Arc::clone(&probing));
            tokio::spawn(async move {
                let mut slowest = Duration::ZERO;
                while probing.load(std::sync::atomic::Ordering::Relaxed) {
                    let asked = Instant::now();
                    let _ = http::send(
                        "GET",
                        &format!("{base}/health"),
                        &[],
                        None,
                        Duration::from_secs(30),
                    )
                    .await;
                    slowest = slowest.max(asked.elapsed());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                slowest
            })
        };
        let mut peak_kb = 0;
        while !clients.iter().all(tokio::task::JoinHandle::is_finished) {
            peak_kb = peak_kb.max(rss_kb(pid).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        probing.store(false, std::sync::atomic::Ordering::Relaxed);
        let health_max_ms = prober.await.map_or(0, |d| d.as_millis() as u64);
        let mut ok = 0;
        for client in clients {
            if client.await.unwrap_or(false) {
                ok += 1;
            }
        }
        let burst_s = started.elapsed().as_secs_f64();
        upstream.clear_requests();
        let after_kb = rss_kb(pid).unwrap_or(0);
        let mut samples = Vec::new();
        let idle_started = Instant::now();
        while idle_started.elapsed() < Duration::from_secs(idle_s) {
            tokio::time::sleep(Duration::from_secs(5).min(Duration::from_secs(idle_s))).await;
            samples.push(
                json!({"s": idle_started.elapsed().as_secs(), "rss_kb": rss_kb(pid).unwrap_or(0)}),
            );
        }
        let idle_after_kb = rss_kb(pid).unwrap_or(0);
        println!(
            "  round {round}: {ok}/{bodies} ok in {burst_s:.1} s; RSS peak {peak_kb} kB, at the end {after_kb} kB, after {idle_s} s idle {idle_after_kb} kB; slowest /health {health_max_ms} ms"
        );
        results.push(
            json!({"round": round, "ok": ok, "seconds": burst_s, "rss_peak_kb": peak_kb,
                            "health_max_ms": health_max_ms,
                            "rss_end_kb": after_kb, "rss_idle_after_kb": idle_after_kb,
                            "idle_samples": samples}),
        );
    }
    let result = json!({
        "bodies": bodies,
        "body_bytes": body.len(),
        "idle_s": idle_s,
        "engine": engine,
        "rss_idle_before_kb": idle_kb,
        "rounds": results,
    });
    let path = write_result("burst", &result)?;
    println!("burst: -> {}", path.display());
    Ok(())
}

/// `soak answer MB`: see the module docs.
async fn answer(args: &[String]) -> bridge_tests::Result<()> {
    let mb = args
        .first()
        .and_then(|a| a.parse::<u64>().ok())
        .unwrap_or(20);
    let bytes = usize::try_from(mb << 20).unwrap_or(usize::MAX);
    // Words, so the text is what a model writes (and JSON escapes nothing).
    let text: String = "lorem ipsum ".repeat(bytes / 12);
    // In one line (the hardest case: every layer holds it whole at once) or in `pieces` deltas.
    let pieces = args
        .get(1)
        .and_then(|a| a.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let piece_len = text.len().div_ceil(pieces);
    let parts: Vec<&str> = text
        .as_bytes()
        .chunks(piece_len)
        .filter_map(|p| std::str::from_utf8(p).ok())
        .collect();
    let upstream = Upstream::always(
        ChatStream::new()
            .role()
            .texts(&parts)
            .finish("stop")
            .build(),
    )
    .await?;
    // Responses twice: kept for `previous_response_id` and `GET` (`store`, the default: the
    // bridge then holds a copy of the answer after the request, within
    // `--responses-store-bytes`), and with `store: false`.
    let cases: [(&str, &str, bool); 8] = [
        ("messages", "/v1/messages", true),
        ("messages", "/v1/messages", false),
        ("chat", "/v1/chat/completions", true),
        ("chat", "/v1/chat/completions", false),
        ("responses", "/v1/responses", true),
        ("responses", "/v1/responses", false),
        ("unstored", "/v1/responses", true),
        ("unstored", "/v1/responses", false),
    ];
    let engine = std::env::var("E2E_ENGINE")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| String::from("default (wasm)"));
    println!(
        "answer: one {:.1} MB answer in {} upstream deltas through each front, engine {engine}",
        text.len() as f64 / 1e6,
        parts.len()
    );
    let mut results = Vec::new();
    for (front, path, stream) in cases {
        let bridge = Bridge::start_with(
            &upstream.base_url(),
            "soak-answer",
            BridgeOptions::default(),
        )
        .await?;
        let pid = bridge.pid();
        let base = bridge.base_url();
        let body = match front {
            "messages" => json!({"model": "m", "max_tokens": 64, "stream": stream,
                                 "messages": [{"role": "user", "content": "write"}]}),
            "chat" => json!({"model": "m", "stream": stream,
                             "messages": [{"role": "user", "content": "write"}]}),
            "responses" => json!({"model": "m", "stream": stream, "input": "write"}),
            _ => json!({"model": "m", "stream": stream, "input": "write", "store": false}),
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_kb = rss_kb(pid).unwrap_or(0);
        let url = format!("{base}{path}");
        let request = tokio::spawn(async move {
            http::send(
                "POST",
                &url,
                http::MESSAGES_HEADERS,
                Some(body.to_string().into_bytes()),
                Duration::from_secs(300),
            )
            .await
        });
        let mut peak_kb = idle_kb;
        while !request.is_finished() {
            peak_kb = peak_kb.max(rss_kb(pid).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let response = request
            .await
            .map_err(|e| bridge_tests::err(e.to_string()))??;
        let answer_bytes = response.body.len();
        let above_kb = peak_kb.saturating_sub(idle_kb);
        let ratio = (above_kb as f64 * 1024.0) / text.len() as f64;
        println!(
            "  {front:9} {:6}: status {}, {:.1} MB out; RSS peak {peak_kb} kB ({above_kb} kB above idle) = {ratio:.1}x the answer's text",
            if stream { "stream" } else { "folded" },
            response.status,
            answer_bytes as f64 / 1e6
        );
        results.push(
            json!({"front": front, "stream": stream, "status": response.status,
            "response_bytes": answer_bytes, "rss_idle_kb": idle_kb, "rss_peak_kb": peak_kb,
            "above_idle_kb": above_kb, "times_text": ratio}),
        );
        upstream.clear_requests();
        drop(bridge);
    }
    let result = json!({"text_bytes": text.len(), "pieces": parts.len(), "engine": engine, "cases": results});
    let path = write_result("answer", &result)?;
    println!("answer: -> {}", path.display());
    Ok(())
}
