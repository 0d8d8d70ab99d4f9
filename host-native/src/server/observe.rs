//! Seeing what the bridge does: one log line per `/v1/messages` request when its answer ends,
//! and the Prometheus metrics behind `GET /metrics`.
//!
//! The relay feeds every piece of SSE it sends through a [`Tally`] (it reads only the events that
//! carry usage, the stop reason or an error, and notes the first content delta), and calls
//! [`Outcome::finish`] when the answer is over: that writes the line
//!
//! ```text
//! INFO request done id=req_… model=claude-sonnet-4-6 target=local,qwen3-coder route=default
//!      attempts=1 status=200 ttft_ms=41 ms=812 input_tokens=1200 output_tokens=85 stop=end_turn
//! ```
//!
//! and moves the metrics: requests by target and status, time to first token and duration
//! histograms, tokens in and out, fallbacks, open streams, upstream errors by kind, and each
//! target's circuit (read from the routes at scrape time).

use std::sync::OnceLock;
use std::time::Instant;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::value::RawValue;
use tracing::info;

type Labels = Vec<(&'static str, String)>;

/// A gateway key's counters, taken from their families on first use: a family's lookup makes
/// its labels (a `String` each) every time, and each request of a key that ended looked up
/// two to six of them.
#[derive(Debug, Default)]
struct KeyCounters {
    /// By status.
    requests: Vec<(u16, Counter)>,
    /// By direction: `input`, `output`, `cache_read`, `cache_write`.
    tokens: [Option<Counter>; 4],
    cost: Option<Counter<f64, std::sync::atomic::AtomicU64>>,
}

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    ttft: Family<Labels, Histogram>,
    duration: Family<Labels, Histogram>,
    tokens: Family<Labels, Counter>,
    fallbacks: Family<Labels, Counter>,
    upstream_errors: Family<Labels, Counter>,
    open_streams: Gauge,
    responses_kept: Gauge,
    responses_kept_bytes: Gauge,
    key_requests: Family<Labels, Counter>,
    key_tokens: Family<Labels, Counter>,
    key_cost: Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>,
    key_refused: Family<Labels, Counter>,
    /// Each key's counters in the `key_*` families (per key: bounded by the keys there are).
    key_counters: std::sync::Mutex<std::collections::HashMap<String, KeyCounters>>,
}

