//! The team gateway end to end: keys, limits, budgets, the ledger and `/v1/usage`, the admin
//! API and the `keys` / `usage` / `store` commands — on SQLite with one replica here, on
//! PostgreSQL with replicas behind HAProxy in [`replicas`].

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

mod replicas;

use std::time::Duration;

use bridge_tests::bridge::{Bridge, BridgeOptions, binary_path};
use bridge_tests::http::{self, HttpResponse};
use bridge_tests::tempdir::TempDir;
use bridge_tests::upstream::{RecordedRequest, Upstream};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

/// A Chat upstream whose usage grows with each request (input 100 + n, output 10 + n), so
/// ledger totals can only match if every request is counted once.
pub(crate) async fn counting_upstream() -> Upstream {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    Upstream::start(move |_req: &RecordedRequest| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        bridge_tests::chunks::ChatStream::new()
            .role()
            .texts(&["ok"])
            .finish("stop")
            .usage(100 + i, 10 + i, 0)
            .build()
    })
    .await
    .unwrap()
}

/// A config whose gateway is on, for the upstream at `base`.
pub(crate) fn gateway_config(base: &str, store: &str, keys: &str) -> String {
    format!(
        r#"admin_key = "env:ADMIN_KEY"

[store]
url = "{store}"

[providers.local]
kind = "openai"
base_url = "{base}"
api_key = "sk-upstream"
models = ["m1"]

[providers.local.prices]
input = 1.0
output = 2.0

[router]
default = "local,m1"

{keys}
"#
    )
}

pub(crate) struct Served {
    pub bridge: Bridge,
    pub dir: TempDir,
}

pub(crate) async fn serve(name: &str, toml: &str, dir: Option<TempDir>) -> Served {
    let dir = dir.unwrap_or_else(|| TempDir::new(name).unwrap());
    let file = dir.path().join("claude-bridge.toml");
    std::fs::write(&file, toml).unwrap();
    let options = BridgeOptions {
        model: None,
        api_key: None,
        env: vec![
            ("ADMIN_KEY".into(), "admin-secret".into()),
            ("ALICE_KEY".into(), "alice-secret".into()),
            (
                "XDG_STATE_HOME".into(),
                dir.path().join("state").display().to_string(),
            ),
        ],
        ..BridgeOptions::default()
    }
    .args(&["--config", file.to_str().unwrap()]);
    let bridge = Bridge::start_with("http://127.0.0.1:9/v1", name, options)
        .await
        .unwrap();
    Served { bridge, dir }
}

pub(crate) fn ask() -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": true,
           "messages": [{"role": "user", "content": "Say hi."}]})
}

pub(crate) async fn call(base: &str, path: &str, key: &str, body: &Value) -> HttpResponse {
    let headers = [("content-type", "application/json"), ("x-api-key", key)];
    http::send(
        "POST",
        &format!("{base}{path}"),
        &headers,
        Some(body.to_string().into_bytes()),
        T,
    )
    .await
    .unwrap()
}

pub(crate) async fn get(base: &str, path: &str, key: &str) -> HttpResponse {
    let auth = format!("Bearer {key}");
    http::send(
        "GET",
        &format!("{base}{path}"),
        &[("authorization", &auth)],
        None,
        T,
    )
    .await
    .unwrap()
}

/// A gateway on SQLite whose key `bob` (`keys`) has spent its budget with one request.
async fn spent(name: &str, keys: &str) -> (Upstream, TempDir, Served) {
    let upstream = counting_upstream().await;
    let db = TempDir::new(&format!("{name}-db")).unwrap();
    let url = format!("sqlite://{}", db.path().join("g.db").display());
    let s = serve(
        name,
        &gateway_config(&upstream.base_url(), &url, keys),
        None,
    )
    .await;
    let first = call(&s.bridge.base_url(), "/v1/messages", "bob-secret", &ask()).await;
    assert_eq!(first.status, 200, "{}", first.text());
    (upstream, db, s)
}

