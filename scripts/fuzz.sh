#!/usr/bin/env bash
# `make fuzz`: every bridge_core::fuzz target under libFuzzer (cargo-fuzz, nightly) for
# FUZZ_SECONDS each (default 60), seeded with the golden fixtures. A crash is saved under
# core/fuzz/artifacts/<target>/; copy it to tests/fixtures/fuzz/<target>/ so `make test` keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
targets=(sse_decoder chat_stream responses_stream token_stream request agui_ndjson)
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "make fuzz needs a nightly toolchain (rustup toolchain install nightly); make test runs the same targets on stable" >&2
    exit 2
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus_root=target/fuzz-corpus
for target in "${targets[@]}"; do
    corpus="$corpus_root/$target"
    mkdir -p "$corpus"
    case "$target" in
        sse_decoder|chat_stream) seeds=$(find tests/fixtures -name upstream.sse) ;;
        responses_stream) seeds=$(find tests/fixtures/responses -name upstream.sse) ;;
        token_stream) seeds=$(find tests/fixtures/fabstir -name tokens.json) ;;
        request) seeds=$(find tests/fixtures -name request.json) ;;
        agui_ndjson) seeds=$(find tests/fixtures/agui -name transcript.ndjson) ;;
    esac
    i=0
    for seed in $seeds; do
        # The first byte picks the chunk size: a 7-byte cut of every seed.
        { printf '\007'; cat "$seed"; } > "$corpus/seed-$i"
        i=$((i + 1))
    done
    if [ -d "tests/fixtures/fuzz/$target" ]; then cp tests/fixtures/fuzz/"$target"/* "$corpus/" 2>/dev/null || true; fi
    echo "== $target ($seconds s)"
    cargo +nightly fuzz run --fuzz-dir core/fuzz "$target" "$corpus" -- -max_total_time="$seconds"
done