fn seconds_buckets() -> Histogram {
    // 10 ms … ~160 s.
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("claude_bridge");
        let requests = Family::<Labels, Counter>::default();
        let ttft = Family::<Labels, Histogram>::new_with_constructor(seconds_buckets as fn() -> _);
        let duration =
            Family::<Labels, Histogram>::new_with_constructor(seconds_buckets as fn() -> _);
        let tokens = Family::<Labels, Counter>::default();
        let fallbacks = Family::<Labels, Counter>::default();
        let upstream_errors = Family::<Labels, Counter>::default();
        let open_streams = Gauge::default();
        let responses_kept = Gauge::default();
        let responses_kept_bytes = Gauge::default();
        let key_requests = Family::<Labels, Counter>::default();
        let key_tokens = Family::<Labels, Counter>::default();
        let key_cost = Family::<Labels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        let key_refused = Family::<Labels, Counter>::default();
        registry.register(
            "key_requests",
            "Requests per gateway key (per key, never per session) and status",
            key_requests.clone(),
        );
        registry.register(
            "key_tokens",
            "Tokens per gateway key, by direction (input, output, cache_read, cache_write)",
            key_tokens.clone(),
        );
        registry.register(
            "key_cost_usd",
            "Cost in US dollars per gateway key (priced requests only)",
            key_cost.clone(),
        );
        registry.register(
            "key_refused",
            "Requests a gateway key's limit refused, by the limit (rpm, tpm, max_parallel, budget_usd, budget_tokens, store_down)",
            key_refused.clone(),
        );
        registry.register(
            "responses_kept",
            "/v1/responses answers kept for previous_response_id and item_reference",
            responses_kept.clone(),
        );
        registry.register(
            "responses_kept_bytes",
            "Bytes the kept /v1/responses answers count for (--responses-store-bytes bounds it)",
            responses_kept_bytes.clone(),
        );
        registry.register(
            "requests",
            "Messages requests answered, by target and status",
            requests.clone(),
        );
        registry.register(
            "time_to_first_token_seconds",
            "Time from the request to the first content the client received",
            ttft.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from the request to the end of its answer",
            duration.clone(),
        );
        registry.register(
            "tokens",
            "Tokens in and out, as the upstream reported them",
            tokens.clone(),
        );
        registry.register(
            "fallbacks",
            "Requests handed to the next target because one failed before answering",
            fallbacks.clone(),
        );
        registry.register(
            "upstream_errors",
            "Upstream failures before an answer, by target and Anthropic error type",
            upstream_errors.clone(),
        );
        registry.register(
            "open_streams",
            "Answers being relayed right now",
            open_streams.clone(),
        );
        Self {
            registry,
            requests,
            ttft,
            duration,
            tokens,
            fallbacks,
            upstream_errors,
            open_streams,
            responses_kept,
            responses_kept_bytes,
            key_requests,
            key_tokens,
            key_cost,
            key_refused,
            key_counters: std::sync::Mutex::default(),
        }
    }

    /// A gateway key's request ended.
    pub fn key_used(
        &self,
        key: &str,
        status: u16,
        usage: &crate::gateway::prices::Usage,
        cost: f64,
    ) {
        let mut keys = self
            .key_counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !keys.contains_key(key) {
            keys.insert(key.to_owned(), KeyCounters::default());
        }
        let Some(counters) = keys.get_mut(key) else {
            return;
        };
        let labels =
            |name: &'static str, value: String| vec![("key", key.to_owned()), (name, value)];
        match counters.requests.iter().find(|(s, _)| *s == status) {
            Some((_, requests)) => {
                requests.inc();
            }
            None => {
                let requests = self
                    .key_requests
                    .get_or_create(&labels("status", status.to_string()))
                    .clone();
                requests.inc();
                counters.requests.push((status, requests));
            }
        }
        let directions = [
            ("input", usage.input),
            ("output", usage.output),
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
        ];
        for ((direction, n), slot) in directions.into_iter().zip(&mut counters.tokens) {
            if n > 0 {
                slot.get_or_insert_with(|| {
                    self.key_tokens
                        .get_or_create(&labels("direction", direction.to_owned()))
                        .clone()
                })
                .inc_by(n);
            }
        }
        if cost > 0.0 {
            counters
                .cost
                .get_or_insert_with(|| {
                    self.key_cost
                        .get_or_create(&vec![("key", key.to_owned())])
                        .clone()
                })
                .inc_by(cost);
        }
    }

    /// A gateway key's limit refused a request.
    pub fn key_refused(&self, key: &str, limit: &str) {
        self.key_refused
            .get_or_create(&vec![("key", key.to_owned()), ("limit", limit.to_owned())])
            .inc();
    }

    /// What the Responses store holds now (set when the metrics are read).
    pub fn responses_kept(&self, bytes: usize, responses: usize) {
        self.responses_kept_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.responses_kept
            .set(i64::try_from(responses).unwrap_or(i64::MAX));
    }

    /// The process-wide metrics.
    pub fn global() -> &'static Self {
        static METRICS: OnceLock<Metrics> = OnceLock::new();
        METRICS.get_or_init(Self::new)
    }

    /// A target failed before answering (`kind`: the Anthropic error type).
    pub fn upstream_error(&self, target: &str, kind: &str, handed_over: bool) {
        self.upstream_errors
            .get_or_create(&vec![
                ("target", target.to_owned()),
                ("kind", kind.to_owned()),
            ])
            .inc();
        if handed_over {
            self.fallbacks
                .get_or_create(&vec![("from", target.to_owned())])
                .inc();
        }
    }

    /// The Prometheus text exposition, with each target's circuit state (1 = open) appended.
    #[must_use]
    pub fn render(&self, targets: &[TargetGauges]) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        // `# EOF` must stay last.
        let body = out.trim_end().trim_end_matches("# EOF").to_owned();
        let mut text = body;
        type Gauge = (&'static str, &'static str, fn(&TargetGauges) -> Option<f64>);
        let gauges: [Gauge; 4] = [
            (
                "claude_bridge_circuit_open",
                "Whether a target is being skipped after failing in a row (1) or not (0).",
                |g| Some(f64::from(u8::from(g.circuit_open))),
            ),
            (
                "claude_bridge_target_in_flight",
                "Requests in flight on a target's upstream (a provider's targets share it).",
                |g| Some(f64::from(g.in_flight)),
            ),
            (
                "claude_bridge_target_queued",
                "Requests waiting for room on a target's upstream (max_parallel, rpm, tpm).",
                |g| Some(f64::from(g.queued)),
            ),
            (
                "claude_bridge_target_latency_ewma_seconds",
                "Time to the first byte from a target's upstream, exponentially weighted.",
                |g| g.latency_ewma_ms.map(|ms| ms / 1000.0),
            ),
        ];
        for (name, help, value) in gauges {
            text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
            for gauge in targets {
                if let Some(v) = value(gauge) {
                    let target = gauge.target.replace('\\', "\\\\").replace('"', "\\\"");
                    text.push_str(&format!("{name}{{target=\"{target}\"}} {v}\n"));
                }
            }
        }
        text.push_str("# EOF\n");
        text
    }
}

