// The claude-bridge dashboard (served at /ui by the binary; see host-native/src/dashboard).
// Plain browser JavaScript, no build step: it reads /ui/api/now, /ui/api/live (an event stream
// read with fetch, so the key travels in a header, never in a URL), /ui/api/me, /v1/usage and
// /admin/keys, with the key the user signed in with. Text from the bridge is only ever set as
// textContent; charts are SVG elements built here.
"use strict";

const KEY_STORE = "claude-bridge-key";
const SVG = "http://www.w3.org/2000/svg";
const state = { key: sessionStorage.getItem(KEY_STORE) || "", me: null, view: null, nowTimer: null, live: null };

const $ = (id) => document.getElementById(id);

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (state.key) h["x-api-key"] = state.key;
  return h;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({}, options || {}, { headers: headers((options || {}).headers) }));
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = text; }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `${response.status} ${text}`;
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return body;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "–" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

function usd(value) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(6);
}

function time(atMs) {
  return new Date(atMs).toISOString().replace("T", " ").slice(0, 19);
}

// ---- sign-in and navigation -------------------------------------------------------------

async function start() {
  $("signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("signin-key").value.trim()); });
  $("signout").addEventListener("click", () => { sessionStorage.removeItem(KEY_STORE); state.key = ""; location.reload(); });
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));
  $("spend-form").addEventListener("submit", (e) => { e.preventDefault(); loadSpend(); });
  $("spend-csv").addEventListener("click", exportCsv);
  $("keys-form").addEventListener("submit", (e) => { e.preventDefault(); createKey(e.target); });
  $("keys-secret-done").addEventListener("click", () => { $("keys-secret").hidden = true; $("keys-secret-value").textContent = ""; });
  const today = new Date().toISOString().slice(0, 10);
  $("spend-to").value = today;
  $("spend-from").value = new Date(Date.now() - 6 * 86400000).toISOString().slice(0, 10);
  await signIn(state.key);
}

async function signIn(key) {
  state.key = key;
  let refused = "";
  try {
    state.me = await api("/ui/api/me");
  } catch (e) {
    state.me = null;
    refused = e.message;
  }
  if (!state.me || state.me.needs_key) {
    $("signin").hidden = false;
    $("tabs").hidden = true;
    for (const section of document.querySelectorAll(".view")) section.hidden = true;
    $("signin-error").textContent = refused;
    return;
  }
  if (key) sessionStorage.setItem(KEY_STORE, key);
  $("signin").hidden = true;
  $("tabs").hidden = false;
  $("signout").hidden = !key;
  $("who").textContent = state.me.role === "admin" ? `admin${state.me.key && state.me.key !== "admin" ? ` (${state.me.key})` : ""}` : `key ${state.me.key}`;
  for (const tab of document.querySelectorAll(".tab")) {
    const needs = tab.dataset.needs;
    tab.hidden = (needs === "gateway" && !state.me.gateway) || (needs === "admin-gateway" && !(state.me.gateway && state.me.role === "admin"));
  }
  const wanted = location.hash.slice(1);
  const tab = document.querySelector(`.tab[data-view="${wanted}"]`);
  show(tab && !tab.hidden ? wanted : "now");
}

function show(view) {
  state.view = view;
  history.replaceState(null, "", `#${view}`);
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  clearInterval(state.nowTimer);
  if (view === "now") { loadNow(); state.nowTimer = setInterval(loadNow, 5000); }
  if (view === "live") openLive();
  if (view === "spend") loadSpend();
  if (view === "keys") loadKeys();
}

// ---- Now ---------------------------------------------------------------------------------

async function loadNow() {
  let now;
  try { now = await api("/ui/api/now"); } catch (e) { $("now-reload").textContent = e.message; return; }
  const hour = now.hour;
  $("now-rate").textContent = hour.per_second.toFixed(2);
  $("now-requests").textContent = hour.requests;
  $("now-errors").textContent = hour.errors;
  $("now-p50").textContent = ms(hour.ttft_p50_ms);
  $("now-p99").textContent = ms(hour.ttft_p99_ms);
  minuteChart($("now-chart"), hour.minutes);
  const body = $("now-targets").tBodies[0];
  body.replaceChildren();
  for (const [target, t] of Object.entries(now.targets)) {
    const row = body.insertRow();
    cell(row, target);
    cell(row, t.provider);
    cell(row, t.circuit, t.circuit === "closed" ? "closed" : "open");
    cell(row, t.load.in_flight);
    cell(row, t.load.queued);
    cell(row, ms(t.load.latency_ewma_ms));
    cell(row, t.answered);
    cell(row, t.failed);
    cell(row, t.last_error, t.last_error ? "msg" : "");
  }
  $("now-admin").hidden = now.config === undefined;
  if (now.config !== undefined) {
    $("now-config-file").textContent = now.config.file || "(flags, no file)";
    $("now-config").textContent = now.config.text || "";
    const r = now.reload;
    $("now-reload").textContent = r ? `${time(r.at_ms)} (${r.why}): ${r.ok ? `reloaded, targets ${r.targets.join(", ")}` : `not reloaded: ${r.error}`}` : "none since start";
  }
}

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

