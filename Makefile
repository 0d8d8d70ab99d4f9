# claude-bridge — the commands people run. On a fresh machine only `make run` and `make test`
# are needed: both install what they need first (`make setup`).

SHELL := /bin/bash
CARGO ?= cargo
LISTEN ?= 127.0.0.1:3456
BASE_URL ?=
ARGS ?=
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
## Where `purity` and `test-js` build the browser target.
WEB_TARGET_DIR := $(abspath $(TARGET_DIR))/web

.PHONY: all setup setup-rust setup-e2e setup-js build install run run-agui fabstir-world js test test-build test-rust test-lean test-js test-js-wasm bench bench-proxy soak soak-burst fuzz lint fmt purity doc clean

all: build

## Install what builds and tests need: rust targets and components, the real clients (npm, pip),
## Chromium and the JS test tools.
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
## package in Node and headless Chromium (byte-identical to the native core). scripts/test.sh runs
## `setup` in the background while `lint`, `purity` and `test-build` compile, then `test-rust`
## and `test-js`.
test:
	@scripts/test.sh

## The binaries the end-to-end tests run are built with the same selection as the tests themselves
## (--workspace, test targets), so cargo resolves one feature set and compiles the dependencies once:
## `build -p claude-bridge` alone resolved another, and wasmtime, tokio and reqwest were built twice.
## The build without default features (no Fabstir chain mode, no AG-UI): clippy on all its
## targets and the binary's unit tests. Not in `make test`: with other features the whole
## dependency tree is checked and compiled again (the default features' check of that tree ran
## over 22 minutes on a fresh 2-core machine), which CI's time cannot carry.
## Every crate of the workspace with its tests and binaries (bench-proxy too, so lint sees it),
## but the two wasm facades: they are built (and linted) for their wasm targets — the component
## by host-native/build.rs and tests/build.rs, the npm package's crate by `purity` and `test-js`
## — and natively they would only compile wit-bindgen's and wasm-bindgen's macro stacks for
## nothing (minutes on two cores). The npm crate's own unit test: `cargo test -p bridge-core-js`.
## The bridge without its `jemalloc` feature: the allocator changes no behaviour a test sees, and
## compiling jemalloc's C sources cost 13 CPU-minutes (the release build keeps it; `make
## soak-burst` measures what it is for).
TEST_SELECTION := --workspace --exclude bridge-core-component --exclude bridge-core-component-faults --exclude bridge-core-js --no-default-features --features claude-bridge/fabstir-chain,claude-bridge/agui,bridge-tests/bench
TEST_BUILD := build $(TEST_SELECTION) --tests --bins
## clippy-driver as the workspace's compiler, as `cargo clippy` runs it, but for a build; the
## tests run with it too, so nothing is compiled again for them.
CLIPPY_BUILD := RUSTC_WORKSPACE_WRAPPER="$$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test-build: setup-rust
	$(CLIPPY_BUILD) $(CARGO) $(TEST_BUILD)

test-rust:
	$(CLIPPY_BUILD) $(CARGO) $(TEST_BUILD)
	$(CLIPPY_BUILD) $(CARGO) test $(TEST_SELECTION) --no-fail-fast

test-lean: setup-rust
	$(CARGO) clippy -p claude-bridge --no-default-features --all-targets -- -D warnings
	$(CARGO) test -p claude-bridge --no-default-features --lib