/// One target's gauges for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetGauges {
    /// `provider,model`.
    pub target: String,
    /// Its circuit is open.
    pub circuit_open: bool,
    /// In flight on its upstream.
    pub in_flight: u32,
    /// Waiting for room on its upstream.
    pub queued: u32,
    /// Its upstream's time to first byte, weighted (ms).
    pub latency_ewma_ms: Option<f64>,
}

/// What [`Tally::saw`] found in a piece of SSE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// It holds an `error` event.
    pub error: bool,
    /// It holds the stream's last event (`message_stop` or `error`).
    pub ends: bool,
}

/// What the relay saw of an answer.
#[derive(Debug, Default)]
pub struct Tally {
    first_content: Option<Instant>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    stop_reason: Option<String>,
    error: Option<String>,
    /// What the error said (masked).
    message: Option<String>,
}

impl Tally {
    /// A request that got no answer: the error type it ended with, and what it said.
    #[must_use]
    pub fn failed(kind: &str, message: &str) -> Self {
        Self {
            error: Some(kind.to_owned()),
            message: Some(crate::redact::redact(message).into_owned()),
            ..Self::default()
        }
    }

    /// The token counts the upstream reported (`None`: it reported none).
    #[must_use]
    pub fn usage(&self) -> Option<crate::gateway::prices::Usage> {
        if self.input_tokens.is_none() && self.output_tokens.is_none() {
            return None;
        }
        Some(crate::gateway::prices::Usage {
            input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cache_read: self.cache_read_tokens.unwrap_or(0),
            cache_write: self.cache_write_tokens.unwrap_or(0),
        })
    }

    /// The answer ended with an error of `kind` that its SSE did not show (the bridge ended it).
    pub fn fail(&mut self, kind: &str) {
        self.error = Some(kind.to_owned());
    }

    /// Note one piece of SSE sent to the client; returns what the relay needs to know of it
    /// (read in this one pass, not again): whether it holds an `error` event (secrets are masked
    /// in those) and whether it ends the stream.
    pub fn saw(&mut self, sse: &str) -> Seen {
        let mut seen = Seen::default();
        if self.first_content.is_none() && sse.contains("event: content_block_delta") {
            self.first_content = Some(Instant::now());
        }
        for event in events(sse) {
            let is_error = event.starts_with("event: error");
            seen.error |= is_error;
            seen.ends |= is_error || event.starts_with("event: message_stop");
            let interesting = is_error
                || event.starts_with("event: message_start")
                || event.starts_with("event: message_delta");
            if !interesting {
                continue;
            }
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            if let Some(event) = Members::of(data) {
                self.absorb(&event);
            }
        }
        seen
    }

