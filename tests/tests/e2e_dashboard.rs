//! The dashboard (issue 30) end to end: the page at `/ui` in headless Chromium after scripted
//! traffic with two keys, the numbers it shows against `GET /v1/usage`, its live feed against
//! the clock, what a key that is not the admin may see, and `claude-bridge statusline` run as
//! Claude Code runs it.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test on purpose"
)]

use std::path::PathBuf;
use std::time::Duration;

use bridge_tests::clients::{e2e_dir, run};
use bridge_tests::http;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::e2e_gateway::{Served, ask, call, counting_upstream, gateway_config, get, serve};

const T: Duration = Duration::from_secs(120);

/// Where the screenshots are kept: `target/e2e-artifacts/dashboard`.
fn shots_dir() -> PathBuf {
    let bin = bridge_tests::bridge::binary_path().unwrap();
    bin.parent()
        .and_then(|p| p.parent())
        .unwrap()
        .join("e2e-artifacts")
        .join("dashboard")
}

const KEYS: &str = r#"
[[keys]]
name = "alice"
key = "env:ALICE_KEY"
budget_usd = 5.0

[[keys]]
name = "bob"
key = "bob-secret"
budget_tokens = 100000
budget_period = "week"
"#;

async fn ask_as(base: &str, key: &str, session: &str) -> http::HttpResponse {
    let headers = [
        ("content-type", "application/json"),
        ("x-api-key", key),
        ("user-agent", "claude-cli/2.1.332 (external, cli)"),
        ("x-claude-code-session-id", session),
    ];
    http::send(
        "POST",
        &format!("{base}/v1/messages"),
        &headers,
        Some(ask().to_string().into_bytes()),
        Duration::from_secs(20),
    )
    .await
    .unwrap()
}

/// `claude-bridge statusline` as Claude Code runs it (`sh -c`, JSON on stdin), for `session`.
async fn status_line(base: &str, key: &str, session: &str) -> String {
    use tokio::io::AsyncWriteExt as _;
    let input = json!({
        "hook_event_name": "Status",
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": "/tmp",
        "model": {"id": "claude-sonnet-4-6", "display_name": "Sonnet 4.6"},
        "workspace": {"current_dir": "/tmp", "project_dir": "/tmp"},
        "version": "2.1.332",
        "cost": {"total_cost_usd": 0.01, "total_duration_ms": 1000},
    });
    let bin = bridge_tests::bridge::binary_path().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("'{}' statusline", bin.display()))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_AUTH_TOKEN", key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    stdout.trim_end().to_owned()
}

/// A cost as the page prints it (six decimals).
fn usd(v: &Value) -> String {
    format!("{:.6}", v.as_f64().unwrap())
}