/// `claude_bridge_key_refused_total` of `key`, from `/metrics`.
async fn refused(base: &str, key: &str) -> i64 {
    let metrics = http::send("GET", &format!("{base}/metrics"), &[], None, T)
        .await
        .unwrap()
        .text();
    metrics
        .lines()
        .find(|l| {
            l.starts_with("claude_bridge_key_refused_total{")
                && l.contains(&format!("key=\"{key}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn error_message(r: &HttpResponse) -> String {
    let v = r.json().unwrap_or_default();
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn keys_are_checked_and_a_key_never_reaches_the_upstream() {
    let upstream = counting_upstream().await;
    let keys = r#"
[[keys]]
name = "alice"
key = "env:ALICE_KEY"

[[keys]]
name = "old"
key = "old-secret"
expires = "2020-01-01T00:00:00Z"

[[keys]]
name = "elsewhere"
key = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
targets = ["cloud,*"]
"#;
    let s = serve(
        "gw-keys",
        &gateway_config(&upstream.base_url(), "sqlite://STORE", keys).replace(
            "STORE",
            &TempDir::new("gw-keys-db")
                .unwrap()
                .path()
                .join("g.db")
                .display()
                .to_string(),
        ),
        None,
    )
    .await;
    let base = s.bridge.base_url();

    let none = http::send(
        "POST",
        &format!("{base}/v1/messages"),
        &[("content-type", "application/json")],
        Some(ask().to_string().into_bytes()),
        T,
    )
    .await
    .unwrap();
    assert_eq!(none.status, 401, "{}", none.text());
    assert!(
        error_message(&none).contains("needs a key"),
        "{}",
        none.text()
    );

    let unknown = call(&base, "/v1/messages", "nobody-secret", &ask()).await;
    assert_eq!(unknown.status, 401);
    assert!(error_message(&unknown).contains("not a key of this bridge"));
    assert!(
        !unknown.text().contains("nobody-secret"),
        "the key is echoed: {}",
        unknown.text()
    );

    let expired = call(&base, "/v1/messages", "old-secret", &ask()).await;
    assert_eq!(expired.status, 401);
    assert!(
        error_message(&expired).contains("`old` expired at 2020-01-01T00:00:00Z"),
        "{}",
        expired.text()
    );

    // sha256 of "test": a key whose targets exclude every route.
    let elsewhere = call(&base, "/v1/messages", "test", &ask()).await;
    assert_eq!(elsewhere.status, 403, "{}", elsewhere.text());
    assert!(
        error_message(&elsewhere).contains("may not use local,m1"),
        "{}",
        elsewhere.text()
    );

    let ok = call(&base, "/v1/messages", "alice-secret", &ask()).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let bearer = http::send(
        "POST",
        &format!("{base}/v1/chat/completions"),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer alice-secret"),
        ],
        Some(
            json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]})
                .to_string()
                .into_bytes(),
        ),
        T,
    )
    .await
    .unwrap();
    assert_eq!(bearer.status, 200, "{}", bearer.text());
    for req in upstream.model_requests() {
        let headers = format!("{:?}", req.headers);
        assert!(
            !headers.contains("alice-secret"),
            "the client's key reached the upstream: {headers}"
        );
        assert_eq!(req.header("authorization"), Some("Bearer sk-upstream"));
    }

    // The OpenAI fronts answer in OpenAI's envelope.
    let openai = http::send(
        "POST",
        &format!("{base}/v1/chat/completions"),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer wrong"),
        ],
        Some(
            json!({"model": "m1", "messages": []})
                .to_string()
                .into_bytes(),
        ),
        T,
    )
    .await
    .unwrap();
    assert_eq!(openai.status, 401);
    assert_eq!(
        openai.json().unwrap()["error"]["type"],
        "authentication_error"
    );
}

