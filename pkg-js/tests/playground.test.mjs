// The playground as a person uses it, in headless Chromium: pick a fixture, translate, read the
// events, the folded message and the validator's verdict; paste a broken Anthropic stream and see
// the complaint. Screenshots land in target/js-test/.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { launchChromium, loadNativeDump, openPage, outputDir, playgroundDir, requireBuilt, serveStatic } from "./support.mjs";

requireBuilt();
if (!existsSync(join(playgroundDir, "index.html"))) throw new Error(`no playground at ${playgroundDir}: run \`make js\``);
const native = loadNativeDump();

let server;
let browser;
before(async () => {
  server = await serveStatic({ "/": playgroundDir });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

async function ready(page) {
  await page.waitForSelector("body[data-ready=true]", { timeout: 20_000 });
  assert.equal(await page.isEnabled("#run"), true);
}

test("a picked fixture is translated: events, folded message, a valid verdict", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/`);
  await page.setViewportSize({ width: 1400, height: 1000 });
  await ready(page);
  await page.selectOption("#sample", "parallel_interleaved");
  await page.waitForFunction(() => document.querySelector("#status").classList.contains("valid"));

  const parts = new Map(native.parallel_interleaved);
  const sse = parts.get("stream chunk=all").replace(/\n--- finish\nstatus: 200\n/, "");
  const [, status, body] = parts.get("folded chunk=all").match(/^\n--- finish\nstatus: (\d+)\n([\s\S]*)$/);

  // The seed field defaults to the one the native reference used, so the bytes are the same.
  assert.equal(await page.textContent("#sse"), sse);
  assert.equal(await page.textContent("#message"), `status ${status}\n${JSON.stringify(JSON.parse(body), null, 2)}`);
  const eventCount = (sse.match(/^event: /gm) ?? []).length;
  assert.equal(await page.locator("#events li").count(), eventCount);
  assert.match(await page.textContent("#status"), new RegExp(`valid Anthropic stream: ${eventCount} events, stop_reason tool_use`));
  const rows = await page.locator("#events li").allTextContents();
  assert.equal(rows.filter((r) => /^content_block_start \[\d\] tool_use Bash/.test(r)).length, 2, rows.join("\n"));
  assert.match(await page.textContent("#upstream-request"), /"tool_calls"|"tools"/);
  await page.screenshot({ path: join(outputDir, "playground-translate.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a pasted broken Anthropic stream gets the validator's complaint", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/`);
  await page.setViewportSize({ width: 1400, height: 900 });
  await ready(page);
  await page.selectOption("#mode", "anthropic");
  assert.equal(await page.isVisible("#request"), false, "the request field only belongs to the Chat mode");
  assert.equal(await page.textContent("#run"), "Check");
  const ev = (e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
  const broken = [
    { type: "message_start", message: { id: "msg_x", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } } },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
  ].map(ev).join("");
  await page.fill("#stream", broken);
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#status").classList.contains("invalid"));
  assert.equal(await page.textContent("#status"), "✗ event #2 (content_block_start): block 1 opened while block 0 is open");
  assert.equal(await page.locator("#events li.bad").count(), 1);
  assert.match(await page.textContent("#message"), /^status 500\n[\s\S]*ended before the message was complete/);
  await page.screenshot({ path: join(outputDir, "playground-violation.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});

test("a request the core refuses shows its error, not a blank page", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/`);
  await ready(page);
  await page.fill("#request", '{"model":"m","max_tokens":10}');
  await page.fill("#stream", 'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#status").classList.contains("error"));
  assert.match(await page.textContent("#status"), /^✗ invalid_request_error \(400\): .*messages/);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a Fabstir host's raw reply: the ChatML prompt and the tool calls parsed out of the text", async () => {
  const { page, problems } = await openPage(browser, `${server.url}/`);
  await page.setViewportSize({ width: 1400, height: 1000 });
  await ready(page);
  await page.selectOption("#mode", "fabstir");
  await page.selectOption("#sample", "json_tool_call_split");
  await page.waitForFunction(() => document.querySelector("#status").classList.contains("valid"));
  assert.match(await page.textContent("#status"), /stop_reason tool_use/);
  const rows = await page.locator("#events li").allTextContents();
  assert.ok(rows.some((r) => /^content_block_start \[0\] thinking/.test(r)), rows.join("\n"));
  assert.ok(rows.some((r) => /^content_block_start \[2\] tool_use Bash/.test(r)), rows.join("\n"));
  const message = await page.textContent("#message");
  assert.match(message, /"command": "ls -la"/);
  assert.match(await page.textContent("#upstream-request"), /^<\|im_start\|>system\n[\s\S]*<tool_call>[\s\S]*<\|im_start\|>assistant\n$/);
  await page.screenshot({ path: join(outputDir, "playground-fabstir.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await page.close();
});
