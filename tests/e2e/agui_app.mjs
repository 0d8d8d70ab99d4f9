// A scripted AG-UI web app for the end-to-end tests of Claude Code's control surface
// (tests/tests/e2e_agui.rs): @ag-ui/client's HttpAgent runs a thread against `claude-bridge agui`,
// and between runs the app uses the bridge's management API (initialize, control requests, hooks,
// session info). It runs the steps in order and prints what each one saw as one JSON object.
//
// Usage: node agui_app.mjs '<spec json>'
//   spec: { base, threadId, steps: [step], sdkServer?: { name, tools: [{name, description, inputSchema}],
//           results: { [toolName]: string } } }   (an MCP server the app hosts, answered through
//           GET/POST /mcp-requests for as long as the script runs)
//   step: { op: "initialize", body }                       POST /sessions/{threadId}/initialize
//       | { op: "run", prompt, messageId?, tools?, approval?: "allow" | "deny",
//           hookAnswer?: object, frontendResults?: { [toolName]: string } }
//       | { op: "control", body }                          POST /sessions/{threadId}/control
//       | { op: "get", path }                              GET {path} ("{threadId}" is replaced)
import { HttpAgent } from "@ag-ui/client";

const spec = JSON.parse(process.argv[2]);
const thread = encodeURIComponent(spec.threadId);
const out = { steps: [], sdkRequests: [], error: null };

async function call(method, path, body) {
  const r = await fetch(spec.base + path.replaceAll("{threadId}", thread), {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, body: json ?? text };
}

function subscriber(step, run) {
  return {
    async onEvent({ event }) {
      run.events.push(event);
      if (event.type !== "CUSTOM") return;
      if (event.name === "tool_approval_request" && step.approval) {
        const { requestId, input } = event.value;
        const answer =
          step.approval === "allow" ? { behavior: "allow", updatedInput: input } : { behavior: "deny", message: "No." };
        run.approvals.push({ requestId, toolName: event.value.toolName, ...(await call("POST", `/approvals/${requestId}`, answer)) });
      }
      const request = event.value?.request;
      if (event.name === "claude_code_control_request" && request?.subtype === "hook_callback" && step.hookAnswer) {
        // The call is listed by the management API; the app answers it there.
        const listed = (await call("GET", "/hooks")).body.pending ?? [];
        const hook = listed.find((h) => h.requestId === event.value.request_id);
        run.hooks.push({ listed: hook ?? null, ...(await call("POST", `/hooks/${event.value.request_id}`, step.hookAnswer)) });
      }
    },
  };
}

async function runOnce(agent, step, params) {
  const run = { events: [], approvals: [], hooks: [], error: null };
  try {
    await agent.runAgent(params, subscriber(step, run));
  } catch (e) {
    run.error = String(e?.message ?? e);
  }
  return run;
}

// The app's own MCP server: Claude Code's requests for it wait in the bridge until answered.
let serving = true;
async function serveSdk(server) {
  while (serving) {
    const listed = (await call("GET", "/mcp-requests")).body.pending ?? [];
    for (const request of listed) {
      if (request.serverName !== server.name || request.threadId !== spec.threadId) continue;
      const { id, method, params } = request.message;
      out.sdkRequests.push({ method, params: params ?? null });
      let reply;
      if (method === "initialize") {
        reply = { result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: server.name, version: "1.0.0" } } };
      } else if (method === "tools/list") {
        reply = { result: { tools: server.tools } };
      } else if (method === "tools/call" && params.name in server.results) {
        reply = { result: { content: [{ type: "text", text: server.results[params.name] }] } };
      } else {
        reply = { error: { code: -32601, message: `Method not found: ${method}` } };
      }
      await call("POST", `/mcp-requests/${request.requestId}`, { jsonrpc: "2.0", id, ...reply });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
const sdk = spec.sdkServer ? serveSdk(spec.sdkServer) : Promise.resolve();

try {
  const agent = new HttpAgent({ url: `${spec.base}/agent/default/run`, threadId: spec.threadId });
  let n = 0;
  for (const step of spec.steps) {
    n += 1;
    if (step.op === "initialize") {
      out.steps.push(await call("POST", "/sessions/{threadId}/initialize", step.body));
    } else if (step.op === "control") {
      out.steps.push(await call("POST", "/sessions/{threadId}/control", step.body));
    } else if (step.op === "get") {
      out.steps.push(await call("GET", step.path));
    } else if (step.op === "run") {
      agent.addMessage({ id: step.messageId ?? `user-${n}`, role: "user", content: step.prompt });
      const params = { tools: step.tools ?? [], context: [], forwardedProps: {} };
      const runs = [await runOnce(agent, step, params)];
      // Frontend tools the run ended with: run them, answer in the next run.
      for (let round = 0; round < 3 && step.frontendResults; round++) {
        const last = agent.messages[agent.messages.length - 1];
        const calls = (last?.role === "assistant" ? last.toolCalls ?? [] : []).filter(
          (c) => c.function.name in step.frontendResults,
        );
        if (calls.length === 0) break;
        for (const c of calls) {
          agent.addMessage({ id: `tool-${c.id}`, role: "tool", toolCallId: c.id, content: step.frontendResults[c.function.name] });
        }
        runs.push(await runOnce(agent, step, params));
      }
      out.steps.push({ runs });
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
} catch (e) {
  out.error = String(e?.stack ?? e);
}
serving = false;
await sdk;
process.stdout.write(JSON.stringify(out));
