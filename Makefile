# claude-bridge — the commands people run. On a fresh machine only `make run` and `make test`
# are needed: both install what they need first (`make setup`).

SHELL := /bin/bash
CARGO ?= cargo
LISTEN ?= 127.0.0.1:3456
BASE_URL ?=
ARGS ?=
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

.PHONY: all setup setup-rust setup-e2e setup-js build install run run-agui fabstir-world js test test-rust test-js bench bench-proxy soak soak-burst fuzz lint fmt purity doc clean

all: build

## Install what builds and tests need: rust targets and components, the real clients (npm, pip),
## wasm-bindgen-cli, Chromium and the JS test tools.
setup: setup-rust setup-e2e setup-js

setup-rust:
	@scripts/setup-rust.sh

setup-e2e:
	@scripts/setup-e2e.sh

setup-js:
	@scripts/setup-js.sh

## Release build of the bridge (the WASI component is built by host-native/build.rs).
build: setup-rust
	$(CARGO) build --release -p claude-bridge

## Install the release binary as $(PREFIX)/bin/claude-bridge (PREFIX defaults to ~/.local).
## Without make: `rustup target add wasm32-wasip2` once, then `cargo install --path host-native`.
PREFIX ?= $(HOME)/.local
install: build
	install -D -m 755 $(TARGET_DIR)/release/claude-bridge $(PREFIX)/bin/claude-bridge
	@echo "installed $(PREFIX)/bin/claude-bridge"; case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "($(PREFIX)/bin is not on PATH: add it, e.g. export PATH=\"$(PREFIX)/bin:\$$PATH\")";; esac

## Serve on $(LISTEN) against the provider's usual URL (Ollama's http://127.0.0.1:11434/v1 for the
## default openai provider; the start-up line names it). Override with e.g.
## `make run BASE_URL=https://api.openai.com/v1 ARGS="--model gpt-4o"`, or with CLAUDE_BRIDGE_*
## environment variables.
run: build
	$(TARGET_DIR)/release/claude-bridge serve --listen $${CLAUDE_BRIDGE_LISTEN:-$(LISTEN)} $(if $(BASE_URL),--base-url $(BASE_URL)) $(ARGS)

## AG-UI / CopilotKit front on $(LISTEN), its Claude Code agents on the same provider flags as `run`.
run-agui: build
	$(TARGET_DIR)/release/claude-bridge agui --listen $${CLAUDE_BRIDGE_LISTEN:-$(LISTEN)} $(if $(BASE_URL),--base-url $(BASE_URL)) $(ARGS)

## A local Fabstir world to try `--provider fabstir` against: hardhat (chain id 84532) with the
## contracts, two registered host nodes with a toy model, a funded wallet. Prints the `make run` line.
fabstir-world: setup-rust setup-e2e
	$(CARGO) run -q -p bridge-tests --bin fabstir-world

## The npm package @fabstir/bridge-core (pkg-js/dist/package) and its playground (pkg-js/dist/playground).
js: setup-rust setup-js
	@scripts/build-js.sh

## Everything CI checks: lint, purity, unit + golden + property tests, wasmtime conformance,
## end-to-end tests with the real Claude Code CLI and the official Anthropic SDKs, and the npm
## package in Node and headless Chromium (byte-identical to the native core).
test: setup lint purity test-rust test-js

test-rust:
	$(CARGO) build -p claude-bridge
	$(CARGO) test --workspace --no-fail-fast
	$(CARGO) test -p claude-bridge --no-default-features --lib

