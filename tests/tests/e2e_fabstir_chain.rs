//! The Fabstir backend in chain mode, end to end, in the local Fabstir world: hardhat's EVM node
//! (chain id 84532) running our NodeRegistry, JobMarketplace and USDC contracts, and local host
//! nodes that check every job on-chain and settle it when the socket closes. The real bridge
//! binary discovers the host in the registry, pays a job (ETH, or USDC after `approve`), records
//! it in its ledger and talks to the host over the encrypted WebSocket; the real Claude Code CLI
//! drives it. Only the model is scripted.

#![expect(clippy::unwrap_used, reason = "test helpers fail the test on purpose")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, U256};
use bridge_core::fabstir::model_id::ModelId;
use bridge_tests::bridge::{Bridge, BridgeOptions};
use bridge_tests::clients::run_claude_code_with;
use bridge_tests::evm_world::EvmWorld;
use bridge_tests::fabstir_node::NodePrompt;
use bridge_tests::fabstir_node::{HostNode, Script};
use bridge_tests::tempdir::TempDir;
use bridge_tests::{http, sse};
use claude_bridge::fabstir::crypto;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
const HOST_A: [u8; 32] = [0xa1; 32];
const HOST_B: [u8; 32] = [0xb2; 32];
const WALLET: [u8; 32] = [0x5c; 32];
const MODEL: &str =
    "bartowski/Qwen2.5-Coder-7B-Instruct-GGUF:Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf";
/// Per 1000 tokens: 0.001 ETH, or 0.002 USDC.
const PRICE_NATIVE: u128 = 1_000_000_000_000_000;
const PRICE_STABLE: u128 = 2_000;
const ETH: u128 = 1_000_000_000_000_000_000;
/// The bridge's default deposit: 0.0002 ETH.
const DEPOSIT: u128 = 200_000_000_000_000;

fn model() -> ModelId {
    ModelId::parse(MODEL).unwrap()
}

fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(3).map(|c| c.iter().collect()).collect()
}

fn script(f: impl Fn(&NodePrompt) -> String + Send + Sync + 'static) -> Script {
    Arc::new(move |p: &NodePrompt| tokens(&f(p)))
}

fn wallet_address() -> Address {
    let key = crypto::secret_key(&WALLET, "wallet").unwrap();
    Address::from(crypto::address(&key.public_key()))
}

/// A world with one funded client wallet.
async fn world() -> EvmWorld {
    let world = EvmWorld::start().await.unwrap();
    world
        .fund(wallet_address(), U256::from(ETH), U256::from(10_000_000u64))
        .await
        .unwrap();
    world
}

/// A host node on the world's chain, registered for the model.
async fn host(world: &EvmWorld, key: [u8; 32], script: Script) -> (HostNode, Address) {
    let node = HostNode::start_on_chain(key, script, world.node_chain(&key).unwrap())
        .await
        .unwrap();
    let address = world
        .register_host(&key, &node.url(), &model(), PRICE_NATIVE, PRICE_STABLE)
        .await
        .unwrap();
    (node, address)
}

async fn bridge(world: &EvmWorld, ledger: &Path, name: &str, extra: &[&str]) -> Bridge {
    try_bridge(world, ledger, name, extra).await.unwrap()
}

async fn try_bridge(
    world: &EvmWorld,
    ledger: &Path,
    name: &str,
    extra: &[&str],
) -> bridge_tests::Result<Bridge> {
    let mut args = world.bridge_args();
    args.extend(
        [
            "--ledger",
            ledger.to_str().unwrap(),
            "--max-tokens-cap",
            "2048",
            "--ping-interval",
            "1",
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let opts = BridgeOptions::fabstir(MODEL, &WALLET).args(&args);
    Bridge::start_with("http://127.0.0.1:9/unused", name, opts).await
}

fn request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-6", "max_tokens": 1000, "stream": stream,
        "messages": [{"role": "user", "content": "hello"}]
    })
}

fn ledger_jobs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let ledger: Value = serde_json::from_str(&text).unwrap();
    ledger["jobs"].as_array().unwrap().clone()
}