// Bars for requests per minute (failed ones in red on top), a line for TTFT p50.
function minuteChart(box, minutes) {
  const W = 600, H = 160, pad = 22;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "requests per minute" });
  const most = Math.max(1, ...minutes.map((m) => m.requests));
  const slowest = Math.max(1, ...minutes.map((m) => m.ttft_p50_ms || 0));
  const w = (W - pad) / minutes.length;
  const points = [];
  minutes.forEach((m, i) => {
    const x = pad + i * w;
    const okH = ((m.requests - m.errors) / most) * (H - pad);
    const errH = (m.errors / most) * (H - pad);
    svg("rect", { class: "bar", x, y: H - pad - okH, width: Math.max(1, w - 1), height: okH }, root);
    if (m.errors) svg("rect", { class: "bar err", x, y: H - pad - okH - errH, width: Math.max(1, w - 1), height: errH }, root);
    if (m.ttft_p50_ms !== null) points.push(`${x + w / 2},${H - pad - (m.ttft_p50_ms / slowest) * (H - pad)}`);
  });
  if (points.length > 1) svg("polyline", { class: "line", points: points.join(" ") }, root);
  svg("text", { x: 0, y: 10 }, root).textContent = String(most);
  svg("text", { x: pad, y: H - 6 }, root).textContent = "−60 min";
  svg("text", { x: W - 30, y: H - 6 }, root).textContent = "now";
  box.replaceChildren(root);
}

// ---- Live --------------------------------------------------------------------------------

function liveRow(f) {
  const row = document.createElement("tr");
  row.dataset.id = f.id;
  if (f.error || f.status >= 400) row.className = "failed";
  cell(row, time(f.at_ms));
  cell(row, f.key);
  cell(row, f.client);
  cell(row, f.route);
  cell(row, f.target);
  cell(row, `${f.input_tokens ?? "–"} / ${f.output_tokens ?? "–"}`);
  cell(row, usd(f.cost_usd));
  cell(row, ms(f.ttft_ms));
  cell(row, f.error ? `${f.status} ${f.error}` : f.status);
  cell(row, f.message, f.message ? "msg" : "");
  return row;
}

async function openLive() {
  if (state.live) return;
  const controller = new AbortController();
  state.live = controller;
  const body = $("live-table").tBodies[0];
  body.replaceChildren();
  $("live-state").textContent = "connecting…";
  try {
    const response = await fetch("/ui/api/live", { headers: headers(), signal: controller.signal });
    if (!response.ok) throw new Error(`${response.status}`);
    $("live-state").textContent = "live";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const kind = (event.match(/^event: (.*)$/m) || [])[1];
        const data = (event.match(/^data: (.*)$/m) || [])[1];
        if (kind === "request" && data) {
          body.insertBefore(liveRow(JSON.parse(data)), body.firstChild);
          while (body.rows.length > 200) body.deleteRow(-1);
        }
      }
    }
  } catch (e) {
    if (controller.signal.aborted) return;
    $("live-state").textContent = `disconnected (${e.message}); reconnecting`;
  }
  state.live = null;
  setTimeout(() => { if (state.view === "live") openLive(); }, 2000);
}

// ---- Spend -------------------------------------------------------------------------------

function nextDay(date) {
  return new Date(Date.parse(`${date}T00:00:00Z`) + 86400000).toISOString().slice(0, 10);
}

function usageQuery(format) {
  const from = $("spend-from").value;
  const to = nextDay($("spend-to").value);
  return `/v1/usage?group_by=key,model,day&from=${from}&to=${to}${format ? `&format=${format}` : ""}`;
}

