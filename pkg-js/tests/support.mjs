// Test support for the @fabstir/bridge-core suites: where things are, the golden fixtures, the
// native reference, a static file server on 127.0.0.1 and headless Chromium.
import { existsSync, readFileSync, readdirSync, statSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = resolve(fileURLToPath(new URL("../..", import.meta.url)));
export const targetDir = resolve(repo, process.env.CARGO_TARGET_DIR ?? "target");
/** The built package (`make js`). */
export const packageDir = resolve(process.env.BRIDGE_CORE_PKG ?? join(repo, "pkg-js/dist/package"));
export const playgroundDir = join(repo, "pkg-js/dist/playground");
export const fixturesDir = resolve(process.env.BRIDGE_FIXTURES_DIR ?? join(repo, "tests/fixtures"));
/** Screenshots and other things a person may want to look at after a run. */
export const outputDir = join(targetDir, "js-test");
mkdirSync(outputDir, { recursive: true });

export function requireBuilt() {
  if (!existsSync(join(packageDir, "node.js"))) {
    throw new Error(`the package is not built at ${packageDir}: run \`make js\` first`);
  }
}

/**
 * The fixture cases under `dir`: directories holding one of `markers`, as
 * [{ name: prefix + dir name, files }], sorted; `files` maps each key to its file's bytes (or undefined).
 */
function loadCases(dir, markers, files, prefix = "") {
  const read = (file) => (existsSync(file) ? new Uint8Array(readFileSync(file)) : undefined);
  const cases = readdirSync(dir)
    .filter((name) => markers.some((marker) => existsSync(join(dir, name, marker))))
    .sort()
    .map((name) => ({
      name: `${prefix}${name}`,
      files: Object.fromEntries(Object.entries(files).map(([key, file]) => [key, read(join(dir, name, file))])),
    }));
  if (cases.length === 0) throw new Error(`no fixtures under ${dir}`);
  return cases;
}

/** The golden fixture cases: [{ name, files: { request, options, upstream } }], sorted. */
export function loadFixtures() {
  return loadCases(fixturesDir, ["request.json", "upstream.sse"], { request: "request.json", options: "options.json", upstream: "upstream.sse" });
}

/** The OpenAI Responses cases: [{ name: "responses/<case>", files: { request, options, upstream } }]. */
export function loadResponsesFixtures() {
  return loadCases(join(fixturesDir, "responses"), ["request.json", "upstream.sse"], { request: "request.json", options: "options.json", upstream: "upstream.sse" }, "responses/");
}

/** The Anthropic pass-through cases: [{ name: "anthropic/<case>", files }]. */
export function loadAnthropicFixtures() {
  return loadCases(join(fixturesDir, "anthropic"), ["request.json", "upstream.sse"], { request: "request.json", options: "options.json", upstream: "upstream.sse" }, "anthropic/");
}

/** The OpenAI fronts' cases: [{ name: "front_chat/<case>" or "front_responses/<case>", files }]. */
export function loadFrontFixtures() {
  const files = { request: "request.json", options: "options.json", upstream: "upstream.sse" };
  return ["front_chat", "front_responses"].flatMap((folder) =>
    loadCases(join(fixturesDir, folder), ["request.json", "upstream.sse"], files, `${folder}/`),
  );
}

export { dialectOf } from "./harness.mjs";

/** The raw-text (Fabstir) cases: [{ name: "fabstir/<case>", files: { request, options, tokens, end, fail } }]. */
export function loadFabstirFixtures() {
  const files = Object.fromEntries(["request", "options", "tokens", "end", "fail", "session_init"].map((f) => [f, `${f}.json`]));
  return loadCases(join(fixturesDir, "fabstir"), ["tokens.json"], files, "fabstir/");
}

/** The native core's outputs, written by `conformance-dump` in the same `make test` run. */
export function loadNativeDump() {
  const path = process.env.BRIDGE_NATIVE_DUMP ?? join(outputDir, "native-conformance.json");
  if (!existsSync(path)) {
    throw new Error(`no native reference at ${path}: run \`cargo run -p bridge-tests --bin conformance-dump -- ${path}\` (make test-js does)`);
  }
  return JSON.parse(readFileSync(path, "utf8"));
}

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".sse": "text/plain; charset=utf-8",
  ".png": "image/png",
};

/**
 * Serve directories read-only on 127.0.0.1 (ephemeral port): `mounts` maps a URL prefix
 * ("/pkg/") to a directory. Returns { url, close }.
 */
export async function serveStatic(mounts) {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    for (const [prefix, dir] of Object.entries(mounts)) {
      if (!path.startsWith(prefix)) continue;
      let file = normalize(join(dir, path.slice(prefix.length)));
      if (!file.startsWith(resolve(dir) + sep) && file !== resolve(dir)) break;
      if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
      if (!existsSync(file)) break;
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
      res.end(readFileSync(file));
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" });
    res.end(`not found: ${path}`);
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((ok) => server.close(ok)),
  };
}

/** Headless Chromium (Debian's `chromium`, installed by scripts/setup-js.sh) via playwright-core. */
export async function launchChromium() {
  const { chromium } = await import("playwright-core");
  const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium not found at ${executablePath}: run scripts/setup-js.sh (make setup)`);
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

/** Open `url` in a new page; page errors and console errors fail the returned check. */
export async function openPage(browser, url) {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  await page.goto(url);
  return { page, problems };
}

/** Base64 of bytes (to hand fixture files to a page). */
export const toBase64 = (bytes) => (bytes ? Buffer.from(bytes).toString("base64") : undefined);