/// Poll `check` for up to 10 s; whether it became true.
async fn eventually(mut check: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..200 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_pays_a_job_on_chain_runs_a_tool_and_the_job_is_settled() {
    let world = world().await;
    let (node, host_address) = host(
        &world,
        HOST_A,
        script(|p| {
            if p.prompt.contains("<tool_response>\n") {
                String::from("Done: paid-on-chain.txt is there.")
            } else if p.prompt.contains("# Tools") {
                String::from(
                    "I'll create it.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"echo chain > paid-on-chain.txt\"}}\n</tool_call>",
                )
            } else {
                String::from("Chain file test")
            }
        }),
    )
    .await;
    let dir = TempDir::new("fabstir-ledger").unwrap();
    let ledger = dir.path().join("ledger.json");
    let mut bridge = bridge(&world, &ledger, "fabstir-chain-claude", &[]).await;
    let run = run_claude_code_with(
        &bridge.base_url(),
        "Create the file paid-on-chain.txt containing the word chain.",
        &["--allowedTools", "Bash"],
        &[],
        CLI_TIMEOUT,
    )
    .await
    .unwrap();
    let made = run.cwd.path().join("paid-on-chain.txt");
    let ctx = || {
        format!(
            "{}\nnode: {:?}\n--- bridge log:\n{}",
            run.describe(),
            node.log(),
            bridge.log()
        )
    };
    assert!(made.is_file(), "the Bash tool did not run\n{}", ctx());
    assert_eq!(std::fs::read_to_string(&made).unwrap().trim(), "chain");
    assert_eq!(
        run.result_text(),
        Some("Done: paid-on-chain.txt is there."),
        "{}",
        ctx()
    );

    // One job, paid by our wallet to the registered host at its on-chain price.
    assert_eq!(world.job_count().await.unwrap(), 1, "{}", ctx());
    let job = world.job(1).await.unwrap();
    assert_eq!(job.depositor, wallet_address());
    assert_eq!(job.host, host_address);
    assert_eq!(job.payment_token, Address::ZERO);
    assert_eq!(job.deposit, DEPOSIT);
    assert_eq!(job.price_per_token, PRICE_NATIVE);
    assert_eq!(job.status, 0, "the job is open while the session is");
    let log = node.log();
    assert!(log.inits.iter().all(|(id, _)| id == "1"), "{log:?}");
    assert_eq!(log.connections, 1, "{log:?}");

    // The ledger recorded it, with the tokens the host reported.
    let jobs = ledger_jobs(&ledger);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["job_id"], 1);
    assert_eq!(jobs[0]["chain_id"], 84532);
    assert_eq!(jobs[0]["host"], host_address.to_string());
    assert_eq!(jobs[0]["deposit"], DEPOSIT.to_string());
    assert_eq!(jobs[0]["payment"], "eth");
    assert_eq!(jobs[0]["status"], "open");
    let prompts = log.prompts.len() as u64;
    assert_eq!(jobs[0]["prompts"], prompts, "{jobs:?}");
    let tokens_used = jobs[0]["tokens_used"].as_u64().unwrap();
    assert!(tokens_used > 0);

    // Stopping the bridge closes the session properly (a WebSocket close, recorded in the
    // ledger at once): the host settles the job on-chain.
    bridge.signal("TERM").unwrap();
    bridge.wait_exit(T).await.unwrap();
    let log = format!("node: {:?}\n--- bridge log:\n{}", node.log(), bridge.log());
    assert_eq!(node.log().closed_by_client, 1, "{log}");
    assert_eq!(ledger_jobs(&ledger)[0]["status"], "closed", "{log}");
    let mut settled = None;
    let done = eventually(async || {
        settled = Some(world.job(1).await.unwrap());
        settled.as_ref().unwrap().status == 1
    })
    .await;
    let settled = settled.unwrap();
    assert!(done, "the host did not settle the job: {settled:?}");
    assert_eq!(settled.tokens_used, u128::from(tokens_used));
    let paid = u128::from(tokens_used) * PRICE_NATIVE / 1000;
    assert_eq!(settled.paid, paid);
    assert_eq!(settled.refunded, DEPOSIT - paid);

    // A restart reads the ledger and learns from the chain how the job ended.
    let again = bridge_for_restart(&world, &ledger).await;
    let jobs = ledger_jobs(&ledger);
    assert_eq!(jobs[0]["status"], "settled", "{jobs:?}\n{}", again.log());
    assert_eq!(jobs[0]["charged"], paid.to_string());
}

