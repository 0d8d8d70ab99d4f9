//! `make bench-proxy` (issue 15, item 1): what the proxy costs, measured against a direct
//! connection in the same run. Measurement only: it never fails on a number (it exits non-zero
//! only when it could not run).
//!
//! - A scripted OpenAI Chat Completions upstream in this process (hyper): a 54-piece SSE answer
//!   (role, 50 text chunks of four characters, finish, usage, `[DONE]`:
//!   `bench_stream::small_stream_parts`, which `make bench` also feeds a chunk at a time; before
//!   2026-11-29 05:00 UTC the chunks were `w0 `…`w49 ` and usage came before finish) written as
//!   fast as the socket takes it, each chunk its own write (the body yields between chunks so
//!   hyper flushes each one, as a model streams them), or a short `chat.completion` JSON when
//!   the request does not ask for a stream.
//!   It keeps no per-request state, so it is never the bottleneck.
//! - The release bridge (`CLAUDE_BRIDGE_BIN`, else `target/release/claude-bridge`), once per
//!   engine (`--engine native`, `--engine wasm`), started with `--provider openai --base-url
//!   <upstream>/v1 --model m --no-upstream-check`.
//! - On a machine with two or more cores the bridges run under `taskset -c 0` and this process
//!   (load generator + upstream, one tokio thread) re-executes itself under `taskset -c 1`.
//! - The direct baseline sends the upstream exactly the body the bridge sent it for the same
//!   client request (captured once at start), so sizes match byte for byte.
//! - The pass-through floor (`pass`): this binary again (`--pass-through`), pinned like the
//!   bridge, a proxy on the bridge's own stack (hyper server, hyper-util's pooled client, tokio's
//!   multi-thread runtime) that reads the request body, forwards it and streams the answer back
//!   unchanged. It gets the direct baseline's bodies. What it adds over direct is what any proxy
//!   on this stack and this machine pays (the extra hop, two cross-core wake-ups, the syscalls);
//!   what the bridge adds over it is the translation's cost.
//! - A paced variant of the small stream (`paced`): the upstream leaves `BENCH_PROXY_PACE_US`
//!   (1000) between chunks, so each chunk reaches the bridge on its own, as from a model that
//!   generates tokens one by one; its CPU per request is the per-chunk cost of the translation.
//! - Scenarios: streaming and not; a small request and a Claude Code request of about 300 KB
//!   (the captured Claude Code request in `tests/fixtures/claude_code_tool_round_trip`, its 12
//!   tools plus 8 more of the same shape, its history grown with tool-call turns to the size);
//!   each concurrency level; direct, native, wasm one after the other per scenario. Every worker
//!   holds one keep-alive connection and does one unmeasured request first.
//! - TTFT: time from sending the request to the first body frame holding content (a
//!   `text_delta` event from the bridge; a `"content":"w…` chunk from the upstream); for a
//!   non-streaming answer, the first body byte. Total: to the end of the body. A request counts
//!   only if it got 200 and a complete answer (`message_stop` / `[DONE]` / a closing `}`).
//! - Bridge CPU around each scenario: the sum of its threads' time on a CPU
//!   (`/proc/<pid>/task/*/sched`, nanoseconds), else `/proc/<pid>/stat` (clock ticks); this
//!   process's own CPU too (`gen CPU`: near 100% would mean the generator side was the limit).
//! - RSS: the bridge's `VmRSS` after start and one request of each kind, small and 292 KB,
//!   streamed and not; again `BENCH_PROXY_IDLE_WAIT` seconds later (36: idle, after the wasm
//!   engine's 30-second trim of unused instances); then with `BENCH_PROXY_HOLD` streams held
//!   open at once (the upstream pauses after its third chunk), per stream from idle; the
//!   pass-through's too. PSS beside RSS (see `pss_kb`). RSS again right after the last
//!   scenario and `BENCH_PROXY_IDLE_WAIT` seconds later.
//!
//! Environment: `BENCH_PROXY_CONCURRENCY` (`1,16,64,256,512`), `BENCH_PROXY_REQUESTS` (measured
//! requests per small scenario, 3000; at least twice the concurrency), `BENCH_PROXY_LARGE_REQUESTS`
//! (per 300 KB scenario, 500), `BENCH_PROXY_PACED_REQUESTS` (per paced scenario, 300),
//! `BENCH_PROXY_PACE_US` (1000), `BENCH_PROXY_HOLD` (512), `BENCH_PROXY_ENGINES` (`native,wasm`),
//! `BENCH_PROXY_LARGE_KB` (300: the size counts the fixture's own messages twice, so it makes
//! 292 KB, the size every published run used), `BENCH_PROXY_LARGE_TOOLS` (20: the fixture's 12 tools, then
//! copies of them; fewer takes its first ones), `BENCH_PROXY_IDLE_WAIT` (seconds, 36),
//! (an engine written `wasm@/path/to/claude-bridge` runs that binary: a build before a change),
//! `BENCH_PROXY_GATEWAY_ROUNDS` (9: alternating rounds of a `+sqlite`, `+postgres` or `+config`
//! engine against its plain one, small streams, each result the median of its rounds),
//! `BENCH_PROXY_PAIRS`
//! (`native:wasm,pass:native`: `baseline:subject` engine pairs measured the same way on the
//! small, paced and large streams at 1 and 64 concurrent, CPU per request as a ratio; `pass` is
//! the pass-through floor, sent the request the bridge sends upstream) and
//! `BENCH_PROXY_PAIR_ROUNDS` (5; 0 measures no pairs, as `BENCH_PROXY_GATEWAY_ROUNDS=0` no
//! gateway rounds). Writes `tests/bench/results/proxy-<UTC time>.json`.

#![expect(clippy::print_stdout, reason = "a measurement tool prints its results")]

use std::convert::Infallible;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bridge_tests::chunks::{ChatStream, fold_stream};
use bridge_tests::{Result, err, http};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The upstream pauses held streams after this many chunks (role + two text chunks).
const HOLD_AFTER: usize = 3;

