#!/usr/bin/env bash
# `make test`: everything CI checks, in the order that takes least time on a fresh machine.
#
# The installs that mostly wait on the network (the real clients from npm and PyPI, the JS test
# tools, Chromium) and the browser-target builds (`purity`, `test-js-wasm`) run in the
# background while cargo lints and builds natively; the tests start once all are done. On a
# fresh 2-core machine the installs took ~8 minutes and the compile more than that: run one
# after the other, they added up.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
make="${MAKE:-make}"

# How long each phase took, printed at the end and also when CI's time limit stops the run.
phases=""
phase() {
  phases+="make test: $1 ended at $((SECONDS / 60)) min $((SECONDS % 60)) s"$'\n'
  echo "${phases%$'\n'}" | tail -n 1
}
setup=""
purity=""
finish() {
  # A failure must not leave the installs or the browser-target builds running on.
  [[ -n "$setup" ]] && kill "$setup" 2>/dev/null || true
  [[ -n "$purity" ]] && kill "$purity" 2>/dev/null || true
  printf '%s' "$phases"
}
trap finish EXIT
trap 'exit 143' TERM INT

"$make" --no-print-directory setup-rust
phase setup-rust

# wait_for NAME PID LOG WHAT: wait for a background job, print its log prefixed with NAME, and
# stop the run if it failed.
wait_for() {
  local status=0
  wait "$2" || status=$?
  phase "$4 (in the background)"
  sed "s/^/$1: /" "$3"
  rm -f "$3"
  if ((status != 0)); then
    echo "make test: $4 failed (exit $status); the output is above" >&2
    exit "$status"
  fi
}

setup_log="$(mktemp "${TMPDIR:-/tmp}/claude-bridge-setup.XXXXXX")"
(scripts/setup-e2e.sh && scripts/setup-js.sh && echo "installs ended at $((SECONDS / 60)) min $((SECONDS % 60)) s") >"$setup_log" 2>&1 &
setup=$!

# The browser target's builds (`purity`, then the .wasm `test-js` packages; their own target
# dir) beside the native build: that build leaves a core idle for long stretches (one big crate
# at a time), which these fill.
purity_log="$(mktemp "${TMPDIR:-/tmp}/claude-bridge-purity.XXXXXX")"
"$make" --no-print-directory purity test-js-wasm >"$purity_log" 2>&1 &
purity=$!

"$make" --no-print-directory lint test-build
phase "lint test-build"

wait_for purity "$purity" "$purity_log" "make purity test-js-wasm"
purity=""
wait_for setup "$setup" "$setup_log" "setup-e2e setup-js"
setup=""

"$make" --no-print-directory test-rust
phase test-rust
"$make" --no-print-directory test-js
phase test-js
