//! PostgreSQL, three replicas and HAProxy: limits and the ledger across replicas, a replica
//! killed with SIGKILL and the database restarted mid-run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::servers::{Haproxy, Postgres};
use bridge_tests::tempdir::TempDir;
use bridge_tests::upstream::{RecordedRequest, Upstream};
use serde_json::Value;

use super::{ask, gateway_config};

const KEYS: &str = r#"
[[keys]]
name = "rate"
key = "rate-secret"
rpm = 20

[[keys]]
name = "budget"
key = "budget-secret"
budget_tokens = 2500
budget_period = "day"

[[keys]]
name = "free"
key = "free-secret"
"#;

/// Largest usage one request reports (input 100 + 49, output 10 + 6).
const MOST_TOKENS: i64 = 165;

/// What a client got.
#[derive(Debug, Default, Clone)]
struct Got {
    key: &'static str,
    status: u16,
    /// A stream that ended with `message_stop`.
    complete: bool,
    /// Cut off: no complete stream, no error body (its replica was killed).
    cut: bool,
    input: i64,
    output: i64,
    sent_ms: i64,
    problem: Option<String>,
}

/// What the workers have seen, and when they stop.
#[derive(Debug, Default)]
struct Progress {
    /// `rate` got a 429.
    rate_spent: AtomicBool,
    /// `budget` got a 402.
    budget_spent: AtomicBool,
    stop: AtomicBool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn one(base: &str, key: &'static str) -> Got {
    let sent_ms = now_ms();
    let headers = [
        ("content-type", "application/json"),
        ("x-api-key", &*format!("{key}-secret")),
    ];
    let mut got = Got {
        key,
        sent_ms,
        ..Got::default()
    };
    let r = match bridge_tests::http::send(
        "POST",
        &format!("{base}/v1/messages"),
        &headers,
        Some(ask().to_string().into_bytes()),
        Duration::from_secs(30),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => {
            got.cut = true;
            return got;
        }
    };
    got.status = r.status;
    let text = r.text();
    if r.status == 200 {
        got.complete = text.contains("event: message_stop");
        got.cut = !got.complete;
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let Ok(event) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let usage = event
                .get("usage")
                .or_else(|| event.pointer("/message/usage"));
            if let Some(usage) = usage {
                if let Some(n) = usage["input_tokens"].as_i64() {
                    got.input = n;
                }
                if let Some(n) = usage["output_tokens"].as_i64() {
                    got.output = n;
                }
            }
        }
    } else {
        let body: Value = serde_json::from_str(&text).unwrap_or_default();
        if body["type"] != "error"
            || !body["error"]["type"].is_string()
            || !body["error"]["message"].is_string()
        {
            got.problem = Some(format!("{}: not an Anthropic error: {text}", r.status));
        }
    }
    got
}