type Body = BoxBody<Bytes, Infallible>;
type Sender = SendRequest<Full<Bytes>>;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether a Chat Completions request body asks for a stream (a byte scan: the upstream must
/// stay cheap; inside a JSON string the quotes would be escaped, so this cannot match there).
fn wants_stream(body: &[u8]) -> bool {
    contains(body, b"\"stream\":true") || contains(body, b"\"stream\": true")
}

// ---------------------------------------------------------------------------------------------
// The scripted upstream.

struct Upstream {
    stream_parts: Arc<[Bytes]>,
    /// The gap between two chunks of a stream, in µs (0: none, each chunk written as soon as
    /// the previous one was taken): the paced scenario's model generating tokens one by one.
    pace_us: std::sync::atomic::AtomicU64,
    json_answer: Bytes,
    paused: AtomicBool,
    release: watch::Sender<bool>,
    capturing: AtomicBool,
    captured: Mutex<Option<Bytes>>,
}

async fn serve_upstream(up: Arc<Upstream>) -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let up = Arc::clone(&up);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| answer(Arc::clone(&up), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn answer(
    up: Arc<Upstream>,
    req: Request<Incoming>,
) -> std::result::Result<Response<Body>, Infallible> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    if up.capturing.load(Ordering::Relaxed)
        && let Ok(mut c) = up.captured.lock()
    {
        *c = Some(body.clone());
    }
    let response = if wants_stream(&body) {
        let parts = Arc::clone(&up.stream_parts);
        let hold = up
            .paused
            .load(Ordering::Relaxed)
            .then(|| up.release.subscribe());
        let pace = Duration::from_micros(up.pace_us.load(Ordering::Relaxed));
        let frames = futures_util::stream::unfold((0usize, hold), move |(i, mut hold)| {
            let parts = Arc::clone(&parts);
            async move {
                match hold.as_mut() {
                    Some(rx) if i == HOLD_AFTER => {
                        let _ = rx.wait_for(|released| *released).await;
                    }
                    // Paced: a gap before every chunk after the first.
                    _ if i > 0 && !pace.is_zero() => tokio::time::sleep(pace).await,
                    // Pending once between chunks: hyper writes each chunk on its own.
                    _ if i > 0 => tokio::task::yield_now().await,
                    _ => {}
                }
                let part = parts.get(i)?.clone();
                Some((Ok::<_, Infallible>(Frame::data(part)), (i + 1, hold)))
            }
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(StreamBody::new(frames).boxed())
    } else {
        Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(up.json_answer.clone()).boxed())
    };
    Ok(response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())))
}

// ---------------------------------------------------------------------------------------------
// The pass-through floor: the least any proxy on this stack costs.

/// `bench-proxy --pass-through PORT UPSTREAM`: a proxy that translates nothing. It reads the whole
/// request body (as any translating proxy must), forwards it to `UPSTREAM` with the bridge's
/// HTTP client (hyper-util's pooled client, `TCP_NODELAY`) on the bridge's runtime (tokio's
/// multi-thread default), and streams the answer back byte for byte. Pinned like the bridge, its
/// overhead against direct is the floor: the hop, the wake-ups and the syscalls that no
/// translation saving can remove.
fn pass_through(port: u16, upstream: SocketAddr) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = TcpListener::bind(("127.0.0.1", port)).await?;
            let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
            connector.set_nodelay(true);
            let client =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build::<_, Full<Bytes>>(connector);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let client = client.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let client = client.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.map(|b| b.to_bytes());
                            let mut out = Request::new(Full::new(body.unwrap_or_default()));
                            *out.method_mut() = parts.method;
                            *out.headers_mut() = parts.headers;
                            let answer = match format!("http://{upstream}{}", parts.uri).parse() {
                                Ok(uri) => {
                                    *out.uri_mut() = uri;
                                    client.request(out).await.ok()
                                }
                                Err(_) => None,
                            };
                            Ok::<_, Infallible>(answer.map_or_else(
                                || {
                                    let mut bad = Response::new(
                                        Full::new(Bytes::new())
                                            .map_err(|never| match never {})
                                            .boxed(),
                                    );
                                    *bad.status_mut() = hyper::StatusCode::BAD_GATEWAY;
                                    bad
                                },
                                |a| a.map(http_body_util::BodyExt::boxed),
                            ))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        })
}

// ---------------------------------------------------------------------------------------------
// The bridge process.

struct BridgeProc {
    child: Child,
    addr: SocketAddr,
    engine: String,
}