    /// Note a folded answer (a non-streaming client's `Message` or error envelope).
    pub fn saw_folded(&mut self, body: &str) {
        if let Some(answer) = Members::of(body) {
            self.first_content.get_or_insert_with(Instant::now);
            self.absorb(&answer);
        }
    }

    fn absorb(&mut self, event: &Members<'_>) {
        let usage = event
            .message
            .and_then(Members::of_raw)
            .and_then(|message| message.usage)
            .or(event.usage)
            .and_then(Members::of_raw);
        if let Some(usage) = usage {
            let counts = [
                (usage.input_tokens, &mut self.input_tokens),
                (usage.output_tokens, &mut self.output_tokens),
                (usage.cache_read_input_tokens, &mut self.cache_read_tokens),
                (
                    usage.cache_creation_input_tokens,
                    &mut self.cache_write_tokens,
                ),
            ];
            for (raw, count) in counts {
                if let Some(n) = raw.and_then(|raw| serde_json::from_str::<u64>(raw.get()).ok()) {
                    *count = Some(n);
                }
            }
        }
        let stop = event
            .delta
            .and_then(Members::of_raw)
            .and_then(|delta| delta.stop_reason)
            .or(event.stop_reason)
            .and_then(string);
        if let Some(stop) = stop {
            self.stop_reason = Some(stop);
        }
        if event.kind.and_then(string).as_deref() == Some("error") {
            let error = event.error.and_then(Members::of_raw);
            self.error = error.as_ref().and_then(|e| e.kind).and_then(string);
            // Error events are masked before they are sent, so this one is too.
            self.message = error.and_then(|e| e.message).and_then(string);
        }
    }
}

/// The members of a JSON object the [`Tally`] reads, at any depth (an event, its `message`,
/// `usage`, `delta` or `error`), each left unparsed; every other member is skipped, not
/// built. A `message_start` carries the whole message shell, and building it as a
/// `serde_json::Value` (a map, a string per member) for four numbers was most of what the
/// tally cost a stream.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Members<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    #[serde(borrow)]
    stop_reason: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    output_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cache_read_input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cache_creation_input_tokens: Option<&'a RawValue>,
}

impl<'a> Members<'a> {
    /// `json`'s members, if it is an object.
    fn of(json: &'a str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }

    fn of_raw(raw: &'a RawValue) -> Option<Self> {
        Self::of(raw.get())
    }
}

/// A member's value, if it is a string.
fn string(raw: &RawValue) -> Option<String> {
    serde_json::from_str(raw.get()).ok()
}

/// The events of a piece of SSE: what lies between blank lines (`\n\n`). Found with
/// `memchr` (every piece of every stream passes here; `str::split` with a two-byte pattern
/// showed in profiles).
fn events(sse: &str) -> impl Iterator<Item = &str> {
    let bytes = sse.as_bytes();
    let mut ends = memchr::memchr_iter(b'\n', bytes)
        .filter(move |&i| bytes.get(i + 1) == Some(&b'\n'))
        .chain(std::iter::once(bytes.len()));
    let mut start = 0;
    std::iter::from_fn(move || {
        if start > bytes.len() {
            return None;
        }
        let end = ends.find(|&end| end >= start)?;
        let event = sse.get(start..end).unwrap_or_default();
        start = end + 2;
        Some(event)
    })
}

/// Who answered a request, for the line and the metrics at its end.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The client's model name.
    pub client_model: String,
    /// `provider,model` that answered.
    pub target: String,
    /// Which route chose the first target.
    pub route: String,
    /// Why the target that answered was tried: `only`, `affinity`, `load`, `pool` (another
    /// member after the first failed), `fallback`.
    pub pick: &'static str,
    /// Targets tried (1 without fallbacks).
    pub attempts: usize,
    /// When the request arrived.
    pub started: Instant,
    /// The gateway's hold on the request (its key's limits, its ledger record).
    pub admission: Option<std::sync::Arc<crate::gateway::Admission>>,
    /// Its place on the upstream (`max_parallel`), held until the answer ends.
    pub slot: Option<std::sync::Arc<super::upstreams::Slot>>,
    /// Who sent it (the dashboard's columns).
    pub sender: std::sync::Arc<Sender>,
}

