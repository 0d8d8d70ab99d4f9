// A real MCP server (the official @modelcontextprotocol/sdk, Streamable HTTP, stateless) for the
// AG-UI end-to-end tests (tests/tests/e2e_agui.rs): an app adds it to a running Claude Code session
// with `mcp_set_servers`, and Claude Code calls its tool. It prints `{"port":N}` once listening, then
// one JSON line per tool call.
//
// Usage: node mcp_server.mjs [--long-tool NAME]  (NAME: a second tool, for tool-name limits)
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const longAt = process.argv.indexOf("--long-tool");
const LONG_TOOL = longAt > 0 ? process.argv[longAt + 1] : undefined;

function server() {
  const mcp = new McpServer({ name: "docs", version: "1.0.0" });
  mcp.registerTool(
    "lookup_fact",
    {
      description: "Look up a fact about a topic in the project's documentation.",
      inputSchema: { topic: z.string() },
    },
    async ({ topic }) => {
      console.log(JSON.stringify({ called: "lookup_fact", arguments: { topic } }));
      return { content: [{ type: "text", text: `FACT-7731: ${topic} carry loads across gaps.` }] };
    },
  );
  if (LONG_TOOL) {
    // Claude Code names it mcp__<server>__<tool>: past the 64 characters OpenAI takes.
    mcp.registerTool(
      LONG_TOOL,
      {
        description: "Query a Prometheus range with labels.",
        inputSchema: { query: z.string() },
      },
      async ({ query }) => {
        console.log(JSON.stringify({ called: LONG_TOOL, arguments: { query } }));
        return { content: [{ type: "text", text: `SERIES-5521: ${query} peaked at 1200 rps.` }] };
      },
    );
  }
  return mcp;
}

const httpServer = http.createServer(async (req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405, { allow: "POST" }).end();
    return;
  }
  let body = "";
  for await (const chunk of req) body += chunk;
  // Stateless: a server and a transport per request, as the SDK's stateless example does.
  const mcp = server();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    transport.close();
    mcp.close();
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, JSON.parse(body));
});

httpServer.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ port: httpServer.address().port }));
});