/// The page after traffic from two keys: no console error and no request leaving the bridge;
/// the admin's *Spend* rows, totals and CSV are `GET /v1/usage`'s; *Live* shows a request
/// within a second of its end; *Keys* makes a key whose secret is shown once and works; alice
/// sees only her own requests and usage, no config and no key list, and the API refuses her
/// the rest; the page fits a phone-width window. Screenshots of every view are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_each_key_its_own_and_the_admin_everything() {
    let upstream = counting_upstream().await;
    let db = bridge_tests::tempdir::TempDir::new("dash-db").unwrap();
    let store = format!("sqlite://{}", db.path().join("g.db").display());
    let Served { bridge, dir } = serve(
        "dash",
        &gateway_config(&upstream.base_url(), &store, KEYS),
        None,
    )
    .await;
    let base = bridge.base_url();
    for i in 0..3 {
        let r = ask_as(&base, "alice-secret", "alice-session").await;
        assert_eq!(r.status, 200, "alice {i}: {}", r.text());
    }
    for i in 0..2 {
        let r = call(&base, "/v1/messages", "bob-secret", &ask()).await;
        assert_eq!(r.status, 200, "bob {i}: {}", r.text());
    }
    let refused = call(&base, "/v1/messages", "sk-nobody", &ask()).await;
    assert_eq!(refused.status, 401);

    // The status line, run as Claude Code runs it: a shell command, its JSON on stdin, the
    // bridge's address and key in the environment Claude Code has.
    let line = status_line(&base, "alice-secret", "alice-session").await;
    assert_eq!(
        line,
        "⇄ local,m1 · 303 in 33 out · $0.0004 · $5.00 left today (resets 00:00Z)"
    );
    // Another key does not see alice's session; the admin does.
    let line = status_line(&base, "bob-secret", "alice-session").await;
    assert_eq!(line, "⇄ claude-bridge · no request yet");
    // A session with no request yet is what the status line expects to hear: no warning.
    let log = bridge.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("/ui/api/session/")),
        "{log}"
    );
    let line = status_line(&base, "admin-secret", "alice-session").await;
    assert!(line.starts_with("⇄ local,m1 · 303 in 33 out"), "{line}");

    let shots = shots_dir();
    let spec = json!({
        "base": base,
        "admin": "admin-secret",
        "alice": "alice-secret",
        "shots": shots.display().to_string(),
    });
    let mut cmd = Command::new("node");
    cmd.arg(e2e_dir().join("dashboard_browser.mjs"))
        .arg(spec.to_string())
        .current_dir(e2e_dir());
    let output = run(cmd, T, "dashboard_browser.mjs").await.unwrap();
    let page: Value = serde_json::from_str(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "the page script printed no result ({e}):\n{}\n{}\n--- bridge log:\n{}",
            output.stdout,
            output.stderr,
            bridge.log()
        )
    });
    let ctx = format!("page saw: {page:#}\n--- bridge log:\n{}", bridge.log());
    assert!(page["error"].is_null(), "{}\n{ctx}", page["error"]);
    assert_eq!(page["problems"], json!([]), "{ctx}");
    assert_eq!(page["outside"], json!([]), "{ctx}");
    let csp = page["csp"].as_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{ctx}"
    );

    // The admin sees every view, the targets and the running config with its secrets masked.
    let admin = &page["admin"];
    assert_eq!(
        admin["tabs"],
        json!(["now", "live", "spend", "keys"]),
        "{ctx}"
    );
    assert_eq!(admin["now"]["targets"][0][0], "local,m1", "{ctx}");
    assert_eq!(admin["now"]["targets"][0][2], "closed", "{ctx}");
    let config = admin["now"]["config"].as_str().unwrap();
    assert!(config.contains("[providers.local]"), "{ctx}");
    assert!(
        !config.contains("sk-upstream") && !config.contains("bob-secret"),
        "{ctx}"
    );
    assert!(config.contains("env:ADMIN_KEY"), "{ctx}");
    // Six requests ended before the page opened (five answered, one refused).
    assert_eq!(admin["now"]["requests"], "6", "{ctx}");
    assert_eq!(admin["now"]["errors"], "1", "{ctx}");

    // Spend: the page's rows and totals are /v1/usage's for the same query.
    assert_eq!(admin["usage"]["status"], 200, "{ctx}");
    let rows = admin["usage"]["body"]["rows"].as_array().unwrap().clone();
    let expected: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells: Vec<String> = ["key", "model", "day"]
                .iter()
                .map(|f| r[*f].as_str().unwrap().to_owned())
                .collect();
            for f in [
                "requests",
                "errors",
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
            ] {
                cells.push(r[f].to_string());
            }
            cells.push(usd(&r["cost_usd"]));
            cells
        })
        .collect();
    let shown: Vec<Vec<String>> = serde_json::from_value(admin["spend"]["rows"].clone()).unwrap();
    assert_eq!(shown, expected, "{ctx}");
    let keys_seen: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert!(
        keys_seen.contains(&"alice") && keys_seen.contains(&"bob"),
        "{ctx}"
    );
    let total: f64 = rows.iter().map(|r| r["cost_usd"].as_f64().unwrap()).sum();
    assert_eq!(admin["spend"]["cost"], format!("{total:.6}"), "{ctx}");
    let requests: i64 = rows.iter().map(|r| r["requests"].as_i64().unwrap()).sum();
    assert_eq!(admin["spend"]["requests"], requests.to_string(), "{ctx}");
    assert!(total > 0.0, "the prices make a cost: {ctx}");
    let downloaded = std::fs::read_to_string(admin["csvFile"].as_str().unwrap()).unwrap();
    assert_eq!(downloaded, admin["usageCsv"].as_str().unwrap(), "{ctx}");
    assert_eq!(downloaded.lines().count(), rows.len() + 1, "{ctx}");
    // Both keys' budgets, with what is left and when they reset.
    let budgets = admin["spend"]["budgets"].as_array().unwrap();
    assert_eq!(budgets.len(), 2, "{ctx}");
    let alice_budget = budgets.iter().find(|b| b[0] == "alice").unwrap();
    assert_eq!(alice_budget[1], "$5.0000", "{ctx}");
    assert_eq!(alice_budget[2], "day", "{ctx}");
    let alice_spent: f64 = rows
        .iter()
        .filter(|r| r["key"] == "alice")
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .sum();
    assert_eq!(alice_budget[3], format!("${alice_spent:.4}"), "{ctx}");
    assert_eq!(
        alice_budget[4],
        format!("${:.4}", 5.0 - alice_spent),
        "{ctx}"
    );
    assert!(alice_budget[5].as_str().unwrap().ends_with('Z'), "{ctx}");

    // Live: pushed within a second of the answer's end.
    let live = &admin["live"];
    assert_eq!(live["sent"]["status"], 200, "{ctx}");
    assert!(live["backlog"].as_u64().unwrap() >= 6, "{ctx}");
    assert!(
        live["shownAfterMs"].as_u64().unwrap() < 1000,
        "shown {} ms after the answer ended\n{ctx}",
        live["shownAfterMs"]
    );
    assert_eq!(live["row"][1], "alice", "{ctx}");
    assert_eq!(live["row"][2], "claude-code", "{ctx}");
    assert_eq!(live["row"][4], "local,m1", "{ctx}");

    // Keys: carol is made, her secret shown once, and it works.
    let keys = &admin["keys"];
    assert!(
        !keys["before"].as_array().unwrap().contains(&json!("carol")),
        "{ctx}"
    );
    assert!(
        keys["after"].as_array().unwrap().contains(&json!("carol")),
        "{ctx}"
    );
    assert_eq!(keys["secretHidden"], true, "{ctx}");
    // Rotated: the first secret is refused, the one shown at the rotation works.
    let first = keys["secret"].as_str().unwrap();
    let rotated = keys["rotated"].as_str().unwrap();
    assert_ne!(first, rotated, "{ctx}");
    let r = call(&base, "/v1/messages", first, &ask()).await;
    assert_eq!(
        r.status,
        401,
        "carol's first key after the rotation: {}",
        r.text()
    );
    let r = call(&base, "/v1/messages", rotated, &ask()).await;
    assert_eq!(r.status, 200, "carol's rotated key: {}", r.text());
    // dave, revoked from the page, is refused.
    assert_ne!(keys["daveRow"][10], "–", "{ctx}");
    let r = call(
        &base,
        "/v1/messages",
        keys["dave"].as_str().unwrap(),
        &ask(),
    )
    .await;
    assert_eq!(r.status, 401, "dave after the revocation: {}", r.text());

    // Alice: her own only.
    let alice = &page["alice"];
    assert_eq!(alice["tabs"], json!(["now", "live", "spend"]), "{ctx}");
    assert_eq!(alice["now"]["adminHidden"], true, "{ctx}");
    assert_eq!(alice["now"]["config"], "", "{ctx}");
    // Her three, and the one the page sent as her.
    assert_eq!(alice["now"]["requests"], "4", "{ctx}");
    for row in alice["spend"]["rows"].as_array().unwrap() {
        assert_eq!(row[0], "alice", "{ctx}");
    }
    let alice_budgets = alice["spend"]["budgets"].as_array().unwrap();
    assert_eq!(alice_budgets.len(), 1, "{ctx}");
    assert_eq!(alice_budgets[0][0], "alice", "{ctx}");
    let live_keys = alice["live"].as_array().unwrap();
    assert_eq!(live_keys.len(), 4, "{ctx}");
    assert!(live_keys.iter().all(|k| k == "alice"), "{ctx}");
    assert_eq!(alice["refused"]["keys"], 403, "{ctx}");
    assert_eq!(alice["refused"]["bobUsage"], 403, "{ctx}");
    // And the API gives her no one else's live requests or numbers.
    let now = get(&base, "/ui/api/now", "alice-secret")
        .await
        .json()
        .unwrap();
    assert!(now.get("config").is_none(), "{now}");
    assert_eq!(now["hour"]["requests"], 4, "{now}");

    // A phone-width window: nothing wider than the screen (tables scroll in their boxes).
    assert!(
        page["phone"]["scrollWidth"].as_u64().unwrap() <= 390,
        "{ctx}"
    );
    assert!(
        page["phone"]["spendScrollWidth"].as_u64().unwrap() <= 390,
        "{ctx}"
    );
    top_shows_now_and_live(&base).await;

    // A config change the bridge cannot load shows on Now as the last reload, with its error;
    // the running config stays.
    let file = dir.path().join("claude-bridge.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{good}\n[router]\nbroken = \n")).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let reload = loop {
        let now = get(&base, "/ui/api/now", "admin-secret")
            .await
            .json()
            .unwrap();
        if !now["reload"].is_null() {
            break now["reload"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reload shown: {now}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(reload["ok"], false, "{reload}");
    assert!(
        reload["error"]
            .as_str()
            .unwrap()
            .contains("claude-bridge.toml"),
        "{reload}"
    );
    std::fs::write(&file, &good).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = get(&base, "/ui/api/now", "admin-secret")
            .await
            .json()
            .unwrap();
        if now["reload"]["ok"] == true {
            assert_eq!(now["reload"]["targets"], json!(["local,m1"]), "{now}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no good reload shown: {now}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for shot in [
        "now-admin",
        "spend-admin",
        "live-admin",
        "keys-admin",
        "now-alice",
        "spend-alice",
        "live-alice",
        "now-phone",
        "spend-phone",
    ] {
        let png = std::fs::read(shots.join(format!("{shot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{shot}");
    }
}

/// `claude-bridge top` in a real terminal (tmux): the Now numbers and targets, the recent
/// requests, and a request that ends while it runs; `q` quits.
async fn top_shows_now_and_live(base: &str) {
    use bridge_tests::tmux::Tmux;
    let root = bridge_tests::tempdir::TempDir::new("dash-top").unwrap();
    let bin = bridge_tests::bridge::binary_path().unwrap();
    let command = format!("'{}' top --url {base}", bin.display());
    let env = [
        ("PATH", String::from("/usr/bin:/bin")),
        ("CLAUDE_BRIDGE_KEY", String::from("admin-secret")),
    ];
    let term = Tmux::start(root.path(), "top", root.path(), &env, &command).unwrap();
    // carol's request was the last to end before top started.
    term.wait_for_visible(&["carol"], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("top: {e}\n{}", term.screen()));
    let screen = term.visible();
    for seen in ["local,m1", "closed", "requests (1 h)", "claude-code"] {
        assert!(screen.contains(seen), "{seen}:\n{screen}");
    }
    assert!(
        screen.contains("alice") && screen.contains("bob"),
        "{screen}"
    );
    // A request that ends while top runs shows up in its Live table.
    let r = ask_as(base, "bob-secret", "bob-in-top").await;
    assert_eq!(r.status, 200);
    let rows_before = screen.matches("bob").count();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while term.visible().matches("bob").count() <= rows_before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "top did not show bob's new request:\n{}",
            term.visible()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    term.press(&["q"]).unwrap();
    term.wait_for(&["[exited 0]"], Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("top did not quit on q: {e}\n{}", term.screen()));
}
