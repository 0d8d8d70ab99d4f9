// The same golden-fixture suite in headless Chromium: the package's browser entry (`web.js`,
// `init()` fetching the .wasm) must give the native core's bytes for every fixture.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { compareParts } from "./harness.mjs";
import { launchChromium, loadAnthropicFixtures, loadFabstirFixtures, loadFixtures, loadFrontFixtures, loadNativeDump, loadResponsesFixtures, openPage, packageDir, requireBuilt, serveStatic, toBase64 } from "./support.mjs";

requireBuilt();
const fixtures = [...loadFixtures(), ...loadResponsesFixtures(), ...loadAnthropicFixtures(), ...loadFrontFixtures()];
const fabstir = loadFabstirFixtures();
const native = loadNativeDump();
const testsDir = fileURLToPath(new URL(".", import.meta.url));

let server;
let browser;
before(async () => {
  server = await serveStatic({ "/pkg/": packageDir, "/tests/": testsDir });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

test("Chromium gives the native bytes for every fixture", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/tests/blank.html`);
  const encode = ({ name, files }) => ({ name, files: Object.fromEntries(Object.entries(files).map(([k, v]) => [k, toBase64(v)])) });
  const input = { openai: fixtures.map(encode), fabstir: fabstir.map(encode) };
  const results = await page.evaluate(async (cases) => {
    const core = await import("/pkg/web.js");
    await core.init();
    const { dialectOf, runCase, runFabstirCase } = await import("/tests/harness.mjs");
    const bytes = (b64) => (b64 === undefined || b64 === null ? undefined : Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
    const decode = (files) => Object.fromEntries(Object.entries(files).map(([k, v]) => [k, bytes(v)]));
    const out = {};
    for (const c of cases.openai) out[c.name] = runCase(core, decode(c.files), dialectOf(c.name));
    for (const c of cases.fabstir) out[c.name] = runFabstirCase(core, decode(c.files));
    return { out, userAgent: navigator.userAgent };
  }, input);
  assert.match(results.userAgent, /Chrome/);
  const failures = [...fixtures, ...fabstir].flatMap(({ name }) => compareParts(name, native[name], results.out[name]));
  assert.equal(failures.length, 0, failures.join("\n"));
  assert.deepEqual(problems, []);
  await page.close();
});

test("in Chromium a bad request is a BridgeCoreError too", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/tests/blank.html`);
  const caught = await page.evaluate(async () => {
    const core = await import("/pkg/web.js");
    await core.init();
    try {
      core.prepare("openai_chat", '{"model":"m","max_tokens":1}');
      return null;
    } catch (e) {
      return { instance: e instanceof core.BridgeCoreError, kind: e.kind, status: e.status, message: e.message };
    }
  });
  assert.deepEqual({ ...caught, message: undefined }, { instance: true, kind: "invalid_request_error", status: 400, message: undefined });
  assert.match(caught.message, /messages/);
  assert.deepEqual(problems, []);
  await page.close();
});
