//! `make soak`: N concurrent streaming clients for M minutes against the release bridge and a
//! scripted upstream (in this process), the bridge's RSS sampled every few seconds, every answer
//! checked (200, a well-formed stream ending in `message_stop`), errors counted. Prints a summary
//! and writes `tests/bench/results/soak-<UTC time>.json`. Measurement only: it never fails on a
//! number (it exits non-zero only when it could not run).
//!
//! `soak STREAMS MINUTES` (make soak: SOAK_STREAMS, SOAK_MINUTES; default 200 streams, 5 min).

#![expect(clippy::print_stdout, reason = "a measurement tool prints its results")]

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
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let stamp = std::process::Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| String::from("now"));
    let path = dir.join(format!("soak-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)?;
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