impl Drop for BridgeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command running `program`, under `taskset -c 0` when `pinned`.
fn on_core_0(program: &Path, pinned: bool) -> Command {
    if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// The pass-through floor (see [`pass_through`]), pinned like the bridge.
async fn start_pass_through(upstream: SocketAddr, pinned: bool) -> Result<BridgeProc> {
    let port = free_port()?;
    let exe = std::env::current_exe()?;
    let mut child = on_core_0(&exe, pinned)
        .args(["--pass-through", &port.to_string(), &upstream.to_string()])
        .env_remove("BENCH_PROXY_PINNED")
        .stdin(Stdio::null())
        .spawn()?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).await.is_err() {
        if let Some(status) = child.try_wait()? {
            return Err(err(format!(
                "the pass-through exited at start with {status}"
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err("the pass-through did not listen in 10 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(BridgeProc {
        child,
        addr,
        engine: String::from("pass"),
    })
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Records per second the store takes in the ledger writer's batches (100,000 records).
async fn ledger_rate(url: &str) -> Result<f64> {
    use claude_bridge::gateway::ledger::{Entry, Record};
    use claude_bridge::gateway::store::Store;
    let store = Store::open(url, Duration::from_secs(10))?;
    store.migrate().await?;
    let run = std::process::id();
    let records: Vec<Record> = (0..100_000)
        .map(|i| Record {
            id: format!("bench-{run}-{i}"),
            at_ms: 1_795_000_000_000 + i,
            key: format!("key{}", i % 20),
            client: "claude-code".into(),
            session: Some(format!("session-{}", i % 300)),
            front: "messages".into(),
            route: "default".into(),
            target: "up,m".into(),
            model: "claude-sonnet-4-6".into(),
            upstream_model: "m".into(),
            input_tokens: 1200 + i % 100,
            output_tokens: 80,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            estimated: false,
            cost_usd: 0.0014,
            priced: true,
            ttft_ms: Some(40),
            duration_ms: 900,
            status: 200,
            error_kind: None,
            attempts: 1,
            paid: None,
            paid_unit: None,
            replica: String::from("bench"),
            settles: Vec::new(),
        })
        .collect();
    // Each record is made into its row when it is queued (the ledger's `record`), counted here.
    let count = records.len();
    let mut records = records.into_iter();
    let started = Instant::now();
    loop {
        let batch = records
            .by_ref()
            .take(5_000)
            .map(Entry::new)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if batch.is_empty() {
            break;
        }
        store.write(&batch).await?;
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    store.close().await;
    Ok(rate)
}

/// A gateway config for the bench: the client's `sk-client` is a key with every limit (set far
/// above what the bench sends, so each request goes through the limiter), prices, and `url`'s
/// store. An empty `url`: the same config with neither store nor keys (the gateway off).
fn gateway_config(upstream: SocketAddr, url: &str) -> String {
    let config = format!(
        r#"[providers.up]
kind = "openai"
base_url = "http://{upstream}/v1"
api_key = "sk-bench"

[providers.up.prices]
input = 1.0
output = 2.0

[router]
default = "up,m"
"#
    );
    if url.is_empty() {
        return config;
    }
    format!(
        r#"[store]
url = "{url}"

{config}
[[keys]]
name = "bench"
key = "sk-client"
rpm = 100000000
tpm = 1000000000000
max_parallel = 100000
budget_usd = 1000000000.0
budget_period = "day"
"#
    )
}

async fn start_bridge(
    upstream: SocketAddr,
    engine: &str,
    pinned: bool,
    gateway: Option<&Path>,
) -> Result<BridgeProc> {
    // `wasm@/path/to/claude-bridge`: that engine of another binary (the build before a
    // change, measured in the same run).
    let (spec, bin) = match engine.split_once('@') {
        Some((spec, bin)) => (spec, PathBuf::from(bin)),
        None => (engine, bridge_tests::bridge::binary_path()?),
    };
    let port = free_port()?;
    let log_path = std::env::temp_dir().join(format!(
        "bench-proxy-{}-{}.log",
        engine.replace(['+', '@', '/'], "-"),
        std::process::id()
    ));
    let log = File::create(&log_path)?;
    let mut cmd = on_core_0(&bin, pinned);
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
    // `native+sqlite`, `native+postgres`: the gateway on (a key with limits, prices, the
    // ledger, a store), from a config file; `native+config`: that file without the gateway.
    // The engine is the part before `+`.
    let (engine_name, _) = spec.split_once('+').unwrap_or((spec, ""));
    match gateway {
        Some(config) => {
            cmd.arg("--config")
                .arg(config)
                .env("XDG_STATE_HOME", config.with_extension("state"));
        }
        None => {
            cmd.args(["--provider", "openai", "--base-url"])
                .arg(format!("http://{upstream}/v1"))
                .args(["--model", "m", "--api-key", "sk-bench"]);
        }
    }
    cmd.args(["--no-upstream-check", "--engine", engine_name])
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    // The bridge runs with its defaults; only the profiling aid passes through.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CLAUDE_BRIDGE_") && k != "CLAUDE_BRIDGE_WASM_PERFMAP" {
            cmd.env_remove(&k);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| err(format!("cannot start {}: {e}", bin.display())))?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!("http://{addr}/health");
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(err(format!(
                "claude-bridge --engine {engine} exited at start with {status}; log {}",
                log_path.display()
            )));
        }
        if let Ok(r) = http::send("GET", &url, &[], None, Duration::from_secs(2)).await
            && r.status == 200
        {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(format!(
                "claude-bridge --engine {engine} not healthy in 60 s; log {}",
                log_path.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(BridgeProc {
        child,
        addr,
        engine: engine.to_owned(),
    })
}

/// A bridge as the load generator sees it: the Messages API, a streamed answer.
fn bridge_target(b: &BridgeProc) -> Arc<Target> {
    Arc::new(Target {
        name: b.engine.clone(),
        addr: b.addr,
        path: "/v1/messages?beta=true",
        headers: vec![
            ("anthropic-version", "2023-06-01"),
            ("x-api-key", "sk-client"),
        ],
        content: b"\"text_delta\"",
        end: b"message_stop",
    })
}

/// Two bridges measured on one scenario in alternating rounds (the baseline first, then the
/// subject first, …), so that drift in the machine's speed falls on both; each figure is the
/// median of its rounds (CPU in ms per request: CPU-seconds per 1000 requests).
struct Paired {
    ttft_delta: f64,
    ttft_deltas: Vec<f64>,
    rate_ratio: f64,
    rate_ratios: String,
    cpu_delta: f64,
    cpu_ratio: f64,
    cpu_ratios: String,
    base_cpu: f64,
    subject_cpu: f64,
}

/// One side of a [`Paired`] measurement: a process, how it is asked, and what it is sent (a
/// bridge gets the client's request; the pass-through floor the one the bridge sends upstream).
struct Side<'a> {
    proc: &'a BridgeProc,
    target: Arc<Target>,
    body: Bytes,
}

impl<'a> Side<'a> {
    /// A bridge, sent the client's `body`.
    fn bridge(proc: &'a BridgeProc, body: &Bytes) -> Self {
        Self {
            proc,
            target: bridge_target(proc),
            body: body.clone(),
        }
    }

    /// The pass-through floor, sent what the bridge sends upstream (`upstream_body`).
    fn floor(proc: &'a BridgeProc, pass: &Arc<Target>, upstream_body: &Bytes) -> Self {
        Self {
            proc,
            target: Arc::clone(pass),
            body: upstream_body.clone(),
        }
    }
}

impl Paired {
    async fn measure(
        sc: &Scenario<'_>,
        [base, subject]: [&Side<'_>; 2],
        rounds: usize,
        tck: f64,
    ) -> Result<Self> {
        let (mut ttft, mut rate, mut cpu_delta, mut cpu_ratio, mut base_cpu, mut subject_cpu) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for round in 0..rounds.max(1) {
            let mut order = [base, subject];
            if round % 2 == 1 {
                order.reverse();
            }
            let mut results = Vec::new();
            for side in order {
                let r = run(
                    sc,
                    &side.target,
                    &side.body,
                    true,
                    Some(side.proc.child.id()),
                    tck,
                )
                .await?;
                results.push((side.proc.engine.clone(), r));
            }
            let of = |side: &Side<'_>, field: &str| {
                results
                    .iter()
                    .find(|(e, _)| *e == side.proc.engine)
                    .and_then(|(_, r)| r[field].as_f64())
                    .unwrap_or(f64::NAN)
            };
            ttft.push(of(subject, "ttft_p50_ms") - of(base, "ttft_p50_ms"));
            rate.push(of(subject, "per_s") / of(base, "per_s"));
            let (b, s) = (
                of(base, "bridge_cpu_s_per_1000"),
                of(subject, "bridge_cpu_s_per_1000"),
            );
            cpu_delta.push(s - b);
            cpu_ratio.push(s / b);
            base_cpu.push(b);
            subject_cpu.push(s);
        }
        let median = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            percentile(&v, 0.5)
        };
        let list = |v: &[f64]| {
            v.iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Ok(Self {
            ttft_delta: median(&ttft),
            rate_ratio: median(&rate),
            rate_ratios: list(&rate),
            cpu_delta: median(&cpu_delta),
            cpu_ratio: median(&cpu_ratio),
            cpu_ratios: list(&cpu_ratio),
            base_cpu: median(&base_cpu),
            subject_cpu: median(&subject_cpu),
            ttft_deltas: ttft,
        })
    }
}

/// What a process has run so far: each thread's time on a CPU in nanoseconds where the
/// kernel shows it (`se.sum_exec_runtime` in `/proc/<pid>/task/<tid>/sched`), and utime + stime
/// in clock ticks (`/proc/<pid>/stat`, 10 ms each: a scenario of 200 requests at 0.6 ms each
/// is 12 ticks, so a tick more or less moved its CPU per request by 8%).
struct CpuSample {
    threads: Option<std::collections::HashMap<String, u64>>,
    ticks: Option<u64>,
}

impl CpuSample {
    fn take(pid: &str) -> Self {
        Self {
            threads: thread_cpu_ns(pid),
            ticks: cpu_ticks(pid),
        }
    }

    /// Seconds run from `self` to `later`: by threads when both have them (a thread that ended
    /// between the two loses its time since `self`; one that began counts from zero), else by
    /// ticks.
    fn seconds_until(&self, later: &Self, tck: f64) -> Option<f64> {
        if let (Some(before), Some(after)) = (&self.threads, &later.threads) {
            let ns: u64 = after
                .iter()
                .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
                .sum();
            return Some(ns as f64 / 1e9);
        }
        Some(later.ticks?.saturating_sub(self.ticks?) as f64 / tck)
    }
}

/// Each thread's `se.sum_exec_runtime` (milliseconds with six decimals), in nanoseconds; `None`
/// where the kernel has no such files (no `CONFIG_SCHED_DEBUG`).
fn thread_cpu_ns(pid: &str) -> Option<std::collections::HashMap<String, u64>> {
    let mut threads = std::collections::HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let task = task.ok()?;
        // A thread that ended since the directory was read is skipped.
        let Ok(sched) = std::fs::read_to_string(task.path().join("sched")) else {
            continue;
        };
        let ms = sched
            .lines()
            .find_map(|l| l.strip_prefix("se.sum_exec_runtime"))?
            .trim_start_matches([' ', ':'])
            .trim();
        let (whole, fraction) = ms.split_once('.').unwrap_or((ms, "0"));
        let fraction = format!("{fraction:0<6}");
        let ns = whole.parse::<u64>().ok()? * 1_000_000 + fraction.get(..6)?.parse::<u64>().ok()?;
        threads.insert(task.file_name().to_string_lossy().into_owned(), ns);
    }
    Some(threads)
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `<key> <n> kB` line of a `/proc` file.
fn proc_kb(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `Pss` of `/proc/<pid>/smaps_rollup`: resident memory with each page shared by several
/// mappings or processes counted once in all. Beside RSS because the wasm engine maps its
/// core's data image copy-on-write into every instance, and RSS counts those shared pages
/// once per instance.
fn pss_kb(pid: u32) -> Option<u64> {
    proc_kb(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
}

fn rss_kb(pid: u32) -> Option<u64> {
    proc_kb(&format!("/proc/{pid}/status"), "VmRSS:")
}

fn clock_ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

// ---------------------------------------------------------------------------------------------
// The load generator.

/// Where requests go and how a good answer looks.
#[derive(Clone)]
struct Target {
    name: String,
    addr: SocketAddr,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    /// The first content of a streamed answer.
    content: &'static [u8],
    /// The end of a complete streamed answer.
    end: &'static [u8],
}

#[derive(Clone, Copy)]
struct Shot {
    ttft: Duration,
    total: Duration,
    ok: bool,
}

async fn connect(addr: SocketAddr) -> Result<Sender> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Whether `needle` is in `data`, or straddles the end of `tail` and the start of `data`.
fn seen(tail: &[u8], data: &[u8], needle: &[u8]) -> bool {
    if contains(data, needle) {
        return true;
    }
    let mut joined = tail.to_vec();
    joined.extend_from_slice(&data[..data.len().min(needle.len())]);
    contains(&joined, needle)
}

/// A `POST` of `body` to `target`, with the target's headers (the gateway's key among them).
fn request(target: &Target, body: &Bytes) -> hyper::http::Result<Request<Full<Bytes>>> {
    let mut req = Request::post(target.path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json");
    for (k, v) in &target.headers {
        req = req.header(*k, *v);
    }
    req.body(Full::new(body.clone()))
}

async fn one(sender: &mut Sender, target: &Target, body: &Bytes, streaming: bool) -> Shot {
    let started = Instant::now();
    let failed = |started: Instant| Shot {
        ttft: started.elapsed(),
        total: started.elapsed(),
        ok: false,
    };
    let Ok(req) = request(target, body) else {
        return failed(started);
    };
    if sender.ready().await.is_err() {
        return failed(started);
    }
    let Ok(resp) = sender.send_request(req).await else {
        return failed(started);
    };
    let status_ok = resp.status() == 200;
    let mut body = resp.into_body();
    let mut ttft = None;
    let mut tail: Vec<u8> = Vec::with_capacity(128);
    let mut body_ok = true;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            body_ok = false;
            break;
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        if ttft.is_none() && (!streaming || seen(&tail, data, target.content)) {
            ttft = Some(started.elapsed());
        }
        if data.len() >= 64 {
            tail.clear();
            tail.extend_from_slice(&data[data.len() - 64..]);
        } else {
            tail.extend_from_slice(data);
            let excess = tail.len().saturating_sub(64);
            tail.drain(..excess);
        }
    }
    let total = started.elapsed();
    let complete = if streaming {
        contains(&tail, target.end)
    } else {
        tail.trim_ascii_end().ends_with(b"}")
    };
    Shot {
        ttft: ttft.unwrap_or(total),
        total,
        ok: status_ok && body_ok && complete && ttft.is_some(),
    }
}

/// Run `total` requests over the workers' connections; returns them, the shots and the wall time.
async fn pass(
    senders: Vec<Sender>,
    target: &Arc<Target>,
    body: &Bytes,
    streaming: bool,
    total: usize,
) -> (Vec<Sender>, Vec<Shot>, Duration) {
    let remaining = Arc::new(AtomicUsize::new(total));
    let started = Instant::now();
    let tasks: Vec<_> = senders
        .into_iter()
        .map(|mut sender| {
            let (remaining, target, body) =
                (Arc::clone(&remaining), Arc::clone(target), body.clone());
            tokio::spawn(async move {
                let mut shots = Vec::new();
                while remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| r.checked_sub(1))
                    .is_ok()
                {
                    if sender.is_closed()
                        && let Ok(s) = connect(target.addr).await
                    {
                        sender = s;
                    }
                    shots.push(one(&mut sender, &target, &body, streaming).await);
                }
                (sender, shots)
            })
        })
        .collect();
    let mut senders = Vec::new();
    let mut shots = Vec::with_capacity(total);
    for task in tasks {
        if let Ok((s, mut sh)) = task.await {
            senders.push(s);
            shots.append(&mut sh);
        }
    }
    (senders, shots, started.elapsed())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Scenario<'a> {
    streaming: bool,
    size: &'a str,
    concurrency: usize,
    requests: usize,
}

/// One scenario against one target: connect, warm each connection, measure.
async fn run(
    sc: &Scenario<'_>,
    target: &Arc<Target>,
    body: &Bytes,
    streaming_answer: bool,
    bridge_pid: Option<u32>,
    tck: f64,
) -> Result<Value> {
    let mut senders = Vec::with_capacity(sc.concurrency);
    for _ in 0..sc.concurrency {
        senders.push(connect(target.addr).await?);
    }
    let (senders, _, _) = pass(senders, target, body, streaming_answer, sc.concurrency).await;
    let pid = bridge_pid.map(|p| p.to_string());
    let bridge0 = pid.as_deref().map(CpuSample::take);
    let self0 = CpuSample::take("self");
    let (senders, shots, wall) = pass(senders, target, body, streaming_answer, sc.requests).await;
    let bridge1 = pid.as_deref().map(CpuSample::take);
    let self1 = CpuSample::take("self");
    drop(senders);
    let good: Vec<&Shot> = shots.iter().filter(|s| s.ok).collect();
    let mut ttft: Vec<f64> = good.iter().map(|s| ms(s.ttft)).collect();
    let mut total: Vec<f64> = good.iter().map(|s| ms(s.total)).collect();
    ttft.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    let wall_s = wall.as_secs_f64();
    let bridge_cpu_s = match (bridge0, bridge1) {
        (Some(a), Some(b)) => a.seconds_until(&b, tck),
        _ => None,
    };
    let self_cpu_s = self0.seconds_until(&self1, tck);
    Ok(json!({
        "mode": if sc.streaming { "stream" } else { "json" },
        "size": sc.size,
        "request_bytes": body.len(),
        "concurrency": sc.concurrency,
        "target": target.name,
        "requests": shots.len(),
        "ok": good.len(),
        "failed": shots.len() - good.len(),
        "wall_s": wall_s,
        "ttft_p50_ms": percentile(&ttft, 0.5),
        "ttft_p99_ms": percentile(&ttft, 0.99),
        "total_p50_ms": percentile(&total, 0.5),
        "total_p99_ms": percentile(&total, 0.99),
        "per_s": good.len() as f64 / wall_s,
        "bridge_cpu_s": bridge_cpu_s,
        "bridge_cpu_s_per_1000": bridge_cpu_s.map(|c| c * 1000.0 / shots.len().max(1) as f64),
        "generator_cpu_util": self_cpu_s.map(|c| c / wall_s),
    }))
}

/// Hold `n` streams open through the bridge (the upstream pauses after its third chunk) and
/// read the bridge's memory; returns (RSS and PSS in kB with the streams open, streams that got
/// content).
async fn hold_streams(
    up: &Arc<Upstream>,
    target: &Arc<Target>,
    body: &Bytes,
    pid: u32,
    n: usize,
) -> Result<(u64, u64, usize)> {
    up.release.send_replace(false);
    up.paused.store(true, Ordering::Relaxed);
    let open = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let mut sender = connect(target.addr).await?;
        let (open, target, body) = (Arc::clone(&open), Arc::clone(target), body.clone());
        tasks.push(tokio::spawn(async move {
            // With the target's headers: a gateway bridge refuses a stream without its key.
            let Ok(req) = request(&target, &body) else {
                return;
            };
            let Ok(resp) = sender.send_request(req).await else {
                return;
            };
            let mut body = resp.into_body();
            let mut counted = false;
            while let Some(Ok(frame)) = body.frame().await {
                if !counted
                    && frame
                        .data_ref()
                        .is_some_and(|d| contains(d, target.content))
                {
                    counted = true;
                    open.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while open.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = rss_kb(pid).unwrap_or(0);
    let pss = pss_kb(pid).unwrap_or(0);
    let opened = open.load(Ordering::Relaxed);
    up.paused.store(false, Ordering::Relaxed);
    up.release.send_replace(true);
    for t in tasks {
        let _ = t.await;
    }
    Ok((rss, pss, opened))
}

// ---------------------------------------------------------------------------------------------
// Requests.

fn small_request(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": stream,
           "messages": [{"role": "user", "content": "Say something."}]})
}

/// The captured Claude Code request, 20 tools, its history grown to about `bytes` bytes with
/// turns of text + tool call + a 4 KB tool result (source lines), as Claude Code resends it.
fn claude_code_request(bytes: usize, tool_count: usize, stream: bool) -> Result<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude_code_tool_round_trip/request.json");
    let mut req: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let tools = req["tools"]
        .as_array()
        .cloned()
        .ok_or_else(|| err("fixture request has no tools"))?;
    let mut all_tools: Vec<Value> = tools.iter().take(tool_count).cloned().collect();
    let mut i = 0;
    while all_tools.len() < tool_count {
        let mut t = tools
            .get(i % tools.len())
            .cloned()
            .ok_or_else(|| err("no tools"))?;
        let name = t["name"].as_str().unwrap_or("tool").to_owned();
        t["name"] = json!(format!("mcp__project__{name}_{i}"));
        all_tools.push(t);
        i += 1;
    }
    req["tools"] = Value::Array(all_tools);
    let mut messages = req["messages"]
        .as_array()
        .cloned()
        .ok_or_else(|| err("fixture request has no messages"))?;
    // The fixture ends with the user's tool result; the grown history goes on from there.
    // (The size below counts the fixture's messages twice, in `req` and in `messages`: kept, so
    // the default still makes the 292 KB request every published run used.)
    let file: String = (0..80)
        .map(|l| {
            format!("    let value_{l:03} = compute(input, {l}); // line {l:03} of the file\n")
        })
        .collect();
    let mut turn = 0;
    while req.to_string().len() + messages.iter().map(|m| m.to_string().len()).sum::<usize>()
        < bytes
    {
        let id = format!("toolu_bench_{turn:04}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Let me read src/module_{turn}.rs next.")},
            {"type": "tool_use", "id": id, "name": "Read",
             "input": {"file_path": format!("/home/user/project/src/module_{turn}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file}]}));
        turn += 1;
    }
    messages.push(json!({"role": "user", "content": [
        {"type": "text", "text": "Now summarise what these modules do."}]}));
    req["messages"] = Value::Array(messages);
    req["stream"] = json!(stream);
    Ok(req)
}

// ---------------------------------------------------------------------------------------------

fn write_result(result: &Value) -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&dir)?;
    let stamp = utc("+%Y%m%dT%H%M%SZ");
    let path = dir.join(format!("proxy-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(result)? + "\n")?;
    Ok(path)
}

fn utc(format: &str) -> String {
    Command::new("date")
        .args(["-u", format])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| String::from("unknown"))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| String::from("unknown"))
}

fn fmt_ms(v: &Value) -> String {
    v.as_f64()
        .filter(|f| f.is_finite())
        .map_or_else(|| String::from("-"), |f| format!("{f:.3}"))
}

fn row(r: &Value, direct: Option<&Value>) -> String {
    let overhead = direct
        .and_then(|d| Some(r["ttft_p50_ms"].as_f64()? - d["ttft_p50_ms"].as_f64()?))
        .filter(|_| r["target"] != "direct")
        .map_or_else(|| String::from("-"), |o| format!("{o:+.3}"));
    let ratio = direct
        .and_then(|d| Some(r["per_s"].as_f64()? / d["per_s"].as_f64()?))
        .filter(|_| r["target"] != "direct")
        .map_or_else(|| String::from("-"), |x| format!("{x:.2}"));
    let cpu = r["bridge_cpu_s_per_1000"]
        .as_f64()
        .map_or_else(|| String::from("-"), |c| format!("{c:.3}"));
    let gen_cpu = r["generator_cpu_util"]
        .as_f64()
        .map_or_else(|| String::from("-"), |c| format!("{:.0}%", c * 100.0));
    format!(
        "| {:<6} | {:<5} | {:>4} | {:<6} | {:>5}/{:<5} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8.0} | {:>5} | {:>8} | {:>7} | {:>4} |",
        r["mode"].as_str().unwrap_or(""),
        r["size"].as_str().unwrap_or(""),
        r["concurrency"].as_u64().unwrap_or(0),
        r["target"].as_str().unwrap_or(""),
        r["ok"].as_u64().unwrap_or(0),
        r["requests"].as_u64().unwrap_or(0),
        fmt_ms(&r["ttft_p50_ms"]),
        fmt_ms(&r["ttft_p99_ms"]),
        fmt_ms(&r["total_p50_ms"]),
        fmt_ms(&r["total_p99_ms"]),
        r["per_s"].as_f64().unwrap_or(0.0),
        ratio,
        overhead,
        cpu,
        gen_cpu,
    )
}

const HEADER: &str = "| mode   | size  | conc | target |  ok/reqs    | TTFT p50 | TTFT p99 | tot p50  | tot p99  |    req/s | ×dir  | TTFT ovh | CPU s/1k | gen  |\n|--------|-------|------|--------|-------------|----------|----------|----------|----------|----------|-------|----------|---------|------|";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, port, upstream] = args.as_slice()
        && flag == "--pass-through"
    {
        return pass_through(port.parse()?, upstream.parse()?);
    }
    let cores = std::env::var("BENCH_PROXY_CORES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let pinned = cores >= 2 && Path::new("/usr/bin/taskset").exists()
        || std::env::var_os("BENCH_PROXY_PINNED").is_some();
    if pinned && std::env::var_os("BENCH_PROXY_PINNED").is_none() {
        // Load generator and upstream on core 1; the bridge will take core 0.
        let status = Command::new("taskset")
            .args(["-c", "1"])
            .arg(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("BENCH_PROXY_PINNED", "1")
            .env("BENCH_PROXY_CORES", cores.to_string())
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(bench(cores, pinned))
}

#[expect(
    clippy::too_many_lines,
    reason = "the whole run, in the order it prints"
)]
async fn bench(cores: usize, pinned: bool) -> Result<()> {
    let concurrency: Vec<usize> = env_list("BENCH_PROXY_CONCURRENCY", "1,16,64,256,512")
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    let small_requests: usize = env_or("BENCH_PROXY_REQUESTS", 3000);
    let large_requests: usize = env_or("BENCH_PROXY_LARGE_REQUESTS", 500);
    let paced_requests: usize = env_or("BENCH_PROXY_PACED_REQUESTS", 300);
    let pace_us: u64 = env_or("BENCH_PROXY_PACE_US", 1000);
    let hold: usize = env_or("BENCH_PROXY_HOLD", 512);
    let large_kb: usize = env_or("BENCH_PROXY_LARGE_KB", 300);
    let large_tools: usize = env_or("BENCH_PROXY_LARGE_TOOLS", 20);
    let idle_wait = Duration::from_secs(env_or("BENCH_PROXY_IDLE_WAIT", 36));
    let engines = env_list("BENCH_PROXY_ENGINES", "native,wasm");
    let tck = clock_ticks_per_s();
    let date = utc("+%Y-%m-%dT%H:%M:%SZ");
    let model = cpu_model();
    println!("bench-proxy: {date}, {model}, {cores} cores");
    if pinned {
        println!("  bridge pinned to core 0 (taskset -c 0); load generator + upstream on core 1");
    } else {
        println!(
            "  NOT pinned: {cores} core(s) (or no taskset) — bridge, generator and upstream share the machine"
        );
    }

    // The upstream's answers.
    let stream_parts = bridge_tests::bench_stream::small_stream_parts();
    let short = ChatStream::new()
        .role()
        .text("w Short answer.")
        .usage(12, 4, 0)
        .finish("stop")
        .sse_parts();
    let (release, _) = watch::channel(false);
    let up = Arc::new(Upstream {
        stream_parts: stream_parts.into(),
        pace_us: std::sync::atomic::AtomicU64::new(0),
        json_answer: Bytes::from(fold_stream(&short).to_string()),
        paused: AtomicBool::new(false),
        release,
        capturing: AtomicBool::new(false),
        captured: Mutex::new(None),
    });
    let up_addr = serve_upstream(Arc::clone(&up)).await?;

    // A PostgreSQL of its own for `+postgres` (a real server, as the replicas e2e test runs).
    let postgres = if engines.iter().any(|e| e.ends_with("+postgres")) {
        Some(bridge_tests::servers::Postgres::start()?)
    } else {
        None
    };
    let configs = bridge_tests::tempdir::TempDir::new("bench-gateway")?;
    let mut bridges = Vec::new();
    for engine in &engines {
        let gateway = match engine.split_once('+') {
            Some((_, store)) => {
                let url = match (store, &postgres) {
                    // The same config without `[store]` and `[[keys]]`: the gateway off, so
                    // what a config-started bridge costs is told apart from the gateway's.
                    ("config", _) => String::new(),
                    // In a directory of its own, as the default (the XDG state directory, not
                    // the config's): the config watcher sees every write in the config's.
                    ("sqlite", _) => format!(
                        "sqlite://{}",
                        configs.path().join("state/gateway.db").display()
                    ),
                    ("postgres", Some(pg)) => pg.url(),
                    _ => {
                        return Err(err(format!(
                            "unknown store in engine `{engine}`: sqlite or postgres"
                        )));
                    }
                };
                let file = configs
                    .path()
                    .join(format!("{}.toml", engine.replace('+', "-")));
                std::fs::write(&file, gateway_config(up_addr, &url))?;
                Some(file)
            }
            None => None,
        };
        bridges.push(start_bridge(up_addr, engine, pinned, gateway.as_deref()).await?);
    }
    let floor = start_pass_through(up_addr, pinned).await?;
    let direct = Arc::new(Target {
        name: "direct".into(),
        addr: up_addr,
        path: "/v1/chat/completions",
        headers: vec![("authorization", "Bearer sk-bench")],
        content: b"\"content\":\"w",
        end: b"[DONE]",
    });
    let pass = Arc::new(Target {
        name: floor.engine.clone(),
        addr: floor.addr,
        ..Target::clone(&direct)
    });

    // Client bodies, and what the bridge sends upstream for each (the direct baseline's bodies).
    let mut bodies = Vec::new();
    for (size, streaming) in [
        ("small", true),
        ("small", false),
        ("300KB", true),
        ("300KB", false),
        ("paced", true),
    ] {
        let client = if size == "small" || size == "paced" {
            small_request(streaming)
        } else {
            claude_code_request(large_kb * 1000, large_tools, streaming)?
        };
        let client = Bytes::from(client.to_string());
        let first = bridges
            .first()
            .ok_or_else(|| err("BENCH_PROXY_ENGINES is empty"))?;
        up.capturing.store(true, Ordering::Relaxed);
        let mut sender = connect(first.addr).await?;
        let shot = one(&mut sender, &bridge_target(first), &client, streaming).await;
        up.capturing.store(false, Ordering::Relaxed);
        let upstream_body = up
            .captured
            .lock()
            .ok()
            .and_then(|mut c| c.take())
            .ok_or_else(|| err("the bridge sent nothing upstream"))?;
        if !shot.ok {
            return Err(err(format!(
                "a {size} request (stream {streaming}) through the bridge failed"
            )));
        }
        let upstream_streams = wants_stream(&upstream_body);
        println!(
            "  {size:<5} stream={streaming:<5}: client body {} B, upstream body {} B (upstream stream={upstream_streams})",
            client.len(),
            upstream_body.len()
        );
        // The other bridges convert the same request once too, so that every bridge's idle
        // memory below is read after the same four requests.
        for other in bridges.iter().skip(1) {
            let mut sender = connect(other.addr).await?;
            if !one(&mut sender, &bridge_target(other), &client, streaming)
                .await
                .ok
            {
                return Err(err(format!(
                    "a {size} request (stream {streaming}) through the {} bridge failed",
                    other.engine
                )));
            }
        }
        bodies.push((size, streaming, client, upstream_body, upstream_streams));
    }

    // Memory: right after the four requests above, and idle (`idle_wait` later, every bridge
    // left alone: the wasm engine drops instances unused for 30 s), then with `hold` streams
    // open. Per open stream counts from idle, as the issue's table does.
    let mut memory = serde_json::Map::new();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_requests: Vec<u64> = bridges
        .iter()
        .chain([&floor])
        .map(|b| rss_kb(b.child.id()).unwrap_or(0))
        .collect();
    tokio::time::sleep(idle_wait).await;
    let small_stream = bodies
        .first()
        .map(|b| b.2.clone())
        .ok_or_else(|| err("no bodies"))?;
    let small_upstream = bodies
        .first()
        .map(|b| b.3.clone())
        .ok_or_else(|| err("no bodies"))?;
    let held = bridges
        .iter()
        .map(|b| (b, bridge_target(b), &small_stream))
        .chain([(&floor, Arc::clone(&pass), &small_upstream)]);
    let idle_now: Vec<(u64, u64)> = bridges
        .iter()
        .chain([&floor])
        .map(|b| {
            let pid = b.child.id();
            (rss_kb(pid).unwrap_or(0), pss_kb(pid).unwrap_or(0))
        })
        .collect();
    for (((b, target, body), warm), (idle, idle_pss)) in held.zip(after_requests).zip(idle_now) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pid = b.child.id();
        let (open_kb, open_pss, opened) = hold_streams(&up, &target, body, pid, hold).await?;
        let per_stream =
            |open: u64, idle: u64| open.saturating_sub(idle) as f64 / opened.max(1) as f64;
        let (per, per_pss) = (per_stream(open_kb, idle), per_stream(open_pss, idle_pss));
        println!(
            "  RSS {:<6}: {warm} kB after the requests, idle {idle} kB {} s later; {opened}/{hold} streams open {open_kb} kB; {per:.1} kB per open stream (PSS: idle {idle_pss} kB, open {open_pss} kB, {per_pss:.1} kB per stream)",
            b.engine,
            idle_wait.as_secs()
        );
        memory.insert(
            b.engine.clone(),
            json!({"rss_after_requests_kb": warm, "idle_wait_s": idle_wait.as_secs(),
                   "rss_idle_kb": idle, "streams": hold, "streams_open": opened,
                   "rss_open_kb": open_kb, "rss_per_stream_kb": per,
                   "pss_idle_kb": idle_pss, "pss_open_kb": open_pss, "pss_per_stream_kb": per_pss}),
        );
    }

    // Measured requests per scenario of each size.
    let requests_of = |size: &str| match size {
        "small" => small_requests,
        "paced" => paced_requests,
        _ => large_requests,
    };
    // Paced: the upstream leaves `pace_us` between chunks, so every chunk reaches the bridge
    // (and its engine) on its own, as tokens do from a model generating them.
    let pace = |size: &str| {
        up.pace_us
            .store(if size == "paced" { pace_us } else { 0 }, Ordering::Relaxed);
    };

    println!("\n{HEADER}");
    let mut rows = Vec::new();
    for (size, streaming, client, upstream_body, upstream_streams) in &bodies {
        pace(size);
        for &conc in &concurrency {
            let sc = Scenario {
                streaming: *streaming,
                size,
                concurrency: conc,
                requests: requests_of(size).max(2 * conc),
            };
            let d = run(&sc, &direct, upstream_body, *upstream_streams, None, tck).await?;
            println!("{}", row(&d, None));
            rows.push(d.clone());
            // The floor gets what direct gets; the bridges get the client's request.
            let measured = [(&floor, Arc::clone(&pass), upstream_body, *upstream_streams)]
                .into_iter()
                .chain(
                    bridges
                        .iter()
                        .map(|b| (b, bridge_target(b), client, *streaming)),
                );
            for (process, target, body, streams) in measured {
                let r = run(&sc, &target, body, streams, Some(process.child.id()), tck).await?;
                println!("{}", row(&r, Some(&d)));
                rows.push(r);
            }
        }
    }
    up.pace_us.store(0, Ordering::Relaxed);
    for b in bridges.iter().chain([&floor]) {
        if let Some(m) = memory.get_mut(&b.engine) {
            m["rss_after_load_kb"] = json!(rss_kb(b.child.id()).unwrap_or(0));
        }
    }
    // And once left alone again: what the heaviest scenarios leave behind.
    tokio::time::sleep(idle_wait).await;
    println!();
    for b in bridges.iter().chain([&floor]) {
        if let Some(m) = memory.get_mut(&b.engine) {
            let idle = rss_kb(b.child.id()).unwrap_or(0);
            m["rss_after_load_idle_kb"] = json!(idle);
            println!(
                "  RSS {:<6}: {} kB right after the last scenario, {idle} kB {} s later",
                b.engine,
                m["rss_after_load_kb"],
                idle_wait.as_secs()
            );
        }
    }

    // The gateway's cost: each `+store` bridge against the plain one of its engine, in this run.
    let mut gateway = serde_json::Map::new();
    for b in bridges.iter().filter(|b| b.engine.contains('+')) {
        let (plain, _) = b.engine.split_once('+').unwrap_or((&b.engine, ""));
        for r in rows.iter().filter(|r| r["target"] == b.engine.as_str()) {
            let Some(base) = rows.iter().find(|p| {
                p["target"] == plain
                    && p["mode"] == r["mode"]
                    && p["size"] == r["size"]
                    && p["concurrency"] == r["concurrency"]
            }) else {
                continue;
            };
            let ttft = r["ttft_p50_ms"].as_f64().unwrap_or(0.0)
                - base["ttft_p50_ms"].as_f64().unwrap_or(0.0);
            let rate = r["per_s"].as_f64().unwrap_or(0.0)
                / base["per_s"].as_f64().unwrap_or(1.0).max(1e-9);
            let label = format!(
                "{} {} {} c={}",
                b.engine,
                r["mode"].as_str().unwrap_or(""),
                r["size"].as_str().unwrap_or(""),
                r["concurrency"]
            );
            println!(
                "  gateway {label}: TTFT p50 {ttft:+.3} ms, {rate:.2}x the requests/s of {plain}"
            );
            gateway.insert(
                label,
                json!({"ttft_p50_delta_ms": ttft, "per_s_ratio": rate}),
            );
        }
    }
    // The same, measured the way the issue's targets read (small streams): in alternating
    // rounds (plain first, then the gateway first, …) so that drift in the machine's speed
    // over the run falls on both, each target's result the median of its rounds.
    let rounds: usize = env_or("BENCH_PROXY_GATEWAY_ROUNDS", 9);
    let mut paired = serde_json::Map::new();
    let body_of = |size: &str| {
        bodies
            .iter()
            .find(|b| b.0 == size && b.1)
            .map(|b| b.2.clone())
            .ok_or_else(|| err(format!("no streaming {size} body")))
    };
    let small_stream_body = body_of("small")?;
    // `BENCH_PROXY_GATEWAY_ROUNDS=0`: none.
    for b in bridges
        .iter()
        .filter(|b| rounds > 0 && b.engine.contains('+'))
    {
        let (plain_name, _) = b.engine.split_once('+').unwrap_or((&b.engine, ""));
        let Some(plain) = bridges.iter().find(|p| p.engine == plain_name) else {
            continue;
        };
        for &conc in &concurrency {
            let sc = Scenario {
                streaming: true,
                size: "small",
                concurrency: conc,
                requests: small_requests.max(2 * conc),
            };
            let sides = [
                &Side::bridge(plain, &small_stream_body),
                &Side::bridge(b, &small_stream_body),
            ];
            let pair = Paired::measure(&sc, sides, rounds, tck).await?;
            println!(
                "  gateway {} stream small c={conc}, median of {rounds} alternating rounds: TTFT p50 {:+.3} ms, {:.2}x the streams/s of {plain_name}, {:+.1} ms CPU per 1000 requests (rounds: {})",
                b.engine,
                pair.ttft_delta,
                pair.rate_ratio,
                pair.cpu_delta * 1000.0,
                pair.rate_ratios
            );
            paired.insert(
                format!("{} stream small c={conc}", b.engine),
                json!({"rounds": rounds, "ttft_p50_delta_ms": pair.ttft_delta, "per_s_ratio": pair.rate_ratio,
                       "bridge_cpu_ms_per_1000_delta": pair.cpu_delta * 1000.0,
                       "per_s_ratios": pair.rate_ratios, "ttft_p50_deltas_ms": pair.ttft_deltas}),
            );
        }
    }

    // Engine against engine (`BENCH_PROXY_PAIRS`, `baseline:subject,…`; `native:wasm` by
    // default): CPU per request and TTFT of the small, paced and large streams, one and 64 at a
    // time, in alternating rounds, each the median of its rounds (issue 34's targets).
    let mut engines_paired = serde_json::Map::new();
    let pair_rounds: usize = env_or("BENCH_PROXY_PAIR_ROUNDS", 5);
    // `BENCH_PROXY_PAIR_ROUNDS=0`: no pairs.
    let pairs = if pair_rounds == 0 {
        Vec::new()
    } else {
        env_list("BENCH_PROXY_PAIRS", "native:wasm,pass:native")
    };
    for spec in pairs {
        let Some((base_name, subject_name)) = spec.split_once(':') else {
            return Err(err(format!(
                "BENCH_PROXY_PAIRS: `{spec}` is not baseline:subject"
            )));
        };
        // `pass` is the pass-through floor, sent what the bridge sends upstream.
        let find = |name: &str| {
            if name == floor.engine {
                Some(&floor)
            } else {
                bridges.iter().find(|b| b.engine == name)
            }
        };
        let (Some(base), Some(subject)) = (find(base_name), find(subject_name)) else {
            println!(
                "  pair {spec}: both must be in BENCH_PROXY_ENGINES (or be `{}`); skipped",
                floor.engine
            );
            continue;
        };
        for size in ["small", "paced", "300KB"] {
            let Ok(body) = body_of(size) else { continue };
            let Some(upstream_body) = bodies
                .iter()
                .find(|b| b.0 == size && b.1)
                .map(|b| b.3.clone())
            else {
                continue;
            };
            let sides = [base, subject].map(|proc| {
                if proc.engine == floor.engine {
                    Side::floor(proc, &pass, &upstream_body)
                } else {
                    Side::bridge(proc, &body)
                }
            });
            pace(size);
            for conc in concurrency.iter().copied().filter(|c| [1, 64].contains(c)) {
                // A paced stream lasts ~0.1 s: one at a time, a third of the scenario's.
                let requests = match size {
                    "paced" if conc == 1 => requests_of(size) / 3,
                    _ => requests_of(size),
                };
                let sc = Scenario {
                    streaming: true,
                    size,
                    concurrency: conc,
                    requests: requests.max(2 * conc),
                };
                let pair = Paired::measure(&sc, [&sides[0], &sides[1]], pair_rounds, tck).await?;
                println!(
                    "  {subject_name} vs {base_name}, stream {size} c={conc}, median of {pair_rounds} alternating rounds: CPU per request {:.2}x ({:.3} vs {:.3} ms), TTFT p50 {:+.3} ms, {:.2}x the streams/s (CPU ratios: {})",
                    pair.cpu_ratio,
                    pair.subject_cpu,
                    pair.base_cpu,
                    pair.ttft_delta,
                    pair.rate_ratio,
                    pair.cpu_ratios
                );
                engines_paired.insert(
                    format!("{subject_name} vs {base_name} stream {size} c={conc}"),
                    json!({"rounds": pair_rounds, "cpu_ratio": pair.cpu_ratio,
                           "subject_cpu_ms_per_request": pair.subject_cpu,
                           "base_cpu_ms_per_request": pair.base_cpu,
                           "ttft_p50_delta_ms": pair.ttft_delta, "per_s_ratio": pair.rate_ratio,
                           "cpu_ratios": pair.cpu_ratios, "ttft_p50_deltas_ms": pair.ttft_deltas}),
                );
            }
        }
    }
    up.pace_us.store(0, Ordering::Relaxed);

    let mut ledger = serde_json::Map::new();
    let sqlite_url = format!(
        "sqlite://{}",
        configs.path().join("ledger-rate.db").display()
    );
    let urls = [
        ("sqlite", Some(sqlite_url)),
        ("postgres", postgres.as_ref().map(|p| p.url())),
    ];
    for (name, url) in urls {
        let Some(url) = url else { continue };
        let rate = ledger_rate(&url).await?;
        println!("  ledger writes ({name}): {rate:.0} records/s (batches of 5,000)");
        ledger.insert(name.into(), json!({"records_per_s": rate}));
    }

    let result = json!({
        "date": date,
        "gateway": gateway,
        "gateway_paired": paired,
        "engines_paired": engines_paired,
        "ledger": ledger,
        "machine": {"cpu": model, "cores": cores, "pinned": pinned},
        "config": {
            "concurrency": concurrency, "requests_small": small_requests,
            "requests_300kb": large_requests, "hold_streams": hold, "engines": engines,
            "upstream_stream_chunks": up.stream_parts.len(),
            "bodies": bodies.iter().map(|(size, streaming, client, upstream, _)| json!({
                "size": size, "stream": streaming, "client_bytes": client.len(),
                "upstream_bytes": upstream.len()})).collect::<Vec<_>>(),
        },
        "memory": memory,
        "scenarios": rows,
    });
    let path = write_result(&result)?;
    println!("\nbench-proxy: -> {}", path.display());
    Ok(())
}