## The npm package's suites: golden fixtures in Node and Chromium against the native core's bytes,
## the facade's contract, npm pack + install into a fresh directory + tsc, the playground. The
## package is built as `make js` builds it, linted by clippy on the way (its default features),
## but in the `js-test` profile (no LTO) and in WEB_TARGET_DIR (`make test` has built its .wasm
## by then, with `test-js-wasm`).
test-js: setup-rust setup-js
	$(CLIPPY_BUILD) $(CARGO) $(TEST_BUILD)
	CARGO_TARGET_DIR=$(WEB_TARGET_DIR) JS_PROFILE=js-test BRIDGE_BINDGEN=$(abspath $(TARGET_DIR))/debug/bridge-bindgen $(CLIPPY_BUILD) scripts/build-js.sh
	$(TARGET_DIR)/debug/conformance-dump $(abspath $(TARGET_DIR))/js-test/native-conformance.json
	cd pkg-js && node --test tests/*.test.mjs

## The .wasm `test-js` packages, alone (no glue, no tests): `make test` builds it in the background
## beside the native build, after `purity`, so test-js's own cargo step finds it built.
test-js-wasm: setup-rust
	CARGO_TARGET_DIR=$(WEB_TARGET_DIR) JS_PROFILE=js-test $(CLIPPY_BUILD) scripts/build-js.sh --wasm-only

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
## folded, in one upstream line and in SOAK_ANSWER_PIECES (1000) deltas (peak RSS as a multiple of
## the answer); SOAK_ENGINE=native|wasm (default: the bridge's).
## tests/bench/results/burst-*.json, answer-*.json.
soak-burst:
	$(CARGO) build --release -q -p claude-bridge
	$(CARGO) build --release -q -p bridge-tests --bin soak
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge E2E_ENGINE=$${SOAK_ENGINE:-} $(TARGET_DIR)/release/soak burst $${SOAK_BODIES:-10} $${SOAK_BODY_MB:-31} $${SOAK_IDLE_S:-60} $${SOAK_ROUNDS:-2}
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge E2E_ENGINE=$${SOAK_ENGINE:-} $(TARGET_DIR)/release/soak answer $${SOAK_ANSWER_MB:-20} 1
	CLAUDE_BRIDGE_BIN=$(abspath $(TARGET_DIR))/release/claude-bridge E2E_ENGINE=$${SOAK_ENGINE:-} $(TARGET_DIR)/release/soak answer $${SOAK_ANSWER_MB:-20} $${SOAK_ANSWER_PIECES:-1000}

## Fuzzing (nightly, cargo-fuzz): every target in core/src/fuzz.rs for FUZZ_SECONDS (default 60)
## each, seeded with the golden fixtures. `make test` runs the same targets on stable, briefly.
fuzz:
	@scripts/fuzz.sh

## fmt check + clippy -D warnings, natively and for both wasm targets. Each pass is a build, not
## a check: clippy-driver compiles the workspace's crates (lints, then code) in builds that run
## anyway, so nothing is compiled twice — a `cargo clippy` check shares nothing with a build, and
## on a fresh 2-core machine the checks of the dependency tree and of the core for each target
## cost more than all the tests. Natively: the very selection the tests run (TEST_BUILD). The
## WASI component: host-native/build.rs builds both its variants (with and without
## fault-injection) in one nested cargo, which keeps clippy-driver when the outer build runs
## under it. The browser target: `purity` (the facade without default features) and `test-js`
## (with them, as `make js` builds it). The build without default features (no Fabstir chain
## mode, no AG-UI) is `make test-lean`'s.
lint: setup-rust
	$(CARGO) fmt --all --check
	$(CLIPPY_BUILD) $(CARGO) $(TEST_BUILD)

## The core is pure: built for the browser target (the facade crate without its JS bindings),
## it imports nothing from its host. In the `js-test` profile and the target dir that `test-js`
## builds the npm package in, which then compiles only the facade and wasm-bindgen on top (the
## facade's build-dependency on syn keeps the features of the two builds' proc-macros alike, see
## pkg-js/Cargo.toml); clippy lints it on the way. Its own target dir lets `make test` run it
## beside the native build (cargo locks a target dir for the whole of a build).
purity: setup-rust
	$(CLIPPY_BUILD) $(CARGO) build --target-dir $(WEB_TARGET_DIR) -p bridge-core-js --no-default-features --target wasm32-unknown-unknown --profile js-test
	python3 scripts/check-wasm-imports.py $(WEB_TARGET_DIR)/wasm32-unknown-unknown/js-test/bridge_core_js.wasm

fmt:
	$(CARGO) fmt --all

doc:
	$(CARGO) doc --workspace --no-deps

clean:
	$(CARGO) clean
