//! Router pools end to end: the real bridge binary in front of three scripted Chat upstreams of
//! different speeds, one pool of them. Measured from the upstreams' own logs: how the load
//! spreads, that a session's turns all reach one member, that a dead member moves only its own
//! sessions, that a member answering 429 with `retry-after` gets nothing until then, and that a
//! `max_parallel = 2` member never sees a third request at once.

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::http::{self, HttpResponse};
use bridge_tests::upstream::{RecordedRequest, ScriptedResponse, Upstream};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

/// The value of a member's `refusing` that makes its next 429 say when it resets only in
/// OpenAI's `x-ratelimit-reset-requests` (no `retry-after`).
const REFUSE_WITH_RESET_HEADER: usize = 100;

/// The value of a member's `refusing` that makes its next answer a success whose headers say
/// its requests are spent for 2 s (`x-ratelimit-remaining-requests: 0`).
const SPEND_IN_A_SUCCESS: usize = 200;

/// A Chat upstream named `name` that answers every model request with its name after `delay`,
/// and 429s while `refusing` is above 0 (counting down): with `retry-after: 2`, or at
/// [`REFUSE_WITH_RESET_HEADER`] with `x-ratelimit-reset-requests: 2s` alone.
async fn member(name: &'static str, delay: Duration, refusing: Arc<AtomicUsize>) -> Upstream {
    Upstream::start(move |req: &RecordedRequest| {
        if req.path.ends_with("/models") {
            return ScriptedResponse::json(&json!({"object": "list", "data": []}));
        }
        let refuse = refusing.load(Ordering::SeqCst);
        if refuse >= SPEND_IN_A_SUCCESS {
            refusing.store(0, Ordering::SeqCst);
            return bridge_tests::chunks::text_stream(&[name])
                .with_header("x-ratelimit-remaining-requests", "0")
                .with_header("x-ratelimit-reset-requests", "2s");
        }
        if refuse >= REFUSE_WITH_RESET_HEADER {
            refusing.store(0, Ordering::SeqCst);
            return ScriptedResponse::openai_error(429, "slow down", "rate_limit_exceeded", None)
                .with_header("x-ratelimit-reset-requests", "2s");
        }
        if refuse > 0 {
            refusing.fetch_sub(1, Ordering::SeqCst);
            return ScriptedResponse::openai_error(429, "slow down", "rate_limit_exceeded", None)
                .with_header("retry-after", "2");
        }
        bridge_tests::chunks::text_stream(&[name]).delayed(delay)
    })
    .await
    .unwrap()
}

/// A bridge serving the config `toml` (in a directory that lives as long as the bridge should).
async fn serve(name: &str, toml: &str) -> (Bridge, bridge_tests::tempdir::TempDir) {
    let dir = bridge_tests::tempdir::TempDir::new(name).unwrap();
    let file = dir.path().join("claude-bridge.toml");
    std::fs::write(&file, toml).unwrap();
    let options = BridgeOptions {
        model: None,
        api_key: None,
        ..BridgeOptions::default()
    }
    .args(&["--config", file.to_str().unwrap()]);
    let bridge = Bridge::start_with("http://127.0.0.1:9/v1", name, options)
        .await
        .unwrap();
    (bridge, dir)
}

struct Pool {
    bridge: Bridge,
    members: BTreeMap<&'static str, Upstream>,
    refusing: BTreeMap<&'static str, Arc<AtomicUsize>>,
    _dir: bridge_tests::tempdir::TempDir,
}

