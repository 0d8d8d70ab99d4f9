// The dashboard at /ui in headless Chromium (Debian's, via playwright-core), for
// tests/tests/e2e_dashboard.rs: signs in as the admin and as a key, reads each view, sends a
// request while Live is open and times how soon its row shows, and saves a screenshot of each
// view at 1280×800 (and the Now view at phone width). Prints what it saw as one JSON object.
//
// Usage: node dashboard_browser.mjs '{"base": "http://127.0.0.1:PORT", "admin": "…",
//        "alice": "…", "shots": "/dir/for/screenshots"}'
import { mkdirSync } from "node:fs";

import { launchChromium } from "./chromium.mjs";

const spec = JSON.parse(process.argv[2]);
const out = { problems: [], outside: [], error: null };
mkdirSync(spec.shots, { recursive: true });

const wait = (ms) => new Promise((ok) => setTimeout(ok, ms));

async function tableRows(page, id) {
  return page.$$eval(`#${id} tbody tr`, (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
}

async function signIn(page, key) {
  await page.goto(`${spec.base}/ui`);
  await page.waitForSelector("#signin:not([hidden])");
  await page.fill("#signin-key", key);
  await page.click("#signin-form button[type=submit]");
  await page.waitForSelector("#tabs:not([hidden])");
}

async function view(page, name) {
  await page.click(`.tab[data-view="${name}"]`);
  await page.waitForSelector(`#view-${name}:not([hidden])`);
}

async function visibleTabs(page) {
  return page.$$eval(".tab", (tabs) => tabs.filter((t) => !t.hidden).map((t) => t.dataset.view));
}

// Send a Messages request as `key` (from Node, as a client would) and return its request id
// and when its answer had been read to the end.
async function ask(key) {
  const response = await fetch(`${spec.base}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, "user-agent": "claude-cli/2.1.332 (external, cli)", "x-claude-code-session-id": "dash-live-session" },
    body: JSON.stringify({ model: "claude-sonnet-4-6", max_tokens: 64, stream: true, messages: [{ role: "user", content: "hi" }] }),
  });
  await response.text();
  return { id: response.headers.get("request-id"), endedAt: Date.now(), status: response.status };
}

let browser;
try {
  browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // Every request the page makes must stay on the bridge.
  context.on("request", (r) => {
    if (!r.url().startsWith(spec.base) && !r.url().startsWith("blob:") && !r.url().startsWith("data:")) out.outside.push(r.url());
  });
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") out.problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => out.problems.push(`page error: ${e.message}`));

  // ---- the admin ----
  const response = await page.goto(`${spec.base}/ui`);
  out.csp = response.headers()["content-security-policy"] ?? null;
  await signIn(page, spec.admin);
  out.admin = { tabs: await visibleTabs(page), who: await page.textContent("#who") };

  await view(page, "now");
  await page.waitForFunction(() => document.querySelector("#now-targets tbody tr") !== null);
  await page.waitForFunction(() => document.getElementById("now-config").textContent.length > 0);
  out.admin.now = {
    requests: await page.textContent("#now-requests"),
    errors: await page.textContent("#now-errors"),
    p50: await page.textContent("#now-p50"),
    targets: await tableRows(page, "now-targets"),
    config: await page.textContent("#now-config"),
    chartBars: await page.$$eval("#now-chart rect", (r) => r.length),
  };
  await page.screenshot({ path: `${spec.shots}/now-admin.png`, fullPage: false });

  await view(page, "spend");
  await page.waitForFunction(() => document.querySelector("#spend-table tbody tr") !== null);
  out.admin.spend = {
    rows: await tableRows(page, "spend-table"),
    cost: await page.textContent("#spend-cost"),
    tokens: await page.textContent("#spend-tokens"),
    requests: await page.textContent("#spend-requests"),
    budgets: await tableRows(page, "spend-budgets"),
    query: await page.evaluate(() => usageQuery()),
  };
  // What /v1/usage answers for the same query at the same moment (asked as a client would).
  const usageAnswer = await fetch(`${spec.base}${out.admin.spend.query}`, { headers: { "x-api-key": spec.admin } });
  out.admin.usage = { status: usageAnswer.status, body: await usageAnswer.json() };
  const csvAnswer = await fetch(`${spec.base}${out.admin.spend.query}&format=csv`, { headers: { "x-api-key": spec.admin } });
  out.admin.usageCsv = await csvAnswer.text();
  await page.screenshot({ path: `${spec.shots}/spend-admin.png` });
  // The CSV export downloads what /v1/usage gives as CSV.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#spend-csv")]);
  const csvPath = `${spec.shots}/usage.csv`;
  await download.saveAs(csvPath);
  out.admin.csvFile = csvPath;

  await view(page, "live");
  await page.waitForFunction(() => document.getElementById("live-state").textContent === "live");
  const backlog = (await tableRows(page, "live-table")).length;
  const sent = await ask(spec.alice);
  await page.waitForSelector(`#live-table tr[data-id="${sent.id}"]`, { timeout: 10000 });
  out.admin.live = { backlog, sent, shownAfterMs: Date.now() - sent.endedAt, row: await page.$eval(`#live-table tr[data-id="${sent.id}"]`, (r) => [...r.cells].map((c) => c.textContent)) };
  await page.screenshot({ path: `${spec.shots}/live-admin.png` });

  await view(page, "keys");
  await page.waitForFunction(() => document.querySelector("#keys-table tbody tr") !== null);
  const before = await tableRows(page, "keys-table");
  await page.fill("#keys-form input[name=name]", "carol");
  await page.fill("#keys-form input[name=budget_usd]", "2.5");
  await page.click("#keys-form button[type=submit]");
  await page.waitForSelector("#keys-secret:not([hidden])");
  const secret = await page.textContent("#keys-secret-value");
  await page.waitForFunction(() => [...document.querySelectorAll("#keys-table tbody tr td:first-child")].some((c) => c.textContent === "carol"));
  await page.screenshot({ path: `${spec.shots}/keys-admin.png` });
  await page.click("#keys-secret-done");
  out.admin.keys = { before: before.map((r) => r[0]), after: (await tableRows(page, "keys-table")).map((r) => r[0]), secret, secretHidden: await page.$eval("#keys-secret", (e) => e.hidden) };
  // Rotate carol's key (a new secret, shown once), then make dave and revoke him.
  const carolRow = () => page.locator("#keys-table tbody tr", { has: page.locator("td:first-child", { hasText: /^carol$/ }) });
  await carolRow().locator("button", { hasText: "Rotate" }).click();
  await page.waitForSelector("#keys-secret:not([hidden])");
  out.admin.keys.rotated = await page.textContent("#keys-secret-value");
  await page.click("#keys-secret-done");
  await page.fill("#keys-form input[name=name]", "dave");
  await page.click("#keys-form button[type=submit]");
  await page.waitForSelector("#keys-secret:not([hidden])");
  out.admin.keys.dave = await page.textContent("#keys-secret-value");
  await page.click("#keys-secret-done");
  page.once("dialog", (d) => d.accept());
  const daveRow = () => page.locator("#keys-table tbody tr", { has: page.locator("td:first-child", { hasText: /^dave$/ }) });
  await daveRow().locator("button", { hasText: "Revoke" }).click();
  await page.waitForFunction(() => [...document.querySelectorAll("#keys-table tbody tr")].some((r) => r.cells[0].textContent === "dave" && r.cells[10].textContent !== "–"));
  out.admin.keys.daveRow = (await tableRows(page, "keys-table")).find((r) => r[0] === "dave");

  // ---- a key that is not the admin ----
  await page.click("#signout");
  await signIn(page, spec.alice);
  out.alice = { tabs: await visibleTabs(page), who: await page.textContent("#who") };
  await view(page, "now");
  await page.waitForFunction(() => document.getElementById("now-requests").textContent !== "–");
  out.alice.now = { requests: await page.textContent("#now-requests"), adminHidden: await page.$eval("#now-admin", (e) => e.hidden), config: await page.textContent("#now-config") };
  await page.screenshot({ path: `${spec.shots}/now-alice.png` });
  await view(page, "spend");
  await page.waitForFunction(() => document.querySelector("#spend-table tbody tr") !== null);
  out.alice.spend = { rows: await tableRows(page, "spend-table"), cost: await page.textContent("#spend-cost"), budgets: await tableRows(page, "spend-budgets") };
  await page.screenshot({ path: `${spec.shots}/spend-alice.png` });
  await view(page, "live");
  await page.waitForFunction(() => document.getElementById("live-state").textContent === "live");
  await wait(300);
  out.alice.live = (await tableRows(page, "live-table")).map((r) => r[1]);
  await page.screenshot({ path: `${spec.shots}/live-alice.png` });
  // What the page would need for another key's data, asked directly with alice's key.
  const status = async (path) => (await fetch(`${spec.base}${path}`, { headers: { "x-api-key": spec.alice } })).status;
  out.alice.refused = { keys: await status("/admin/keys"), bobUsage: await status("/v1/usage?key=bob") };

  // ---- phone width ----
  await page.setViewportSize({ width: 390, height: 844 });
  await view(page, "now");
  await wait(300);
  out.phone = { scrollWidth: await page.evaluate(() => document.documentElement.scrollWidth) };
  await page.screenshot({ path: `${spec.shots}/now-phone.png` });
  await view(page, "spend");
  await wait(300);
  out.phone.spendScrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  await page.screenshot({ path: `${spec.shots}/spend-phone.png` });
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close();
}
console.log(JSON.stringify(out));