async function loadSpend() {
  const [usage, me] = await Promise.all([api(usageQuery()), api("/ui/api/me")]);
  const rows = usage.rows;
  const sum = (f) => rows.reduce((a, r) => a + f(r), 0);
  $("spend-cost").textContent = usd(sum((r) => r.cost_usd));
  $("spend-tokens").textContent = sum((r) => r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens);
  $("spend-requests").textContent = sum((r) => r.requests);
  const body = $("spend-table").tBodies[0];
  body.replaceChildren();
  for (const r of rows) {
    const row = body.insertRow();
    for (const v of [r.key, r.model, r.day, r.requests, r.errors, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens, usd(r.cost_usd)]) cell(row, v);
  }
  const budgets = $("spend-budgets").tBodies[0];
  budgets.replaceChildren();
  for (const b of me.budgets) {
    const row = budgets.insertRow();
    const amount = (v) => (b.metric === "usd" ? `$${Number(v).toFixed(4)}` : `${v} tokens`);
    cell(row, b.key);
    cell(row, amount(b.limit));
    cell(row, b.period);
    cell(row, amount(b.spent));
    cell(row, amount(b.left));
    cell(row, b.resets || "never");
  }
  const byDay = new Map();
  for (const r of rows) byDay.set(r.day, (byDay.get(r.day) || 0) + r.cost_usd);
  dayChart($("spend-chart"), [...byDay.entries()].sort());
}

function dayChart(box, days) {
  const W = 600, H = 160, pad = 22;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "cost per day" });
  const most = Math.max(1e-9, ...days.map(([, c]) => c));
  const w = (W - pad) / Math.max(1, days.length);
  days.forEach(([day, cost], i) => {
    const h = (cost / most) * (H - 2 * pad);
    svg("rect", { class: "bar", x: pad + i * w + 2, y: H - pad - h, width: Math.max(1, w - 4), height: h }, root);
    svg("text", { x: pad + i * w + 2, y: H - 6 }, root).textContent = day.slice(5);
  });
  svg("text", { x: 0, y: 10 }, root).textContent = `$${most.toFixed(4)}`;
  box.replaceChildren(root);
}

async function exportCsv() {
  const response = await fetch(usageQuery("csv"), { headers: headers() });
  const blob = await response.blob();
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = `usage-${$("spend-from").value}-${$("spend-to").value}.csv`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// ---- Keys --------------------------------------------------------------------------------

async function loadKeys() {
  const body = $("keys-table").tBodies[0];
  let listing;
  try { listing = await api("/admin/keys"); } catch (e) { $("keys-error").textContent = e.message; return; }
  body.replaceChildren();
  for (const k of listing.keys) {
    const row = body.insertRow();
    for (const v of [k.name, (k.targets || []).join(", ") || "all", k.rpm, k.tpm, k.max_parallel,
      [k.budget_usd !== undefined ? `$${k.budget_usd}` : null, k.budget_tokens !== undefined ? `${k.budget_tokens} tokens` : null].filter(Boolean).join(", ") || null,
      k.budget_period, k.expires, k.source, k.created, k.revoked]) cell(row, v);
    const actions = cell(row, "");
    if (k.source !== "config" && !k.revoked) {
      for (const [label, act] of [["Rotate", rotateKey], ["Revoke", revokeKey]]) {
        const b = document.createElement("button");
        b.textContent = label;
        b.addEventListener("click", () => act(k.name));
        actions.appendChild(b);
      }
    }
  }
}

function showSecret(answer) {
  $("keys-secret-name").textContent = answer.name;
  $("keys-secret-value").textContent = answer.key;
  $("keys-secret").hidden = false;
}

async function createKey(form) {
  $("keys-error").textContent = "";
  const spec = {};
  for (const [name, value] of new FormData(form).entries()) {
    if (value === "") continue;
    if (name === "targets") spec.targets = value.split(",").map((t) => t.trim()).filter(Boolean);
    else if (["rpm", "tpm", "max_parallel", "budget_tokens"].includes(name)) spec[name] = parseInt(value, 10);
    else if (name === "budget_usd") spec[name] = parseFloat(value);
    else spec[name] = value;
  }
  try {
    showSecret(await api("/admin/keys", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(spec) }));
    form.reset();
  } catch (e) { $("keys-error").textContent = e.message; }
  loadKeys();
}

async function rotateKey(name) {
  try { showSecret(await api(`/admin/keys/${encodeURIComponent(name)}/rotate`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })); } catch (e) { $("keys-error").textContent = e.message; }
  loadKeys();
}

async function revokeKey(name) {
  if (!confirm(`Revoke the key ${name}? Clients using it are refused from now on.`)) return;
  try { await api(`/admin/keys/${encodeURIComponent(name)}`, { method: "DELETE" }); } catch (e) { $("keys-error").textContent = e.message; }
  loadKeys();
}

start();