/// Three members (`fast` 5 ms, `mid` 60 ms, `slow` 250 ms) in one default pool; `extra` goes in
/// each provider's table (limits).
async fn pool(name: &str, extra: &dyn Fn(&str) -> String) -> Pool {
    let mut members = BTreeMap::new();
    let mut refusing = BTreeMap::new();
    for (member_name, ms) in [("fast", 5), ("mid", 60), ("slow", 250)] {
        let refuse = Arc::new(AtomicUsize::new(0));
        members.insert(
            member_name,
            member(member_name, Duration::from_millis(ms), Arc::clone(&refuse)).await,
        );
        refusing.insert(member_name, refuse);
    }
    let mut toml = String::from("[router]\ndefault = [\"fast,m\", \"mid,m\", \"slow,m\"]\n");
    for (member_name, upstream) in &members {
        toml.push_str(&format!(
            "\n[providers.{member_name}]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-{member_name}\"\n{}\n",
            upstream.base_url(),
            extra(member_name)
        ));
    }
    let (bridge, dir) = serve(name, &toml).await;
    Pool {
        bridge,
        members,
        refusing,
        _dir: dir,
    }
}

/// One Claude Code-shaped turn: `session` in its header, `marker` in its text.
async fn turn(bridge: &Bridge, session: Option<&str>, marker: &str) -> (u16, String, String) {
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": false,
                      "messages": [{"role": "user", "content": format!("Say hi. {marker}")}]});
    let mut headers = vec![("content-type", "application/json")];
    if let Some(session) = session {
        headers.push(("x-claude-code-session-id", session));
    }
    let r: HttpResponse = http::send(
        "POST",
        &format!("{}/v1/messages", bridge.base_url()),
        &headers,
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap();
    let text = r.json().map_or_else(
        |_| r.text(),
        |v: Value| {
            v["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        },
    );
    let target = r
        .header("x-claude-bridge-target")
        .unwrap_or_default()
        .to_owned();
    (r.status, text, target)
}

/// `/health`.
async fn health(bridge: &Bridge) -> Value {
    let url = format!("{}/health", bridge.base_url());
    http::send("GET", &url, &[], None, T)
        .await
        .unwrap()
        .json()
        .unwrap()
}

/// A request with no session, `text` its prompt: the status.
async fn ask(base: &str, text: &str) -> u16 {
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": false,
        "messages": [{"role": "user", "content": text}]});
    http::send(
        "POST",
        &format!("{base}/v1/messages"),
        &[("content-type", "application/json")],
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap()
    .status
}

/// Which member saw the request whose text holds `marker`.
fn served_by(pool: &Pool, marker: &str) -> Vec<&'static str> {
    pool.members
        .iter()
        .filter(|(_, up)| {
            up.model_requests()
                .iter()
                .any(|r| r.all_text().contains(marker))
        })
        .map(|(name, _)| *name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_spreads_by_load_keeps_sessions_and_moves_only_a_dead_members_sessions() {
    let mut pool = pool("pool-spread", &|_| String::new()).await;

    // No session: eight clients, each sending its next request when its last is answered; the
    // least loaded member first — the faster a member, the sooner it is free, the more it serves.
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let base = pool.bridge.base_url();
    for client in 0..8 {
        let base = base.clone();
        tasks.spawn(async move {
            for i in 0..12 {
                assert_eq!(ask(&base, &format!("load {client}-{i}")).await, 200);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let shares: BTreeMap<&str, usize> = pool
        .members
        .iter()
        .map(|(name, up)| (*name, up.model_requests().len()))
        .collect();
    println!(
        "96 requests from 8 clients back to back, least outstanding: {shares:?} in {:?}",
        started.elapsed()
    );
    assert_eq!(shares.values().sum::<usize>(), 96, "{shares:?}");
    assert!(
        shares["fast"] > shares["mid"] && shares["mid"] >= shares["slow"],
        "the faster a member, the more it serves: {shares:?}"
    );

    // Sessions: every turn of one reaches one member, and sessions spread over all three.
    let sessions: Vec<String> = (0..12).map(|i| format!("session-{i:02}")).collect();
    let mut home = BTreeMap::new();
    for round in 0..3 {
        for session in &sessions {
            let marker = format!("{session}/turn-{round}");
            let (status, text, target) = turn(&pool.bridge, Some(session), &marker).await;
            assert_eq!(status, 200, "{text}");
            let by = served_by(&pool, &marker);
            assert_eq!(by.len(), 1, "{marker}: {by:?}");
            assert_eq!(
                target,
                format!("{},m", by[0]),
                "the header names the member"
            );
            let first = *home.entry(session.clone()).or_insert(by[0]);
            assert_eq!(first, by[0], "{session} moved from {first} to {}", by[0]);
        }
    }
    let homes: std::collections::BTreeSet<&str> = home.values().copied().collect();
    assert!(homes.len() >= 2, "twelve sessions on one member: {home:?}");
    let log = pool.bridge.log();
    assert!(
        log.lines()
            .any(|l| l.contains("request done") && l.contains("pick=affinity")),
        "the request line says why its member was chosen"
    );

    // A member dies: its sessions move, every other session stays where it was.
    let dead = home
        .values()
        .copied()
        .find(|m| *m != "fast")
        .unwrap_or("slow");
    drop(pool.members.remove(dead));
    for round in 3..6 {
        for session in &sessions {
            let marker = format!("{session}/turn-{round}");
            let (status, text, _) = turn(&pool.bridge, Some(session), &marker).await;
            assert_eq!(status, 200, "{marker}: {text}");
            let by = served_by(&pool, &marker);
            assert_eq!(by.len(), 1, "{marker}: {by:?}");
            if home[session] != dead {
                assert_eq!(
                    by[0], home[session],
                    "{session} moved though its member lives"
                );
            }
        }
    }
    let health = health(&pool.bridge).await;
    assert_eq!(
        health["targets"][format!("{dead},m")]["circuit"],
        "open",
        "{health}"
    );
    assert_eq!(
        health["targets"]["fast,m"]["load"]["in_flight"], 0,
        "{health}"
    );
    assert!(
        health["targets"]["fast,m"]["load"]["latency_ewma_ms"].is_number(),
        "{health}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_keeps_its_member_out_until_retry_after_and_max_parallel_holds() {
    let pool = pool("pool-limits", &|name| {
        if name == "slow" {
            String::from("max_parallel = 2\nqueue_timeout = 20\nweight = 10")
        } else {
            String::new()
        }
    })
    .await;

    // `slow` (weight 10: idle, it is chosen first) answers 429 with retry-after: 2 once; the
    // request goes to another member, and `slow` gets nothing for two seconds. Then once more,
    // saying when it resets only in `x-ratelimit-reset-requests: 2s`; then once answering (200)
    // with `x-ratelimit-remaining-requests: 0`, so that no request goes into a 429 at all.
    for (round, refuse) in [
        (0, 1),
        (1, REFUSE_WITH_RESET_HEADER),
        (2, SPEND_IN_A_SUCCESS),
    ] {
        pool.refusing["slow"].store(refuse, Ordering::SeqCst);
        let refused_at = Instant::now();
        let mut during = 0;
        let mut seen_back = None;
        for i in 0..40 {
            let marker = format!("after-429-{round}-{i}");
            let (status, text, _) = turn(&pool.bridge, None, &marker).await;
            assert_eq!(status, 200, "{text}");
            let by = served_by(&pool, &marker);
            if i > 0 && by == ["slow"] {
                seen_back.get_or_insert(refused_at.elapsed());
                break;
            }
            during += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let back = seen_back.expect("slow came back after its reset");
        assert!(
            back >= Duration::from_secs(2),
            "round {round}: slow got a request {back:?} after a reset of 2 s"
        );
        assert!(during >= 5, "requests went elsewhere meanwhile: {during}");
        let slow_requests = pool.members["slow"].model_requests().len();
        assert_eq!(
            slow_requests,
            2 * (round + 1),
            "round {round}: the 429, then the one after the wait"
        );
    }

    // `slow` (weight 10, so it is chosen first while it has room) holds at most two at once;
    // twelve sent at once all get answers.
    let slow = &pool.members["slow"];
    let before = slow.model_requests().len();
    let done_before = slow.completed_streams() + slow.cancelled_streams();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let base = pool.bridge.base_url();
        tasks.spawn(async move { ask(&base, &format!("parallel {i}")).await });
    }
    let mut most = 0;
    while !tasks.is_empty() {
        // In flight at the upstream: arrived and not yet answered to the end (read in that
        // order, so a count is never too high).
        let arrived = slow.model_requests().len() - before;
        let done = slow.completed_streams() + slow.cancelled_streams();
        most = most.max(arrived.saturating_sub(done - done_before));
        if let Ok(Some(status)) =
            tokio::time::timeout(Duration::from_millis(5), tasks.join_next()).await
        {
            assert_eq!(status.unwrap(), 200);
        }
    }
    let served = slow.model_requests().len() - before;
    println!("max_parallel = 2 member: served {served} of 12, at most {most} at once");
    assert!(served >= 2, "the weighted member served: {served}");
    assert!(
        most <= 2,
        "a third request reached the max_parallel = 2 member: {most}"
    );
    let health = health(&pool.bridge).await;
    assert_eq!(
        health["targets"]["slow,m"]["load"]["max_parallel"], 2,
        "{health}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_health_probe_takes_its_member_out_before_a_client_pays_and_a_passing_one_brings_it_back()
 {
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let failing_chats = Arc::new(AtomicUsize::new(0));
    let probed = Upstream::start({
        let down = Arc::clone(&down);
        let failing_chats = Arc::clone(&failing_chats);
        move |req: &RecordedRequest| {
            if req.path.ends_with("/models") && down.load(Ordering::SeqCst) {
                return ScriptedResponse::openai_error(503, "warming up", "server_error", None);
            }
            if req.path.ends_with("/models") {
                return ScriptedResponse::json(&json!({"object": "list", "data": []}));
            }
            if failing_chats.load(Ordering::SeqCst) > 0 {
                failing_chats.fetch_sub(1, Ordering::SeqCst);
                return ScriptedResponse::openai_error(503, "hiccup", "server_error", None);
            }
            bridge_tests::chunks::text_stream(&["probed"])
        }
    })
    .await
    .unwrap();
    let other = member("other", Duration::from_millis(5), Arc::default()).await;
    let toml = format!(
        "[router]\ndefault = [\"probed,m\", \"other,m\"]\n\n\
         [providers.probed]\nkind = \"openai\"\nbase_url = \"{}\"\nweight = 10\nhealth_check = 1\n\n\
         [providers.other]\nkind = \"openai\"\nbase_url = \"{}\"\n",
        probed.base_url(),
        other.base_url()
    );
    let (bridge, _dir) = serve("pool-probe", &toml).await;
    let probes = |up: &Upstream| {
        up.requests()
            .iter()
            .filter(|r| r.path.ends_with("/models"))
            .count()
    };
    assert!(
        probed.wait_until(|up| probes(up) >= 1, T).await,
        "no probe came"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Probe failing: every request goes to the other member; the probed one sees none.
    for i in 0..5 {
        assert_eq!(
            ask(&bridge.base_url(), &format!("while down {i}")).await,
            200
        );
    }
    assert_eq!(probed.model_requests().len(), 0, "{}", probed.dump());
    let report = health(&bridge).await;
    assert!(
        report["targets"]["probed,m"]["load"]["probe"]
            .as_str()
            .is_some_and(|p| p.contains("503")),
        "{report}"
    );
    // The probe passes again: the heavier member serves again, no client request lost.
    down.store(false, Ordering::SeqCst);
    let seen = probes(&probed);
    assert!(
        probed.wait_until(|up| probes(up) >= seen + 2, T).await,
        "no probe after the fix"
    );
    for i in 0..3 {
        assert_eq!(ask(&bridge.base_url(), &format!("back {i}")).await, 200);
    }
    assert_eq!(probed.model_requests().len(), 3, "{}", probed.dump());
    assert_eq!(
        health(&bridge).await["targets"]["probed,m"]["load"]["probe"],
        "ok"
    );

    // Three client requests fail on it in a row (each then answered by the other member): its
    // circuit opens. The next passing probe closes it, long before the 30 s cool-down.
    failing_chats.store(3, Ordering::SeqCst);
    for i in 0..3 {
        assert_eq!(ask(&bridge.base_url(), &format!("hiccup {i}")).await, 200);
    }
    assert_eq!(
        health(&bridge).await["targets"]["probed,m"]["circuit"],
        "open"
    );
    let seen = probes(&probed);
    assert!(
        probed.wait_until(|up| probes(up) > seen, T).await,
        "no probe"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        health(&bridge).await["targets"]["probed,m"]["circuit"],
        "closed"
    );
    let served = probed.model_requests().len();
    assert_eq!(ask(&bridge.base_url(), "after the probe").await, 200);
    assert_eq!(
        probed.model_requests().len(),
        served + 1,
        "{}",
        probed.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_of_a_real_claude_code_session_reaches_one_member() {
    // Both members play the same model: a Bash call first, then the last word.
    let play = |req: &RecordedRequest| {
        if req.is_background() {
            return bridge_tests::upstream::background_response();
        }
        if req.has_tool_result() {
            return bridge_tests::chunks::text_stream(&["All done."]);
        }
        let args =
            json!({"command": "touch pooled.txt", "description": "Create a file"}).to_string();
        bridge_tests::chunks::tool_call_stream("call_1", "Bash", &[&args])
    };
    let a = Upstream::start(play).await.unwrap();
    let b = Upstream::start(play).await.unwrap();
    let toml = format!(
        "[router]\ndefault = [\"a,m\", \"b,m\"]\n\n\
         [providers.a]\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [providers.b]\nkind = \"openai\"\nbase_url = \"{}\"\n",
        a.base_url(),
        b.base_url()
    );
    let (bridge, _dir) = serve("pool-claude-code", &toml).await;
    let run = bridge_tests::clients::run_claude_code_with(
        &bridge.base_url(),
        "Create pooled.txt.",
        &["--allowedTools", "Bash"],
        &[],
        Duration::from_secs(90),
    )
    .await
    .unwrap();
    let ctx = || {
        format!(
            "{}\n--- a:\n{}\n--- b:\n{}\n--- bridge:\n{}",
            run.describe(),
            a.dump(),
            b.dump(),
            bridge.log()
        )
    };
    assert_eq!(run.output.code, Some(0), "{}", ctx());
    assert!(run.cwd.path().join("pooled.txt").is_file(), "{}", ctx());
    let turns = |up: &Upstream| {
        up.requests()
            .iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .count()
    };
    let (on_a, on_b) = (turns(&a), turns(&b));
    println!("a real Claude Code session: {on_a} requests on a, {on_b} on b");
    assert!(
        (on_a >= 2 && on_b == 0) || (on_b >= 2 && on_a == 0),
        "every turn of one session on one member: a {on_a}, b {on_b}\n{}",
        ctx()
    );
    // And because of the session Claude Code named, not by chance.
    let log = bridge.log();
    let affine = log
        .lines()
        .filter(|l| l.contains("request done") && l.contains("pick=affinity"))
        .count();
    assert_eq!(affine, on_a + on_b, "{}", ctx());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_a_providers_queue_so_max_parallel_holds_across_it() {
    let slow = Upstream::start(|req: &RecordedRequest| {
        if req.path.ends_with("/models") {
            return ScriptedResponse::json(&json!({"object": "list", "data": []}));
        }
        bridge_tests::chunks::text_stream(&["slow"]).delayed(Duration::from_millis(1500))
    })
    .await
    .unwrap();
    let config = |note: &str| {
        format!(
            "# {note}\n[router]\ndefault = \"one,m\"\n\n\
             [providers.one]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_parallel = 1\n",
            slow.base_url()
        )
    };
    let dir = bridge_tests::tempdir::TempDir::new("pool-reload").unwrap();
    let file = dir.path().join("claude-bridge.toml");
    std::fs::write(&file, config("first")).unwrap();
    let options = BridgeOptions {
        model: None,
        api_key: None,
        ..BridgeOptions::default()
    }
    .args(&["--config", file.to_str().unwrap()]);
    let bridge = Bridge::start_with("http://127.0.0.1:9/v1", "pool-reload", options)
        .await
        .unwrap();
    let base = bridge.base_url();
    let first = tokio::spawn({
        let base = base.clone();
        async move { ask(&base, "first").await }
    });
    assert!(
        slow.wait_until(|up| up.model_requests().len() == 1, T)
            .await
    );
    // The file changes while the first request is in flight: the running config is replaced.
    std::fs::write(&file, config("second")).unwrap();
    let reloaded = Instant::now();
    while !bridge.log().contains("config reloaded") {
        assert!(reloaded.elapsed() < T, "no reload\n{}", bridge.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A second request on the new config waits for the first to end: one at a time still.
    let second = ask(&base, "second").await;
    assert_eq!((first.await.unwrap(), second), (200, 200));
    assert_eq!(slow.model_requests().len(), 2);
    // The new config's provider is the old one's (same limits): it queued the second request
    // behind the first, which a fresh count of nothing in flight would not have.
    let health = health(&bridge).await;
    assert_eq!(health["targets"]["one,m"]["load"]["waited"], 1, "{health}");
    assert_eq!(health["targets"]["one,m"]["load"]["sent"], 2, "{health}");
}

/// Eight clients sending twelve requests each, back to back: each member's share and the mean
/// time a request took.
async fn skewed_load(base: &str, members: &BTreeMap<&'static str, Upstream>) -> (String, f64) {
    let before: BTreeMap<&str, usize> = members
        .iter()
        .map(|(name, up)| (*name, up.model_requests().len()))
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..8 {
        let base = base.to_owned();
        tasks.spawn(async move {
            let mut took = Duration::ZERO;
            for i in 0..12 {
                let sent = Instant::now();
                assert_eq!(ask(&base, &format!("skewed {client}-{i}")).await, 200);
                took += sent.elapsed();
            }
            took
        });
    }
    let mut total = Duration::ZERO;
    while let Some(took) = tasks.join_next().await {
        total += took.unwrap();
    }
    let shares: Vec<String> = members
        .iter()
        .map(|(name, up)| format!("{name} {}", up.model_requests().len() - before[name]))
        .collect();
    (shares.join(", "), total.as_secs_f64() * 1000.0 / 96.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_skewed_pool_least_outstanding_and_latency_balance_both_favour_the_fast_member() {
    let mut members = BTreeMap::new();
    for (name, ms) in [("fast", 5), ("mid", 60), ("slow", 250)] {
        members.insert(
            name,
            member(name, Duration::from_millis(ms), Arc::default()).await,
        );
    }
    let mut results = Vec::new();
    for balance in ["least_outstanding", "latency"] {
        let mut toml = format!(
            "[router]\ndefault = [\"fast,m\", \"mid,m\", \"slow,m\"]\nbalance = \"{balance}\"\n"
        );
        for (name, up) in &members {
            toml.push_str(&format!(
                "\n[providers.{name}]\nkind = \"openai\"\nbase_url = \"{}\"\n",
                up.base_url()
            ));
        }
        let (bridge, _dir) = serve(&format!("pool-{balance}"), &toml).await;
        // A few requests first, so every member's latency is measured.
        for i in 0..6 {
            assert_eq!(ask(&bridge.base_url(), &format!("warm {i}")).await, 200);
        }
        let (shares, mean_ms) = skewed_load(&bridge.base_url(), &members).await;
        println!("balance = {balance}: {shares}; mean {mean_ms:.1} ms a request");
        results.push((balance, shares, mean_ms));
    }
    for (balance, shares, _) in &results {
        let count = |name: &str| {
            shares
                .split(", ")
                .find_map(|s| s.strip_prefix(&format!("{name} ")))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_default()
        };
        assert!(
            count("fast") > count("mid") && count("fast") > count("slow"),
            "{balance}: {shares}"
        );
    }
}
