// The package as a new user gets it: `npm pack`, then a fresh directory with nothing but
// `npm install <tarball>` imports it from Node (translating a captured OpenAI stream) and from a
// browser page, and `tsc --noEmit` passes on a typed example program.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { fixturesDir, launchChromium, loadNativeDump, openPage, packageDir, repo, requireBuilt, serveStatic } from "./support.mjs";

requireBuilt();
const consumer = fileURLToPath(new URL("consumer/", import.meta.url));
const work = mkdtempSync(join(tmpdir(), "bridge-core-pack-"));
const app = join(work, "app");
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
let tarball;

before(() => {
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", work], packageDir));
  tarball = join(work, packed[0].filename);
  cpSync(consumer, app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "fresh-app", private: true, type: "module" }));
  run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", tarball], app);
});
after(() => rmSync(work, { recursive: true, force: true }));

test("the tarball holds the entries, the declarations and the wasm, nothing else", () => {
  const listed = JSON.parse(run("npm", ["pack", "--dry-run", "--json"], packageDir))[0].files.map((f) => f.path).sort();
  for (const file of ["package.json", "README.md", "node.js", "web.js", "node.d.ts", "web.d.ts", "error.d.ts", "bridge_core.js", "bridge_core.d.ts", "bridge_core_bg.wasm"]) {
    assert.ok(listed.includes(file), `${file} is missing from the tarball: ${listed}`);
  }
  assert.ok(listed.some((f) => /^snippets\/.*\/js\/error\.js$/.test(f)), "the error class snippet is missing");
  assert.deepEqual(listed.filter((f) => /test|\.ts$/.test(f) && !f.endsWith(".d.ts")), []);
  const installed = readdirSync(join(app, "node_modules/@fabstir/bridge-core"));
  assert.ok(installed.includes("bridge_core_bg.wasm"));
});

test("a fresh Node project imports it and translates a captured OpenAI stream", () => {
  const upstream = join(fixturesDir, "parallel_interleaved/upstream.sse");
  const request = join(fixturesDir, "parallel_interleaved/request.json");
  const out = JSON.parse(run("node", ["translate.mjs", upstream, request], app));
  assert.equal(out.upstream_model, "local-model");
  assert.equal(out.valid, true);
  // Byte for byte what the native core streams for this fixture (same seed, same estimate).
  const native = new Map(loadNativeDump().parallel_interleaved);
  const expected = native.get("stream chunk=all").replace(/\n--- finish\nstatus: 200\n/, "");
  assert.equal(out.sse, expected);
  const message = JSON.parse(out.folded.body);
  assert.equal(message.stop_reason, "tool_use");
  assert.equal(message.content.filter((b) => b.type === "tool_use").length, 2);
});

test("tsc --noEmit passes on the typed examples (Node and browser entries)", () => {
  const tsc = join(repo, "pkg-js/node_modules/typescript/bin/tsc");
  try {
    run("node", [tsc, "--noEmit", "-p", "tsconfig.json"], app);
  } catch (e) {
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
  }
});

test("the type check can fail: a wrong type in the example is reported", () => {
  const tsc = join(repo, "pkg-js/node_modules/typescript/bin/tsc");
  const broken = readFileSync(join(app, "example.ts"), "utf8").replace("const tokens: number = countTokens", "const tokens: string = countTokens");
  writeFileSync(join(app, "broken.ts"), broken);
  writeFileSync(join(app, "tsconfig.broken.json"), JSON.stringify({ extends: "./tsconfig.json", files: ["broken.ts"] }));
  assert.throws(() => run("node", [tsc, "--noEmit", "-p", "tsconfig.broken.json"], app), (e) => /TS2322/.test(e.stdout));
});

let server;
let browser;
test("a browser page imports the installed package by name (import map)", async () => {
  server = await serveStatic({ "/": app });
  browser = await launchChromium();
  const { page, problems } = await openPage(browser, `${server.url}/index.html`);
  await page.waitForFunction(() => window.result !== undefined, null, { timeout: 20_000 });
  const result = await page.evaluate(() => window.result);
  assert.equal(result.valid, true);
  assert.match(result.sse, /"text":"from the browser"/);
  assert.deepEqual(problems, []);
});
after(async () => {
  await browser?.close();
  await server?.close();
});
