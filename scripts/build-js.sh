#!/usr/bin/env bash
# Builds the npm package @fabstir/bridge-core into pkg-js/dist/package and the playground into
# pkg-js/dist/playground (make js). The glue comes from the workspace's bridge-bindgen (the
# library wasm-bindgen-cli wraps); BRIDGE_BINDGEN names an already built one (make test-js).
# JS_PROFILE picks the cargo profile: `js` (the default, what is published) or `js-test`
# (make test-js: the same package without LTO, quicker to build). `--wasm-only` stops after the
# cargo build (make test-js-wasm: the .wasm built ahead, with the very same cargo command).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo="${CARGO:-cargo}"

# 1. The facade crate for the browser target, in the `js` profile (see Cargo.toml).
profile="${JS_PROFILE:-js}"
"$cargo" build -p bridge-core-js --target wasm32-unknown-unknown --profile "$profile"
wasm="$target_dir/wasm32-unknown-unknown/$profile/bridge_core_js.wasm"
[[ "${1:-}" == "--wasm-only" ]] && exit 0

# 2. wasm-bindgen's ESM glue (`--target web`: works in browsers, and in Node through node.js).
out="$root/pkg-js/dist/package"
rm -rf "$out"
mkdir -p "$out"
bindgen="${BRIDGE_BINDGEN:-}"
if [[ -z "$bindgen" ]]; then
  "$cargo" build -q -p bridge-bindgen
  bindgen="$target_dir/debug/bridge-bindgen"
fi
"$bindgen" "$wasm" "$out"

# wasm-bindgen declares `[Symbol.dispose]()` on every class; make the declarations load the lib
# that defines it, so a consumer's tsc passes whatever its `lib` setting (Node >= 20 has it).
sed -i '1i /// <reference lib="esnext.disposable" />' "$out/bridge_core.d.ts"

# 3. The entries, declarations, README and package.json (version from the workspace).
cp pkg-js/package/{node.js,web.js,node.d.ts,web.d.ts,error.d.ts,README.md} "$out/"
error_js="$(cd "$out" && ls snippets/*/js/error.js)"
sed -i "s|@ERROR_JS@|$error_js|" "$out/node.js" "$out/web.js"
version="$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)"
node -e '
  const [file, version] = process.argv.slice(1);
  const fs = require("node:fs");
  const pkg = JSON.parse(fs.readFileSync("pkg-js/package/package.json", "utf8"));
  pkg.version = version;
  fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
' "$out/package.json" "$version"

# 4. The playground: static files + a copy of the package + samples from the golden fixtures.
pg="$root/pkg-js/dist/playground"
rm -rf "$pg"
mkdir -p "$pg"
cp pkg-js/playground/{index.html,style.css,playground.js} "$pg/"
cp -r "$out" "$pg/bridge-core"
node pkg-js/playground/make-samples.mjs tests/fixtures "$pg/samples.json"

raw=$(stat -c %s "$out/bridge_core_bg.wasm")
gz=$(gzip -9 -c "$out/bridge_core_bg.wasm" | wc -c)
echo "js: @fabstir/bridge-core $version -> $out (bridge_core_bg.wasm: $raw bytes, $gz gzipped)"
echo "js: playground -> $pg (serve it: python3 -m http.server -d $pg 8080)"
