#!/usr/bin/env bash
# Rust targets and components the build and lint need. Idempotent and fast when done.
set -euo pipefail
need_targets=()
installed="$(rustup target list --installed 2>/dev/null || true)"
for t in wasm32-wasip2 wasm32-unknown-unknown; do
  grep -qx "$t" <<<"$installed" || need_targets+=("$t")
done
if ((${#need_targets[@]})); then
  echo "setup-rust: rustup target add ${need_targets[*]}"
  rustup target add "${need_targets[@]}"
fi
components="$(rustup component list --installed 2>/dev/null || true)"
for c in clippy rustfmt; do
  grep -q "^$c" <<<"$components" || rustup component add "$c"
done
