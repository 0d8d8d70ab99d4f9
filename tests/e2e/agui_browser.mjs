// A web page's view of `agent/connect` for the end-to-end tests (tests/tests/e2e_agui.rs): headless
// Chromium (Debian's, via playwright-core) loads a page from a local dev server (its own origin,
// as a CopilotKit app in development has), which reconnects to a thread twice — with the
// browser's own fetch(), and with @ag-ui/client's HttpAgent (bundled for the browser by esbuild) —
// and prints what it saw as one JSON object.
//
// Usage: node agui_browser.mjs '{"base": "http://127.0.0.1:PORT", "threadId": "…"}'
import { createServer } from "node:http";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";
import { launchChromium } from "./chromium.mjs";

const spec = JSON.parse(process.argv[2]);
const out = { fetch: null, agent: null, error: null };
const here = dirname(fileURLToPath(import.meta.url));

let server;
let browser;
try {
  const bundle = await build({
    stdin: { contents: 'export { HttpAgent } from "@ag-ui/client";', resolveDir: here, loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "error",
  });
  const files = {
    "/": ["text/html", "<!doctype html><title>agui</title>"],
    "/agui.mjs": ["text/javascript", bundle.outputFiles[0].text],
  };
  server = createServer((req, res) => {
    const file = files[new URL(req.url, "http://x").pathname];
    res.writeHead(file ? 200 : 404, { "content-type": file ? file[0] : "text/plain" });
    res.end(file ? file[1] : "not found");
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const pageUrl = `http://127.0.0.1:${server.address().port}/`;

  browser = await launchChromium();
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  await page.goto(pageUrl);
  const seen = await page.evaluate(async ({ base, threadId }) => {
    // Each reconnect must end by itself: a replay that never ends is the failure looked for.
    const within = (ms, what, promise) =>
      Promise.race([promise, new Promise((_, fail) => setTimeout(() => fail(new Error(`${what} did not end within ${ms} ms`)), ms))]);
    const input = { threadId, runId: "browser-connect", state: {}, messages: [], tools: [], context: [], forwardedProps: {} };
    const response = await within(
      20000,
      "fetch()",
      fetch(`${base}/agent/default/connect`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(input),
      }).then(async (r) => ({ status: r.status, contentLength: r.headers.get("content-length"), text: await r.text() })),
    );
    const types = response.text
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => JSON.parse(l.slice(6)).type);
    const { HttpAgent } = await import("/agui.mjs");
    const agent = new HttpAgent({ url: `${base}/agent/default/connect`, threadId });
    const events = [];
    await within(20000, "HttpAgent", agent.runAgent({}, { onEvent: ({ event }) => events.push(event.type) }));
    return {
      fetch: { status: response.status, contentLength: response.contentLength, bytes: new TextEncoder().encode(response.text).length, types },
      agent: { events, messages: agent.messages.map((m) => ({ id: m.id, role: m.role, content: m.content })) },
      origin: location.origin,
    };
  }, spec);
  Object.assign(out, seen);
  out.problems = problems;
} catch (e) {
  out.error = String(e?.stack ?? e);
} finally {
  await browser?.close();
  server?.close();
}
process.stdout.write(JSON.stringify(out));
