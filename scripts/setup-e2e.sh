#!/usr/bin/env bash
# Install the real clients the end-to-end tests drive (tests/tests/e2e_*.rs):
#   - tests/e2e/node_modules: @anthropic-ai/claude-code (native CLI), @anthropic-ai/sdk, the @noble
#     crypto libraries, @ag-ui/client, @modelcontextprotocol/sdk, openai and @openai/codex (pinned in package.json)
#   - tests/evm/node_modules: hardhat (the local EVM node) and solc (pinned in package.json)
#   - tests/e2e/.venv: Python venv with the `anthropic` and `openai` SDKs and litellm (pinned in requirements.txt)
#   - tmux (Debian), the terminal the interactive client tests run in
# Idempotent and quiet; a no-op taking well under a second when everything is in place.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
e2e="$root/tests/e2e"
cd "$e2e"

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup-e2e: '$1' is required but not installed" >&2; exit 1; }; }
need node
need npm
need python3

# --- npm packages ----------------------------------------------------------------------------
# `npm install`, never `npm ci` (ci fails here on packages with platform-specific optional deps).
stamp="node_modules/.package-lock.json"
npm_ok() {
  [[ -f "$stamp" && "$stamp" -nt package.json && "$stamp" -nt package-lock.json ]] &&
    [[ -f node_modules/@anthropic-ai/sdk/package.json ]] &&
    [[ -f node_modules/@noble/secp256k1/package.json ]] &&
    [[ -f node_modules/@ag-ui/client/package.json ]] &&
    [[ -f node_modules/playwright-core/package.json ]] &&
    [[ -x node_modules/esbuild/bin/esbuild ]] &&
    [[ -f node_modules/@modelcontextprotocol/sdk/package.json ]] &&
    [[ -f node_modules/openai/package.json ]] &&
    [[ -f node_modules/ai/package.json && -f node_modules/@ai-sdk/openai/package.json && -f node_modules/zod/package.json ]] &&
    [[ -f node_modules/@langchain/anthropic/package.json && -f node_modules/@langchain/core/package.json ]] &&
    [[ -x node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ]] &&
    ls node_modules/@anthropic-ai/claude-code-linux-*/claude >/dev/null 2>&1
}
if ! npm_ok; then
  echo "setup-e2e: npm install in tests/e2e"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
  touch "$stamp"
fi

# npm 11 may skip claude-code's postinstall (it copies the native binary into bin/); the tests call
# the platform package's binary directly, so only check that it is there and runs.
claude_bin="$(ls node_modules/@anthropic-ai/claude-code-linux-*/claude 2>/dev/null | head -n1 || true)"
if [[ -z "$claude_bin" ]]; then
  echo "setup-e2e: the Claude Code native binary is missing under tests/e2e/node_modules/@anthropic-ai/claude-code-linux-*/" >&2
  exit 1
fi
[[ -x "$claude_bin" ]] || chmod +x "$claude_bin"

# --- The local Fabstir world's chain: hardhat (EVM node) and solc, in tests/evm -------------------
evm="$root/tests/evm"
evm_stamp="$evm/node_modules/.package-lock.json"
evm_ok() {
  [[ -f "$evm_stamp" && "$evm_stamp" -nt "$evm/package.json" ]] &&
    [[ -f "$evm/node_modules/hardhat/internal/cli/cli.js" && -f "$evm/node_modules/solc/package.json" ]]
}
if ! evm_ok; then
  echo "setup-e2e: npm install in tests/evm (hardhat, solc)"
  (cd "$evm" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  touch "$evm_stamp"
fi

# --- Python venv ---------------------------------------------------------------------------------
want="$(sed -n 's/^anthropic==//p' requirements.txt)"
want_openai="$(sed -n 's/^openai==//p' requirements.txt)"
want_litellm="$(sed -n 's/^litellm==//p' requirements.txt)"
py_ok() {
  [[ -x .venv/bin/python ]] &&
    compgen -G ".venv/lib/python3*/site-packages/anthropic-$want.dist-info" >/dev/null &&
    compgen -G ".venv/lib/python3*/site-packages/openai-$want_openai.dist-info" >/dev/null &&
    compgen -G ".venv/lib/python3*/site-packages/litellm-$want_litellm.dist-info" >/dev/null
}
if ! py_ok; then
  echo "setup-e2e: Python venv tests/e2e/.venv with anthropic==$want, openai==$want_openai, litellm==$want_litellm"
  [[ -x .venv/bin/python ]] || python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  py_ok || { echo "setup-e2e: anthropic==$want, openai==$want_openai or litellm==$want_litellm did not install" >&2; exit 1; }
fi

# --- tmux: the real terminal the interactive Claude Code and Codex tests type into ---------------
if ! command -v tmux >/dev/null 2>&1; then
  source "$root/scripts/apt-install.sh"
  apt_install setup-e2e tmux
fi

# --- PostgreSQL and HAProxy: the gateway's replicas test (a real database, a real balancer) -----
pg_found() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
want_apt=()
pg_found || want_apt+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || want_apt+=(haproxy)
# pkill: the tests stop HAProxy, which runs under runuser, by its parent's id.
command -v pkill >/dev/null 2>&1 || want_apt+=(procps)
if ((${#want_apt[@]})); then
  source "$root/scripts/apt-install.sh"
  apt_install setup-e2e "${want_apt[@]}"
fi
