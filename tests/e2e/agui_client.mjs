// An AG-UI front end for the end-to-end tests (tests/tests/e2e_agui.rs): @ag-ui/client's HttpAgent
// against `claude-bridge agui`, acting as a web app would. It runs one or more runs of a thread,
// answers tool approval requests through the bridge's management API, can stop a run, runs
// frontend tools it registered, and prints what it saw as one JSON object.
//
// Usage: node agui_client.mjs '<spec json>'
//   spec: { base, threadId, prompt, tools?, context?, forwardedProps?,
//           approval?: "allow" | "deny", stopAfterFirstText?: bool,
//           frontendResults?: { [toolName]: string }, connectAfter?: bool }
import { HttpAgent } from "@ag-ui/client";

const spec = JSON.parse(process.argv[2]);
const out = { runs: [], approvals: [], stops: [], connect: null, error: null };

async function post(path, body) {
  const r = await fetch(spec.base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body ?? {}),
  });
  return { status: r.status, body: await r.text() };
}

function subscriber(run) {
  let stopped = false;
  return {
    async onEvent({ event }) {
      run.events.push(event);
      if (event.type === "CUSTOM" && event.name === "tool_approval_request" && spec.approval) {
        const { requestId, input } = event.value;
        const answer =
          spec.approval === "allow"
            ? { behavior: "allow", updatedInput: input }
            : { behavior: "deny", message: "Not on my machine, thanks." };
        // The call waits in the management API's list; answering it lets Claude Code go on.
        const listed = await (await fetch(`${spec.base}/approvals`)).json();
        const waiting = listed.pending.some((p) => p.requestId === requestId && p.threadId === spec.threadId);
        out.approvals.push({ requestId, toolName: event.value.toolName, waiting, ...(await post(`/approvals/${requestId}`, answer)) });
      }
      if (event.type === "TEXT_MESSAGE_CONTENT" && spec.stopAfterFirstText && !stopped) {
        stopped = true;
        out.stops.push(await post(`/agent/default/stop/${encodeURIComponent(spec.threadId)}`));
      }
    },
  };
}

async function runOnce(agent, params) {
  const run = { events: [], error: null };
  out.runs.push(run);
  try {
    await agent.runAgent(params, subscriber(run));
  } catch (e) {
    run.error = String(e?.message ?? e);
  }
}

try {
  const agent = new HttpAgent({ url: `${spec.base}/agent/default/run`, threadId: spec.threadId });
  agent.addMessage({ id: "user-1", role: "user", content: spec.prompt });
  const params = { tools: spec.tools ?? [], context: spec.context ?? [], forwardedProps: spec.forwardedProps ?? {} };
  await runOnce(agent, params);
  // A run that ended with calls of our frontend tools: run them, answer in the next run.
  for (let round = 0; round < 3 && spec.frontendResults; round++) {
    const last = agent.messages[agent.messages.length - 1];
    const calls = (last?.role === "assistant" ? last.toolCalls ?? [] : []).filter((c) => c.function.name in spec.frontendResults);
    if (calls.length === 0) break;
    for (const call of calls) {
      agent.addMessage({ id: `tool-${call.id}`, role: "tool", toolCallId: call.id, content: spec.frontendResults[call.function.name] });
    }
    await runOnce(agent, params);
  }
  out.messages = agent.messages;
  if (spec.connectAfter) {
    // A fresh client of the same thread gets the history again.
    const fresh = new HttpAgent({ url: `${spec.base}/agent/default/connect`, threadId: spec.threadId });
    const run = { events: [], error: null };
    try {
      await fresh.runAgent({}, { onEvent: ({ event }) => { run.events.push(event); } });
    } catch (e) {
      run.error = String(e?.message ?? e);
    }
    // The thread as the fresh client redraws it: both sides.
    run.messages = fresh.messages;
    out.connect = run;
  }
} catch (e) {
  out.error = String(e?.stack ?? e);
}
process.stdout.write(JSON.stringify(out));