#[tokio::test]
async fn the_admin_makes_and_revokes_keys_and_usage_is_per_key() {
    let upstream = counting_upstream().await;
    let db = TempDir::new("gw-admin-db").unwrap();
    let url = format!("sqlite://{}", db.path().join("g.db").display());
    let keys = "[[keys]]\nname = \"alice\"\nkey = \"env:ALICE_KEY\"\n";
    let s = serve(
        "gw-admin",
        &gateway_config(&upstream.base_url(), &url, keys),
        None,
    )
    .await;
    let base = s.bridge.base_url();

    let refused = call(&base, "/admin/keys", "alice-secret", &json!({"name": "x"})).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    let made = call(
        &base,
        "/admin/keys",
        "admin-secret",
        &json!({"name": "ci", "rpm": 100}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let secret = made.json().unwrap()["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("cb-"));
    let again = call(&base, "/admin/keys", "admin-secret", &json!({"name": "ci"})).await;
    assert_eq!(again.status, 409, "{}", again.text());
    let with_secret = call(
        &base,
        "/admin/keys",
        "admin-secret",
        &json!({"name": "z", "key": "mine"}),
    )
    .await;
    assert_eq!(with_secret.status, 400);

    for _ in 0..3 {
        assert_eq!(
            call(&base, "/v1/messages", &secret, &ask()).await.status,
            200
        );
    }
    for _ in 0..2 {
        assert_eq!(
            call(&base, "/v1/messages", "alice-secret", &ask())
                .await
                .status,
            200
        );
    }
    let listed = get(&base, "/admin/keys", "admin-secret")
        .await
        .json()
        .unwrap();
    let names: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "ci"]);
    assert!(!listed.to_string().contains(&secret));

    // The admin sees everyone; a key sees its own rows only.
    let all = get(&base, "/v1/usage?group_by=key", "admin-secret")
        .await
        .json()
        .unwrap();
    let rows = all["rows"].as_array().unwrap();
    let of = |name: &str| rows.iter().find(|r| r["key"] == name).cloned().unwrap();
    assert_eq!(of("ci")["requests"], 3);
    assert_eq!(of("alice")["requests"], 2);
    // Input 100+n, output 10+n over n = 0..5: the upstream's own numbers, each once.
    let input: i64 = rows
        .iter()
        .map(|r| r["input_tokens"].as_i64().unwrap())
        .sum();
    let output: i64 = rows
        .iter()
        .map(|r| r["output_tokens"].as_i64().unwrap())
        .sum();
    assert_eq!((input, output), (510, 60), "{all}");
    let cost: f64 = rows.iter().map(|r| r["cost_usd"].as_f64().unwrap()).sum();
    assert!(
        (cost - (510.0 * 1.0 + 60.0 * 2.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    let own = get(&base, "/v1/usage?group_by=key", &secret)
        .await
        .json()
        .unwrap();
    assert_eq!(own["rows"].as_array().unwrap().len(), 1, "{own}");
    assert_eq!(own["rows"][0]["key"], "ci");
    let other = get(&base, "/v1/usage?key=alice", &secret).await;
    assert_eq!(other.status, 403);
    let csv = get(
        &base,
        "/v1/usage?group_by=key,day&format=csv",
        "admin-secret",
    )
    .await;
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert!(
        csv.text()
            .starts_with("key,day,requests,errors,input_tokens"),
        "{}",
        csv.text()
    );
    let bad = get(&base, "/v1/usage?group_by=user", "admin-secret").await;
    assert_eq!(bad.status, 400);
    assert!(error_message(&bad).contains("allowed: key, model, target, day, session"));

    let revoked = http::send(
        "DELETE",
        &format!("{base}/admin/keys/ci"),
        &[("x-api-key", "admin-secret")],
        None,
        T,
    )
    .await
    .unwrap();
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let after = call(&base, "/v1/messages", &secret, &ask()).await;
    assert_eq!(after.status, 401);
    assert!(
        error_message(&after).contains("`ci` was revoked"),
        "{}",
        after.text()
    );

    // Keys made, rotated and revoked from the command line, on the running bridge's store.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(binary_path().unwrap())
            .args(args)
            .args(["--store", &url])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let secret_in = |text: &str| {
        text.split_whitespace()
            .find(|w| w.starts_with("cb-"))
            .unwrap()
            .to_owned()
    };
    let made = secret_in(&cli(&[
        "keys",
        "create",
        "dev",
        "--rpm",
        "50",
        "--budget-usd",
        "3",
    ]));
    // A key made elsewhere is found at once (the store is asked about a key it has not seen).
    assert_eq!(call(&base, "/v1/messages", &made, &ask()).await.status, 200);
    let rotated = secret_in(&cli(&["keys", "rotate", "dev"]));
    assert_eq!(
        call(&base, "/v1/messages", &rotated, &ask()).await.status,
        200
    );
    let listed = cli(&["keys", "list"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("dev ") && l.contains("rpm=50") && l.contains("$3/day")),
        "{listed}"
    );
    assert!(!listed.contains(&rotated), "{listed}");
    cli(&["keys", "revoke", "dev"]);
    let mut refused = None;
    for _ in 0..80 {
        let r = call(&base, "/v1/messages", &rotated, &ask()).await;
        if r.status == 401 {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = refused.expect("a revoked key is refused within 5 s on every replica");
    assert!(error_message(&refused).contains("`dev` was revoked"));

    // The same ledger from the command line.
    let out = std::process::Command::new(binary_path().unwrap())
        .args(["usage", "--store", &url, "--by", "key"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("ci ") && l.contains(" 3 ")),
        "{table}"
    );
    let status = std::process::Command::new(binary_path().unwrap())
        .args(["store", "status", "--store", &url])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("pending:    []"),
        "{:?}",
        status
    );
}

#[tokio::test]
async fn rates_and_budgets_refuse_in_each_fronts_envelope_and_the_ledger_survives_a_restart() {
    let upstream = counting_upstream().await;
    let db = TempDir::new("gw-limits-db").unwrap();
    let url = format!("sqlite://{}", db.path().join("g.db").display());
    let keys = r#"
[[keys]]
name = "alice"
key = "env:ALICE_KEY"
rpm = 4

[[keys]]
name = "bob"
key = "bob-secret"
budget_usd = 0.0001
budget_period = "month"
"#;
    let toml = gateway_config(&upstream.base_url(), &url, keys);
    let s = serve("gw-limits", &toml, None).await;
    let base = s.bridge.base_url();
    let mut ok = 0;
    let mut limited = None;
    for _ in 0..6 {
        let r = call(&base, "/v1/messages", "alice-secret", &ask()).await;
        match r.status {
            200 => ok += 1,
            429 => limited = Some(r),
            other => panic!("{other}: {}", r.text()),
        }
    }
    assert_eq!(ok, 4, "rpm = 4 admits four a minute");
    let limited = limited.unwrap();
    assert_eq!(limited.json().unwrap()["error"]["type"], "rate_limit_error");
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(error_message(&limited).contains("rpm = 4"));
    let chat = call(
        &base,
        "/v1/chat/completions",
        "alice-secret",
        &json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(chat.status, 429);
    assert_eq!(chat.json().unwrap()["error"]["code"], "rate_limit_exceeded");

    // One request costs (100+n)·1 + (10+n)·2 per million: over $0.0001 after the first.
    assert_eq!(
        call(&base, "/v1/messages", "bob-secret", &ask())
            .await
            .status,
        200
    );
    let spent = call(&base, "/v1/messages", "bob-secret", &ask()).await;
    assert_eq!(spent.status, 402, "{}", spent.text());
    assert_eq!(spent.header("x-should-retry"), Some("false"));
    assert_eq!(spent.json().unwrap()["error"]["type"], "billing_error");
    let message = error_message(&spent);
    assert!(
        message.contains("budget") && message.contains("resets at"),
        "{message}"
    );
    let responses = call(
        &base,
        "/v1/responses",
        "bob-secret",
        &json!({"model": "m1", "input": "hi"}),
    )
    .await;
    assert_eq!(responses.status, 429, "{}", responses.text());
    assert_eq!(
        responses.json().unwrap()["error"]["code"],
        "insufficient_quota"
    );

    let before = get(&base, "/v1/usage?group_by=key", "admin-secret")
        .await
        .json()
        .unwrap();
    // SIGTERM: the last records are written before the process ends; the next one reads them.
    let Served { mut bridge, dir } = s;
    bridge.signal("TERM").unwrap();
    bridge.wait_exit(Duration::from_secs(20)).await.unwrap();
    let s = serve("gw-limits-2", &toml, Some(dir)).await;
    let after = get(
        &s.bridge.base_url(),
        "/v1/usage?group_by=key",
        "admin-secret",
    )
    .await
    .json()
    .unwrap();
    assert_eq!(before, after);
    let alice = after["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "alice")
        .cloned()
        .unwrap();
    assert_eq!(
        alice["requests"], 4,
        "refused requests are not model requests: {after}"
    );
    // The budget holds across the restart.
    let still = call(&s.bridge.base_url(), "/v1/messages", "bob-secret", &ask()).await;
    assert_eq!(still.status, 402);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_stops_at_once_on_a_spent_budget_and_shows_why() {
    let keys = "[[keys]]\nname = \"bob\"\nkey = \"bob-secret\"\nbudget_usd = 0.0001\nbudget_period = \"week\"\n";
    let (_upstream, _db, s) = spent("gw-cc", keys).await;
    let base = s.bridge.base_url();
    let before = refused(&base, "bob").await;
    let started = std::time::Instant::now();
    // Claude Code's own retry policy (the default number of retries), the key in ANTHROPIC_API_KEY.
    let run = bridge_tests::clients::run_claude_code_with(
        &base,
        "say hello",
        &[],
        &[
            ("ANTHROPIC_API_KEY", "bob-secret"),
            ("CLAUDE_CODE_MAX_RETRIES", ""),
        ],
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    let took = started.elapsed();
    let shown = format!("{}{}", run.output.stdout, run.output.stderr);
    assert_ne!(run.output.code, Some(0), "{}", run.describe());
    assert!(
        shown.contains("budget_usd budget of $0.0001 for this week") && shown.contains("resets at"),
        "the reason reaches the user: {}",
        run.describe()
    );
    // Not retried: one refusal for the one request Claude Code makes, and no back-off waits.
    let after = refused(&base, "bob").await;
    assert_eq!(
        after - before,
        1,
        "Claude Code retried the refusal\n{}",
        run.describe()
    );
    assert!(
        took < Duration::from_secs(30),
        "{took:?}\n{}",
        run.describe()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_stops_at_once_on_a_spent_budget_and_shows_why() {
    let keys = "[[keys]]\nname = \"bob\"\nkey = \"bob-secret\"\nbudget_tokens = 10\n";
    let (_upstream, _db, s) = spent("gw-codex", keys).await;
    let base = s.bridge.base_url();
    let home = TempDir::new("gw-codex-home").unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"local\"\ncheck_for_update_on_startup = false\n\
             [analytics]\nenabled = false\n[features]\nplugins = false\nremote_plugin = false\napps = false\nshell_snapshot = false\n\
             [model_providers.local]\nname = \"local\"\nbase_url = \"{base}/v1\"\nwire_api = \"responses\"\nenv_key = \"LOCAL_API_KEY\"\n"
        ),
    )
    .unwrap();
    let work = TempDir::new("gw-codex-work").unwrap();
    let mut cmd = tokio::process::Command::new(bridge_tests::codex::codex_bin().unwrap());
    // Codex's own retry policy: no `*_max_retries` overrides.
    cmd.args(["exec", "--skip-git-repo-check", "--json", "say hello"])
        .current_dir(work.path())
        .env("CODEX_HOME", home.path())
        .env("LOCAL_API_KEY", "bob-secret")
        .env_remove("OPENAI_API_KEY");
    let started = std::time::Instant::now();
    let out = bridge_tests::clients::run(cmd, Duration::from_secs(120), "codex exec")
        .await
        .unwrap();
    let took = started.elapsed();
    let shown = format!("{}{}", out.stdout, out.stderr);
    assert_ne!(out.code, Some(0), "{shown}");
    assert!(
        shown.contains("has spent its budget_tokens budget of 10") && shown.contains("resets at"),
        "the reason reaches the user: {shown}"
    );
    assert_eq!(
        refused(&base, "bob").await,
        1,
        "Codex retried the refusal: {shown}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}: {shown}");
}

/// `claude-bridge claude` and `claude-bridge codex` with a config whose gateway has keys: the tool
/// sends the user's key (`--key`, `CLAUDE_BRIDGE_KEY`, or for Claude Code its own
/// `ANTHROPIC_AUTH_TOKEN`) and its requests count under that key; with no key, or one the
/// gateway refuses, the launcher says so before the tool starts (it used to start Claude Code
/// with a key of no one's, which showed "API Error: 401").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launchers_send_the_users_key_or_say_before_the_tool_starts_that_one_is_needed() {
    use std::os::unix::fs::PermissionsExt;
    let upstream = counting_upstream().await;
    let dir = TempDir::new("gw-launch").unwrap();
    let url = format!("sqlite://{}", dir.path().join("g.db").display());
    let keys = "[[keys]]\nname = \"alice\"\nkey = \"alice-secret\"\nrpm = 100\n";
    let file = dir.path().join("claude-bridge.toml");
    std::fs::write(&file, gateway_config(&upstream.base_url(), &url, keys)).unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    // A tool that only leaves a mark that it ran.
    let mark = dir.path().join("ran");
    let stand_in = dir.path().join("tool.sh");
    std::fs::write(
        &stand_in,
        format!("#!/bin/sh\ntouch '{}'\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let claude = bridge_tests::clients::claude_code_bin().unwrap();
    let codex = bridge_tests::codex::codex_bin().unwrap();
    let launch = async |tool: &str, bin: &std::path::Path, env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = tokio::process::Command::new(binary_path().unwrap());
        cmd.args([tool, "--config", file.to_str().unwrap(), "--log-file", "-"])
            .arg(format!("--{tool}-bin"))
            .arg(bin)
            .args(args)
            .current_dir(&work)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("ADMIN_KEY", "admin-secret")
            .env("CLAUDE_BRIDGE_NO_UPSTREAM_CHECK", "true")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env("DISABLE_AUTOUPDATER", "1")
            .envs(env.iter().copied());
        let out = bridge_tests::clients::run(cmd, Duration::from_secs(120), tool)
            .await
            .unwrap();
        let shown = format!(
            "{tool} {args:?} {env:?}: exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.code, out.stdout, out.stderr
        );
        (out, shown)
    };

    // No key: said before the tool starts, with what to do.
    for tool in ["claude", "codex"] {
        let (out, shown) = launch(tool, &stand_in, &[], &["--", "-p", "hi"]).await;
        assert_ne!(out.code, Some(0), "{shown}");
        assert!(
            out.stderr.contains("this bridge needs a key") && out.stderr.contains("--key"),
            "{shown}"
        );
        assert!(!mark.exists(), "the tool started: {shown}");
    }
    // A key of no one's in Claude Code's own variable: refused before it starts, not echoed.
    let (out, shown) = launch(
        "claude",
        &stand_in,
        &[("ANTHROPIC_AUTH_TOKEN", "sk-ant-personal-9f3e")],
        &["--", "-p", "hi"],
    )
    .await;
    assert_ne!(out.code, Some(0), "{shown}");
    assert!(
        out.stderr
            .contains("the key from ANTHROPIC_AUTH_TOKEN cannot call this bridge")
            && out.stderr.contains("not a key of this bridge"),
        "{shown}"
    );
    assert!(!out.stderr.contains("sk-ant-personal-9f3e"), "{shown}");
    assert!(!mark.exists(), "the tool started: {shown}");

    // The real tools, with the key from `--key`, Claude Code's own variable and
    // `CLAUDE_BRIDGE_KEY`: each answers.
    let p = ["-p", "say hi", "--output-format", "json"];
    for (env, flags) in [
        (vec![], vec!["--key", "alice-secret"]),
        (vec![("ANTHROPIC_AUTH_TOKEN", "alice-secret")], vec![]),
    ] {
        let args: Vec<&str> = flags.into_iter().chain(["--"]).chain(p).collect();
        let (out, shown) = launch("claude", &claude, &env, &args).await;
        assert_eq!(out.code, Some(0), "{shown}");
        let result: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
        assert_eq!(result["result"], "ok", "{shown}");
    }
    let (out, shown) = launch(
        "codex",
        &codex,
        &[("CLAUDE_BRIDGE_KEY", "alice-secret")],
        &["--", "exec", "--skip-git-repo-check", "say hi"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{shown}");
    assert!(out.stdout.contains("ok"), "{shown}");

    // Every request the upstream got was alice's, in the ledger.
    let upstream_got = upstream.requests().iter().filter(|r| r.is_chat()).count();
    let usage = std::process::Command::new(binary_path().unwrap())
        .args(["usage", "--store", &url, "--by", "key", "--csv"])
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&usage.stdout).into_owned();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert!(upstream_got >= 3, "{}", upstream.dump());
    assert_eq!(
        rows,
        [rows
            .iter()
            .copied()
            .find(|r| r.starts_with(&format!("alice,{upstream_got},")))
            .unwrap_or("no alice row with every request")],
        "{csv}"
    );
}

#[tokio::test]
async fn a_store_that_cannot_be_reached_is_served_through_when_open_and_refused_when_closed() {
    let upstream = counting_upstream().await;
    // Nothing listens there.
    let port = bridge_tests::bridge::free_port().unwrap();
    let url = format!("postgres://bridge@127.0.0.1:{port}/bridge");
    let keys = "[[keys]]\nname = \"alice\"\nkey = \"env:ALICE_KEY\"\nrpm = 100\n";
    let open = gateway_config(&upstream.base_url(), &url, keys);
    let s = serve("gw-away-open", &open, None).await;
    let served = call(&s.bridge.base_url(), "/v1/messages", "alice-secret", &ask()).await;
    assert_eq!(served.status, 200, "{}", served.text());
    assert!(served.text().contains("message_stop"));
    let closed = open.replace("[store]\n", "[store]\non_error = \"closed\"\n");
    let s = serve("gw-away-closed", &closed, None).await;
    let refused = call(&s.bridge.base_url(), "/v1/messages", "alice-secret", &ask()).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert!(
        error_message(&refused).contains("store.on_error = \"closed\""),
        "{}",
        refused.text()
    );
}