/// Who sent a request, for the dashboard ([`crate::dashboard`]).
#[derive(Debug, Clone, Default)]
pub struct Sender {
    /// Its `request-id`.
    pub request_id: String,
    /// The gateway key's name.
    pub key: Option<String>,
    /// The client, from its `user-agent` (`crate::gateway::ledger::client_kind`).
    pub client: &'static str,
    /// Its conversation: Claude Code's `x-claude-code-session-id`, else Codex's `session_id`
    /// header (at most 128 characters; the ledger keeps it too).
    pub session: Option<String>,
    /// `messages`, `chat` or `responses`.
    pub front: &'static str,
}

impl Sender {
    /// The sender of a request with these headers, from `caller` (`None`: not known yet).
    #[must_use]
    pub fn of(
        request_id: &str,
        caller: Option<&crate::gateway::Caller>,
        headers: &http::HeaderMap,
        front: &'static str,
    ) -> Self {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        Self {
            request_id: request_id.to_owned(),
            key: caller
                .filter(|c| !matches!(c, crate::gateway::Caller::Open))
                .map(|c| c.name().to_owned()),
            client: crate::gateway::ledger::client_kind(header("user-agent").unwrap_or("")),
            session: header("x-claude-code-session-id")
                .or_else(|| header("session_id"))
                .filter(|s| !s.is_empty())
                .map(|s| s.chars().take(128).collect()),
            front,
        }
    }

    /// What the dashboard keeps of a request that ended.
    #[must_use]
    pub fn finished(
        &self,
        status: u16,
        error: Option<&str>,
        message: Option<&str>,
    ) -> crate::dashboard::Finished {
        crate::dashboard::Finished {
            id: self.request_id.clone(),
            at_ms: crate::gateway::store::now_ms(),
            key: self.key.clone(),
            client: self.client.to_owned(),
            session: self.session.clone(),
            front: self.front.to_owned(),
            status,
            error: error.map(str::to_owned),
            message: message.map(str::to_owned),
            ..crate::dashboard::Finished::default()
        }
    }
}

impl Outcome {
    /// The answer is over: log its line and move the metrics. `status` is the HTTP status the
    /// client got (200 for a stream even if it ended with an `error` event; `tally` says so).
    pub fn finish(&self, status: u16, tally: &Tally) {
        let duration = self.started.elapsed();
        let ttft = tally.first_content.map(|t| t.duration_since(self.started));
        let outcome = match &tally.error {
            Some(kind) => kind.clone(),
            None => status.to_string(),
        };
        info!(
            model = %self.client_model,
            target = %self.target,
            route = %self.route,
            pick = %self.pick,
            attempts = self.attempts,
            status = %outcome,
            ttft_ms = ttft.map(|t| t.as_millis() as u64),
            ms = duration.as_millis() as u64,
            input_tokens = tally.input_tokens,
            output_tokens = tally.output_tokens,
            stop = %tally.stop_reason.as_deref().unwrap_or("-"),
            "request done"
        );
        if let Some(slot) = &self.slot {
            slot.upstream()
                .ended(ttft, tally.output_tokens.unwrap_or_default());
        }
        let cost = self.admission.as_ref().and_then(|admission| {
            admission.finish(&crate::gateway::Ending {
                route: self.route.clone(),
                target: self.target.clone(),
                model: self.client_model.clone(),
                attempts: self.attempts,
                status,
                error_kind: tally.error.clone(),
                ttft,
                usage: tally.usage(),
            })
        });
        crate::dashboard::Board::global().record(crate::dashboard::Finished {
            route: self.route.clone(),
            target: self.target.clone(),
            model: self.client_model.clone(),
            pick: self.pick.to_owned(),
            attempts: self.attempts,
            ttft_ms: ttft.map(|t| t.as_millis() as u64),
            ms: duration.as_millis() as u64,
            input_tokens: tally.input_tokens,
            output_tokens: tally.output_tokens,
            cost_usd: cost,
            ..self
                .sender
                .finished(status, tally.error.as_deref(), tally.message.as_deref())
        });
        let metrics = Metrics::global();
        let target = vec![("target", self.target.clone())];
        metrics
            .requests
            .get_or_create(&vec![("target", self.target.clone()), ("status", outcome)])
            .inc();
        metrics
            .duration
            .get_or_create(&target)
            .observe(duration.as_secs_f64());
        if let Some(ttft) = ttft {
            metrics
                .ttft
                .get_or_create(&target)
                .observe(ttft.as_secs_f64());
        }
        for (direction, n) in [
            ("input", tally.input_tokens),
            ("output", tally.output_tokens),
        ] {
            if let Some(n) = n {
                metrics
                    .tokens
                    .get_or_create(&vec![
                        ("target", self.target.clone()),
                        ("direction", direction.to_owned()),
                    ])
                    .inc_by(n);
            }
        }
    }
}