## The npm package's suites: golden fixtures in Node and Chromium against the native core's bytes,
## the facade's contract, npm pack + install into a fresh directory + tsc, the playground.
test-js: js
	$(CARGO) run -q -p bridge-tests --bin conformance-dump -- $(abspath $(TARGET_DIR))/js-test/native-conformance.json
	cd pkg-js && node --test tests/*.test.mjs

## Measurements (no thresholds): core translation MB/s native vs wasmtime vs Node on one large
## stream, the npm .wasm size. Results: tests/bench/results/. BENCH_MB=… sets the stream size.
bench: js
	@scripts/bench.sh

## Proxy benchmark (not in CI; measurement only, docs/benchmarks.md): the release bridge (both engines)
## against a scripted upstream and a Rust load generator, beside a direct baseline measured in the
## same run; the bridge on core 0, the rest on core 1. TTFT and total p50/p99, requests/s, bridge
## CPU-s per 1000 requests, RSS idle and per open stream -> tests/bench/results/proxy-*.json.
## Knobs: BENCH_PROXY_CONCURRENCY (1,16,64,256,512), BENCH_PROXY_REQUESTS (3000 per small
## scenario), BENCH_PROXY_LARGE_REQUESTS (500 per 300 KB scenario), BENCH_PROXY_HOLD (512),
## BENCH_PROXY_ENGINES (native,wasm), BENCH_PROXY_IDLE_WAIT (36 s before idle RSS is read).
bench-proxy:
	$(CARGO) build --release -q -p claude-bridge
	$(CARGO) build --release -q -p bridge-tests --features bench --bin bench-proxy
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge $(TARGET_DIR)/release/bench-proxy

## Soak (not in CI): SOAK_STREAMS concurrent streams (200) for SOAK_MINUTES (5) against the release
## bridge and a scripted upstream; RSS sampled, errors counted; tests/bench/results/soak-*.json.
soak:
	$(CARGO) build --release -q -p claude-bridge
	$(CARGO) build --release -q -p bridge-tests --bin soak
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge $(TARGET_DIR)/release/soak $${SOAK_STREAMS:-200} $${SOAK_MINUTES:-5}

## Memory after bursts (not in CI): SOAK_ROUNDS (2) rounds of SOAK_BODIES (10) concurrent requests of
## SOAK_BODY_MB (31) MB each, then SOAK_IDLE_S (60) s idle; RSS peak, at the end, after idling, and the
## slowest /health meanwhile; then one SOAK_ANSWER_MB (20) MB answer through each front, streamed and
## folded (peak RSS as a multiple of the answer); SOAK_ENGINE=native|wasm (default: the bridge's).
## tests/bench/results/burst-*.json, answer-*.json.
soak-burst:
	$(CARGO) build --release -q -p claude-bridge
	$(CARGO) build --release -q -p bridge-tests --bin soak
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge E2E_ENGINE=$${SOAK_ENGINE:-} $(TARGET_DIR)/release/soak burst $${SOAK_BODIES:-10} $${SOAK_BODY_MB:-31} $${SOAK_IDLE_S:-60} $${SOAK_ROUNDS:-2}
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge E2E_ENGINE=$${SOAK_ENGINE:-} $(TARGET_DIR)/release/soak answer $${SOAK_ANSWER_MB:-20}

## Fuzzing (nightly, cargo-fuzz): every target in core/src/fuzz.rs for FUZZ_SECONDS (default 60)
## each, seeded with the golden fixtures. `make test` runs the same targets on stable, briefly.
fuzz:
	@scripts/fuzz.sh

## fmt check + clippy -D warnings, natively (the default features, and none: no Fabstir chain
## mode, no AG-UI) and for both wasm targets.
lint: setup-rust
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --features bridge-tests/bench -- -D warnings
	$(CARGO) clippy -p claude-bridge --no-default-features --all-targets -- -D warnings
	$(CARGO) clippy -p bridge-core -p bridge-core-js --target wasm32-unknown-unknown -- -D warnings
	$(CARGO) clippy -p bridge-core-js --no-default-features --target wasm32-unknown-unknown -- -D warnings
	$(CARGO) clippy -p bridge-core-component --target wasm32-wasip2 -- -D warnings
	$(CARGO) clippy -p bridge-core-component --target wasm32-wasip2 --features fault-injection -- -D warnings

## The core is pure: built for the browser target (the facade crate without its JS bindings),
## it imports nothing from its host.
purity: setup-rust
	$(CARGO) build -p bridge-core-js --no-default-features --target wasm32-unknown-unknown --release
	python3 scripts/check-wasm-imports.py $(TARGET_DIR)/wasm32-unknown-unknown/release/bridge_core_js.wasm

fmt:
	$(CARGO) fmt --all

doc:
	$(CARGO) doc --workspace --no-deps

clean:
	$(CARGO) clean