#[tokio::test]
async fn three_replicas_on_postgres_hold_limits_and_count_every_request_through_a_kill_and_a_database_restart()
 {
    let pg = Postgres::start().unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&n);
    let upstream = Upstream::start(move |_req: &RecordedRequest| {
        let i = counter.fetch_add(1, Ordering::SeqCst);
        bridge_tests::chunks::ChatStream::new()
            .role()
            .texts(&["o", "k"])
            .finish("stop")
            .usage(100 + i % 50, 10 + i % 7, 0)
            .build()
            .delayed(Duration::from_millis(40))
    })
    .await
    .unwrap();
    let config_dir = TempDir::new("gw-replicas").unwrap();
    let file = config_dir.path().join("claude-bridge.toml");
    std::fs::write(&file, gateway_config(&upstream.base_url(), &pg.url(), KEYS)).unwrap();
    let state_dirs: Vec<TempDir> = (0..3)
        .map(|i| TempDir::new(&format!("gw-replica-{i}")).unwrap())
        .collect();
    let options = |state: &TempDir| {
        BridgeOptions {
            bare: true,
            env: vec![
                ("ADMIN_KEY".into(), "admin-secret".into()),
                ("XDG_STATE_HOME".into(), state.path().display().to_string()),
            ],
            ..BridgeOptions::default()
        }
        .args(&["--config", file.to_str().unwrap()])
    };
    // Three replicas at once: their migrations race on an empty database.
    let names: Vec<String> = (0..3).map(|i| format!("gw-replica-{i}")).collect();
    let started = futures_util::future::join_all(
        state_dirs
            .iter()
            .zip(&names)
            .map(|(d, name)| Bridge::start_with("", name, options(d))),
    )
    .await;
    let mut replicas: Vec<Bridge> = started.into_iter().map(Result::unwrap).collect();
    let ports: Vec<u16> = replicas.iter().map(Bridge::port).collect();
    let haproxy = Haproxy::start(&ports).await.unwrap();
    let base = haproxy.base_url();

    // The run stays inside one wall-clock minute, as `rpm` counts.
    while now_ms() % 60_000 > 35_000 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let start = Instant::now();
    let progress = Arc::new(Progress::default());
    let workers: Vec<(&'static str, usize)> = vec![("rate", 3), ("budget", 3), ("free", 4)];
    let mut tasks = Vec::new();
    for (key, count) in workers {
        for _ in 0..count {
            let base = base.clone();
            let progress = Arc::clone(&progress);
            tasks.push(tokio::spawn(async move {
                let mut all = Vec::new();
                while !progress.stop.load(Ordering::SeqCst) {
                    let got = one(&base, key).await;
                    match (key, got.status) {
                        ("rate", 429) => progress.rate_spent.store(true, Ordering::SeqCst),
                        ("budget", 402) => progress.budget_spent.store(true, Ordering::SeqCst),
                        _ => {}
                    }
                    all.push(got);
                }
                all
            }));
        }
    }
    // With the store away each replica counts alone against what the store said was left at
    // its last grant, so N replicas may together go over by N times that (the bound in
    // host-native/src/gateway/limits.rs). The outage comes once `rpm` and the budget are
    // spent, so what it checks is that a spent limit stays spent through it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    while !(progress.rate_spent.load(Ordering::SeqCst)
        && progress.budget_spent.load(Ordering::SeqCst))
    {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "rpm = 20 and budget_tokens = 2500 not spent after 15 s (rate refused: {}, budget refused: {})",
            progress.rate_spent.load(Ordering::SeqCst),
            progress.budget_spent.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let spent_after = start.elapsed();
    replicas[1].signal("KILL").unwrap();
    let killed_at = now_ms();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let restart_began = now_ms();
    let pg = tokio::task::spawn_blocking(move || pg.restart().map(|()| pg))
        .await
        .unwrap()
        .unwrap();
    // Served on for a while with the store back.
    tokio::time::sleep(Duration::from_secs(1)).await;
    progress.stop.store(true, Ordering::SeqCst);
    let mut got: Vec<Got> = Vec::new();
    for task in tasks {
        got.extend(task.await.unwrap());
    }

    // The killed replica's successor takes over its journal (records of requests it finished).
    let successor = Bridge::start_with("", "gw-replica-1b", options(&state_dirs[1]))
        .await
        .unwrap();
    let survivors = [&replicas[0], &replicas[2], &successor];
    for r in survivors {
        // /v1/usage writes what the replica holds first.
        let u = super::get(&r.base_url(), "/v1/usage", "admin-secret").await;
        assert_eq!(u.status, 200, "{}", u.text());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let usage = super::get(
        &successor.base_url(),
        "/v1/usage?group_by=key",
        "admin-secret",
    )
    .await
    .json()
    .unwrap();
    let row = |key: &str| {
        usage["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .cloned()
            .unwrap_or_default()
    };

    let problems: Vec<&Got> = got.iter().filter(|g| g.problem.is_some()).collect();
    assert!(
        problems.is_empty(),
        "answers that were neither a stream nor an Anthropic error: {problems:?}"
    );
    let cut = got.iter().filter(|g| g.cut).count() as i64;
    assert!(
        cut <= 10,
        "more cut streams ({cut}) than requests in flight on the killed replica"
    );
    let summary = |key: &str| {
        let mine: Vec<&Got> = got.iter().filter(|g| g.key == key).collect();
        let complete: Vec<&&Got> = mine.iter().filter(|g| g.complete).collect();
        (
            mine.len(),
            complete.len() as i64,
            complete.iter().map(|g| g.input).sum::<i64>(),
            complete.iter().map(|g| g.output).sum::<i64>(),
            mine.iter().filter(|g| g.status == 200).count() as i64,
        )
    };
    let context = || {
        format!(
            "usage {usage}\nspent after {spent_after:?}, killed at {killed_at}, database restart from {restart_began}\nreplica logs:\n{}",
            replicas
                .iter()
                .map(|r| r
                    .log()
                    .lines()
                    // Not the refusals the run expects: what went wrong, and counting alone.
                    .filter(|l| (l.contains("WARN") || l.contains("ERROR"))
                        && !l.contains("kind=\"rate_limit_error\"")
                        && !l.contains("kind=\"billing_error\""))
                    .take(20)
                    .collect::<Vec<_>>()
                    .join("\n"))
                .collect::<Vec<_>>()
                .join("\n---\n")
        )
    };
    for key in ["rate", "budget", "free"] {
        let (sent, complete, input, output, _) = summary(key);
        let r = row(key);
        let requests = r["requests"].as_i64().unwrap_or(0);
        let (l_in, l_out) = (
            r["input_tokens"].as_i64().unwrap_or(0),
            r["output_tokens"].as_i64().unwrap_or(0),
        );
        assert!(
            sent > 0 && complete > 0,
            "{key}: nothing completed\n{}",
            context()
        );
        // Every completed request counted once; a cut one at most once.
        assert!(
            (complete..=complete + cut).contains(&requests),
            "{key}: ledger {requests} requests, clients completed {complete} (cut {cut})\n{}",
            context()
        );
        assert!(
            l_in >= input
                && l_out >= output
                && (l_in + l_out) - (input + output) <= cut * MOST_TOKENS,
            "{key}: ledger {l_in}+{l_out} tokens, clients saw {input}+{output} (cut {cut})\n{}",
            context()
        );
        if cut == 0 {
            assert_eq!(
                (requests, l_in, l_out),
                (complete, input, output),
                "{key}\n{}",
                context()
            );
        }
    }
    // rpm = 20 across the deployment, through the kill and the restart: the replicas counted
    // against what the store last said was left.
    let mut per_minute = std::collections::BTreeMap::<i64, i64>::new();
    for g in got.iter().filter(|g| g.key == "rate" && g.status == 200) {
        *per_minute.entry(g.sent_ms / 60_000).or_default() += 1;
    }
    assert!(!per_minute.is_empty());
    assert!(
        per_minute.values().all(|n| *n <= 20),
        "rate: admitted per minute {per_minute:?} with rpm = 20\n{}",
        context()
    );
    assert!(got.iter().any(|g| g.key == "rate" && g.status == 429));
    // The budget: over by at most what the requests in flight used beyond the room they
    // reserved, and what other replicas had not written yet (the bound in
    // host-native/src/gateway/limits.rs): here under six requests' worth.
    let spent = row("budget")["input_tokens"].as_i64().unwrap_or(0)
        + row("budget")["output_tokens"].as_i64().unwrap_or(0);
    assert!(
        spent <= 2500 + (3 + 3) * MOST_TOKENS,
        "budget: {spent} tokens of 2500\n{}",
        context()
    );
    assert!(
        got.iter().any(|g| g.key == "budget" && g.status == 402),
        "the budget never ran out\n{}",
        context()
    );
    drop(haproxy);
    drop(pg);
    for r in &mut replicas {
        let _ = r.signal("TERM");
    }
}