async fn bridge_for_restart(world: &EvmWorld, ledger: &Path) -> Bridge {
    bridge(world, ledger, "fabstir-chain-restart", &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_host_makes_the_next_prompt_open_a_new_job_until_the_cap_says_no() {
    let world = world().await;
    let (node, _) = host(&world, HOST_A, script(|_| "slow ".repeat(400))).await;
    let dir = TempDir::new("fabstir-ledger").unwrap();
    let ledger = dir.path().join("ledger.json");
    // Room for two deposits, not three.
    let bridge = bridge(
        &world,
        &ledger,
        "fabstir-chain-killed",
        &["--deposit", "0.0002", "--max-spend", "0.0005"],
    )
    .await;
    let ctx = || format!("node: {:?}\n--- bridge log:\n{}", node.log(), bridge.log());

    for round in 1..=2u64 {
        let body = request(true).to_string().into_bytes();
        let r = node
            .kill_mid_stream(&bridge.base_url(), body, T)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", ctx());
        let events = sse::parse(&r.body);
        sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
        let error = sse::error_event(&events)
            .unwrap_or_else(|| panic!("no error event:\n{}\n{}", r.text(), ctx()));
        assert_eq!(error["error"]["type"], "overloaded_error", "{error}");
        // Each round ran on its own job.
        assert_eq!(world.job_count().await.unwrap(), round, "{}", ctx());
        assert_eq!(ledger_jobs(&ledger).len() as u64, round);
    }
    let log = node.log();
    assert_eq!(
        log.inits
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["1", "2"],
        "{log:?}"
    );

    // A third job would cross --max-spend: a clear billing error, and no new job.
    let r = http::post_messages(&bridge.base_url(), &request(false), T)
        .await
        .unwrap();
    let error = r
        .anthropic_error(&[402], "billing_error")
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.text(), ctx()));
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("--max-spend"), "{message}");
    assert!(message.contains("0.0002 ETH"), "{message}");
    assert_eq!(world.job_count().await.unwrap(), 2);
}