/// Counts an answer being relayed while it lives.
#[derive(Debug)]
pub struct OpenStream(());

impl OpenStream {
    /// One more open stream.
    #[must_use]
    pub fn open() -> Self {
        Metrics::global().open_streams.inc();
        Self(())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        Metrics::global().open_streams.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_series_count_every_request_each_status_and_direction_apart_and_only_what_was_used() {
        let metrics = Metrics::new();
        let usage = |input, output| crate::gateway::prices::Usage {
            input,
            output,
            ..Default::default()
        };
        metrics.key_used("alice", 200, &usage(10, 5), 0.25);
        metrics.key_used("alice", 200, &usage(1, 0), 0.0);
        metrics.key_used("alice", 429, &usage(0, 0), 0.0);
        metrics.key_used("bob", 200, &usage(0, 7), 0.5);
        let text = metrics.render(&[]);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("claude_bridge_key_") && !l.contains("_created"))
            .collect();
        for expected in [
            r#"claude_bridge_key_requests_total{key="alice",status="200"} 2"#,
            r#"claude_bridge_key_requests_total{key="alice",status="429"} 1"#,
            r#"claude_bridge_key_requests_total{key="bob",status="200"} 1"#,
            r#"claude_bridge_key_tokens_total{key="alice",direction="input"} 11"#,
            r#"claude_bridge_key_tokens_total{key="alice",direction="output"} 5"#,
            r#"claude_bridge_key_tokens_total{key="bob",direction="output"} 7"#,
            r#"claude_bridge_key_cost_usd_total{key="alice"} 0.25"#,
            r#"claude_bridge_key_cost_usd_total{key="bob"} 0.5"#,
        ] {
            assert!(lines.contains(&expected), "{expected} in {lines:#?}");
        }
        assert_eq!(lines.len(), 8, "no series of what was not used: {lines:#?}");
    }

    #[test]
    fn events_are_what_lies_between_blank_lines() {
        fn split(s: &str) -> Vec<&str> {
            events(s).collect()
        }
        for sse in [
            "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n",
            "event: a\ndata: 1\n\nevent: b",
            "",
            "\n\n\n\n",
            "\n\n\n",
            "x\ny\n\n\nz",
        ] {
            assert_eq!(split(sse), sse.split("\n\n").collect::<Vec<_>>(), "{sse:?}");
        }
        // Every string of up to ten newlines and letters splits as `str::split` does.
        for len in 0..=10 {
            for bits in 0..(1u32 << len) {
                let sse: String = (0..len)
                    .map(|i| if bits >> i & 1 == 1 { '\n' } else { 'a' })
                    .collect();
                assert_eq!(
                    split(&sse),
                    sse.split("\n\n").collect::<Vec<_>>(),
                    "{sse:?}"
                );
            }
        }
    }

