#!/usr/bin/env bash
# What the npm package's build and tests need (make js / make test-js):
#   - Debian's chromium (headless browser tests), if missing
#   - pkg-js/node_modules: playwright-core (drives Chromium) and typescript (tsc --noEmit), pinned
# Idempotent; a no-op taking well under a second when everything is in place.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup-js: '$1' is required but not installed" >&2; exit 1; }; }
need node
need npm

# --- Chromium ------------------------------------------------------------------------------------
if [[ ! -x /usr/bin/chromium ]]; then
  source "$root/scripts/apt-install.sh"
  apt_install setup-js chromium fonts-dejavu-core
fi

# --- npm packages ----------------------------------------------------------------------------------
# `npm install`, never `npm ci` (ci fails here on packages with platform-specific optional deps).
cd pkg-js
stamp="node_modules/.package-lock.json"
if ! [[ -f "$stamp" && "$stamp" -nt package.json && ( ! -f package-lock.json || "$stamp" -nt package-lock.json ) ]] ||
   ! [[ -f node_modules/playwright-core/package.json && -f node_modules/typescript/package.json ]]; then
  echo "setup-js: npm install in pkg-js"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
  touch "$stamp"
fi