/// A host that crashes on the prompt before its first token: the bridge opens a new job once,
/// by itself, and the client gets one answer — no error for Claude Code to retry into a third
/// paid job. The crashed job answered nothing (its deposit comes back when it times out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lost_before_its_first_token_is_recovered_on_a_new_job() {
    let world = world().await;
    let (node, _) = host(&world, HOST_A, script(|_| String::from("recovered answer"))).await;
    let dir = TempDir::new("fabstir-ledger").unwrap();
    let ledger = dir.path().join("ledger.json");
    let bridge = bridge(&world, &ledger, "fabstir-chain-recover", &[]).await;
    node.crash_before_reply(1);
    for stream in [false, true] {
        let r = http::post_messages(&bridge.base_url(), &request(stream), T)
            .await
            .unwrap();
        let ctx = || format!("node: {:?}\n--- bridge log:\n{}", node.log(), bridge.log());
        assert_eq!(r.status, 200, "{}\n{}", r.text(), ctx());
        let text = if stream {
            let events = sse::parse(&r.body);
            sse::validate(&events).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
            assert!(sse::error_event(&events).is_none(), "{}", ctx());
            sse::accumulate(&events).unwrap()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        } else {
            r.json().unwrap()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(text, "recovered answer", "{}", ctx());
    }
    let log = node.log();
    assert_eq!(log.crashed_before_reply, 1, "{log:?}");
    // The first prompt went to job 1 (crashed), then job 2; the second prompt stayed on job 2.
    assert_eq!(
        log.inits
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["1", "2", "2"],
        "{log:?}"
    );
    assert_eq!(world.job_count().await.unwrap(), 2);
    let jobs = ledger_jobs(&ledger);
    assert_eq!(jobs.len(), 2, "both jobs are in the ledger: {jobs:?}");
    assert_eq!(jobs[0]["tokens_used"], 0, "{jobs:?}");
    assert!(
        bridge.log().contains("sending the prompt again"),
        "{}",
        bridge.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_paid_in_usdc_are_approved_first_and_hosts_are_listed() {
    let world = world().await;
    let (_node_a, host_a) = host(&world, HOST_A, script(|_| String::from("paid in USDC"))).await;
    let (_node_b, host_b) = host(&world, HOST_B, script(|_| String::from("B"))).await;
    let dir = TempDir::new("fabstir-ledger").unwrap();
    let ledger = dir.path().join("ledger.json");
    let before = world.usdc_balance(wallet_address()).await.unwrap();
    let bridge = bridge(
        &world,
        &ledger,
        "fabstir-chain-usdc",
        &[
            "--payment",
            "usdc",
            "--deposit",
            "0.75",
            "--host",
            &host_a.to_string(),
        ],
    )
    .await;
    let r = http::post_messages(&bridge.base_url(), &request(false), T)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), bridge.log());
    assert_eq!(r.json().unwrap()["content"][0]["text"], "paid in USDC");
    let job = world.job(1).await.unwrap();
    assert_eq!(job.payment_token, world.usdc);
    assert_eq!(job.host, host_a, "--host pins the operator");
    assert_eq!(job.deposit, 750_000);
    assert_eq!(job.price_per_token, PRICE_STABLE);
    assert_eq!(
        world.usdc_balance(wallet_address()).await.unwrap(),
        before - 750_000
    );
    assert_eq!(ledger_jobs(&ledger)[0]["payment"], "usdc");

    // `claude-bridge hosts` lists both hosts with their prices.
    let out = tokio::process::Command::new(bridge_tests::bridge::binary_path().unwrap())
        .arg("hosts")
        .args(world.bridge_args())
        .args(["--model", MODEL, "--payment", "usdc"])
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for address in [host_a, host_b] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&address.to_string()))
            .unwrap_or_else(|| panic!("{address} missing:\n{table}"));
        assert!(
            row.contains(" 0.002 "),
            "price per 1000 tokens in USDC: {row}"
        );
        assert!(row.ends_with("ok"), "{row}");
    }
    assert!(table.contains(&model().to_hex()), "{table}");

    // A bridge in a container reaches hosts registered on the machine's loopback through
    // --localhost-override (the registered URL's host is replaced).
    assert!(table.contains("://127.0.0.1:"), "{table}");
    let out = tokio::process::Command::new(bridge_tests::bridge::binary_path().unwrap())
        .arg("hosts")
        .args(world.bridge_args())
        .args(["--model", MODEL, "--payment", "usdc"])
        .env("CLAUDE_BRIDGE_LOCALHOST_OVERRIDE", "host.docker.internal")
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    for address in [host_a, host_b] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&address.to_string()))
            .unwrap_or_else(|| panic!("{address} missing:\n{table}"));
        assert!(row.contains("://host.docker.internal:"), "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_chain_and_an_unfunded_wallet_are_clear_errors() {
    let world = EvmWorld::start().await.unwrap();
    let (_node, _) = host(&world, HOST_A, script(|_| String::from("x"))).await;
    let dir = TempDir::new("fabstir-ledger").unwrap();
    let ledger = dir.path().join("ledger.json");
    // The world is 84532; the bridge is told to expect Base mainnet.
    let error = try_bridge(
        &world,
        &ledger,
        "fabstir-chain-wrong",
        &["--chain-id", "8453"],
    )
    .await
    .err()
    .unwrap();
    assert!(
        error
            .to_string()
            .contains("serves chain id 84532, not 8453"),
        "{error}"
    );

    // The wallet holds nothing: the prompt fails with a billing error naming the amounts.
    let bridge = bridge(&world, &ledger, "fabstir-chain-unfunded", &[]).await;
    let r = http::post_messages(&bridge.base_url(), &request(false), T)
        .await
        .unwrap();
    let error = r
        .anthropic_error(&[402], "billing_error")
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.text(), bridge.log()));
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("holds 0 ETH") && message.contains("0.0002 ETH"),
        "{message}"
    );
    assert_eq!(world.job_count().await.unwrap(), 0);
}