    #[test]
    fn the_tally_reads_usage_stop_and_errors() {
        let mut t = Tally::default();
        t.saw("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n");
        t.saw("event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n");
        t.saw("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        assert_eq!(t.input_tokens, Some(12));
        assert_eq!(t.output_tokens, Some(7));
        assert_eq!(t.stop_reason.as_deref(), Some("end_turn"));
        assert!(t.first_content.is_some());
        t.saw("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n");
        assert_eq!(t.error.as_deref(), Some("overloaded_error"));
    }

    /// What the tally read before it skipped the members it does not need: the same event
    /// parsed whole, as a `serde_json::Value`.
    fn read_whole(json: &str) -> [Option<String>; 7] {
        use serde_json::Value;
        let Ok(value) = serde_json::from_str::<Value>(json) else {
            return Default::default();
        };
        let usage = value
            .get("message")
            .and_then(|m| m.get("usage"))
            .or_else(|| value.get("usage"));
        let count = |name: &str| {
            usage
                .and_then(|u| u.get(name))
                .and_then(Value::as_u64)
                .map(|n| n.to_string())
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let is_error = value.get("type").and_then(Value::as_str) == Some("error");
        let error = value.get("error").filter(|_| is_error);
        [
            count("input_tokens"),
            count("output_tokens"),
            count("cache_read_input_tokens"),
            count("cache_creation_input_tokens"),
            text(
                value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .or_else(|| value.get("stop_reason")),
            ),
            text(error.and_then(|e| e.get("type"))),
            text(error.and_then(|e| e.get("message"))),
        ]
    }

    #[test]
    fn the_tally_reads_what_a_whole_parse_would() {
        let cases = [
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi \"there\""}],"model":"m","stop_reason":null,"usage":{"input_tokens":1200,"output_tokens":1,"cache_read_input_tokens":300,"cache_creation_input_tokens":20}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":85}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy \u00e9 \n now"}}"#,
            r#"{"type":"error","error":"not an object"}"#,
            r#"{"type":"message_delta","usage":{"output_tokens":-1,"input_tokens":1.5}}"#,
            r#"{"type":"message_delta","usage":"none","delta":[]}"#,
            r#"{"id":"msg_2","type":"message","content":[],"stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":3}}"#,
            r#"{"type":"message","message":{"content":[]},"usage":{"input_tokens":9}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":7}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"[1,2]"#,
            r#"{"type":"message_start","message":{"usage":{"input_tokens":1}"#,
            r#"not json"#,
        ];
        for json in cases {
            let mut tally = Tally::default();
            tally.saw_folded(json);
            let read = [
                tally.input_tokens.map(|n| n.to_string()),
                tally.output_tokens.map(|n| n.to_string()),
                tally.cache_read_tokens.map(|n| n.to_string()),
                tally.cache_write_tokens.map(|n| n.to_string()),
                tally.stop_reason,
                tally.error,
                tally.message,
            ];
            assert_eq!(read, read_whole(json), "{json}");
        }
    }

    #[test]
    fn the_exposition_ends_with_eof_and_lists_circuits_and_loads() {
        Metrics::global().upstream_error("a,b", "api_error", true);
        let text = Metrics::global().render(&[TargetGauges {
            target: "a,b".into(),
            circuit_open: true,
            in_flight: 3,
            queued: 2,
            latency_ewma_ms: Some(250.0),
        }]);
        for line in [
            "claude_bridge_target_in_flight{target=\"a,b\"} 3",
            "claude_bridge_target_queued{target=\"a,b\"} 2",
            "claude_bridge_target_latency_ewma_seconds{target=\"a,b\"} 0.25",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            text.contains("claude_bridge_fallbacks_total{from=\"a,b\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("claude_bridge_circuit_open{target=\"a,b\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
    }
}