/// Two gateway replicas (one store, each its own ledger file) with room under `--max-spend` for
/// one deposit: both start with nothing spent, a prompt reaches each at once, and exactly one
/// job is paid — the other replica refuses with the cap's billing error. Each replica's own
/// count would have let both pay; the job reserved in the shared ledger (the store) does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateway_replicas_sharing_a_store_never_cross_the_spending_cap_together() {
    let world = world().await;
    let (node, _) = host(&world, HOST_A, script(|_| String::from("one paid answer"))).await;
    let dir = TempDir::new("fabstir-shared").unwrap();
    let config = dir.path().join("claude-bridge.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\nurl = \"sqlite://{}\"\n\n[providers.hosts]\nkind = \"fabstir\"\n\n[providers.hosts.prices]\ntoken_usd = 2000.0\n\n[router]\ndefault = \"hosts,{MODEL}\"\n",
            dir.path().join("gateway.db").display()
        ),
    )
    .unwrap();
    let names = ["fabstir-shared-0", "fabstir-shared-1"];
    let replica = |i: usize| {
        let ledger = dir.path().join(format!("ledger-{i}.json"));
        let mut args = world.bridge_args();
        args.extend(
            [
                "--config",
                config.to_str().unwrap(),
                "--ledger",
                ledger.to_str().unwrap(),
                "--deposit",
                "0.0002",
                "--max-spend",
                "0.0003",
            ]
            .map(String::from),
        );
        let mut opts = BridgeOptions::fabstir(MODEL, &WALLET).args(&args);
        opts.env.push((
            "XDG_STATE_HOME".into(),
            dir.path().join(format!("state-{i}")).display().to_string(),
        ));
        Bridge::start_with("http://127.0.0.1:9/unused", names[i], opts)
    };
    let (a, b) = tokio::join!(replica(0), replica(1));
    let (a, b) = (a.unwrap(), b.unwrap());
    let ctx = || {
        format!(
            "node: {:?}\n--- a:\n{}\n--- b:\n{}",
            node.log(),
            a.log(),
            b.log()
        )
    };
    let (base_a, base_b, body) = (a.base_url(), b.base_url(), request(false));
    let (ra, rb) = tokio::join!(
        http::post_messages(&base_a, &body, T),
        http::post_messages(&base_b, &body, T)
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let mut statuses = [ra.status, rb.status];
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 402],
        "{}\n{}\n{}",
        ra.text(),
        rb.text(),
        ctx()
    );
    let refused = if ra.status == 402 { &ra } else { &rb };
    let error = refused
        .anthropic_error(&[402], "billing_error")
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", refused.text(), ctx()));
    assert!(
        error["message"].as_str().unwrap().contains("--max-spend"),
        "{error}"
    );
    assert_eq!(world.job_count().await.unwrap(), 1, "{}", ctx());
    // The ledger: both requests, the paid one at what its tokens cost at the job's price
    // (5 tokens × 10^15 wei / 1000 = 0.000005 ETH), in USD at token_usd = 2000.
    // (Each replica writes what it holds when asked: b first, then a's answer holds both.)
    let flushed = http::send("GET", &format!("{base_b}/v1/usage"), &[], None, T).await;
    assert_eq!(flushed.unwrap().status, 200);
    let usage = http::send("GET", &format!("{base_a}/v1/usage"), &[], None, T)
        .await
        .unwrap()
        .json()
        .unwrap();
    let row = &usage["rows"][0];
    assert_eq!(
        (row["requests"].as_i64(), row["errors"].as_i64()),
        (Some(2), Some(1)),
        "{usage}"
    );
    let cost = row["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.01).abs() < 1e-9, "{usage}");
}
