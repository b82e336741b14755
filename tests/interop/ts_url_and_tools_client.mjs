// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.x) on a 2025-11-25 session:
// URL-mode elicitation (the request with its URL and id, -32042 as UrlElicitationRequiredError,
// notifications/elicitation/complete once the example's page is done) and sampling with tools.
// The client "opens" a page as a browser would: GET it, POST its form with the CSRF token.
//
// Usage: MCP_INTEROP_NODE_DIR=DIR node ts_url_and_tools_client.mjs URL     (prints one JSON line)
import { createRequire } from "node:module";
import path from "node:path";

const [url] = process.argv.slice(2);
const nodeDir = process.env.MCP_INTEROP_NODE_DIR;
if (!url || !nodeDir) {
  console.error("usage: MCP_INTEROP_NODE_DIR=DIR node ts_url_and_tools_client.mjs URL");
  process.exit(2);
}
const require = createRequire(path.join(nodeDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const {
  CreateMessageRequestSchema, ElicitRequestSchema, ElicitationCompleteNotificationSchema, UrlElicitationRequiredError,
} = require("@modelcontextprotocol/sdk/types.js");

const out = { elicited: [], sampled: [], completed: [], pages: [] };
const client = new Client({ name: "interop-url-tools", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} }, sampling: { tools: {} } } });

async function pressDone(pageUrl) {
  const page = await fetch(pageUrl);
  const cookie = (page.headers.get("set-cookie") ?? "").split(";")[0];
  const token = /name="csrfmiddlewaretoken" value="([^"]+)"/.exec(await page.text())[1];
  const done = await fetch(pageUrl, {
    method: "POST", headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ csrfmiddlewaretoken: token }),
  });
  return done.status;
}

client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const { mode, url: pageUrl, elicitationId } = request.params;
  out.elicited.push({ mode, url: pageUrl, elicitationId });
  return { action: "accept" };
});
client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (notification) => {
  out.completed.push(notification.params.elicitationId);
});
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  const { tools, toolChoice, messages } = request.params;
  out.sampled.push({ tools: (tools ?? []).map((t) => t.name), toolChoice, roles: messages.map((m) => m.role) });
  if (out.sampled.length === 1) {
    return { role: "assistant", model: "ts", stopReason: "toolUse",
             content: [{ type: "tool_use", id: "ts-1", name: "get_weather", input: { city: "Paris" } }] };
  }
  const last = messages.at(-1).content;
  const result = (Array.isArray(last) ? last : [last])[0];
  out.toolResult = { toolUseId: result.toolUseId, text: result.content[0].text };
  return { role: "assistant", model: "ts", stopReason: "endTurn",
           content: { type: "text", text: `Paris: ${result.content[0].text}` } };
});
const deadline = setTimeout(() => { out.ok = false; out.error = "timed out"; console.log(JSON.stringify(out)); process.exit(1); }, 60_000);
const text = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("");

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.protocolVersion = client.transport?.protocolVersion;
  out.weather = text(await client.callTool({ name: "weather_agent", arguments: { question: "Weather in Paris?" } }));
  out.opened = text(await client.callTool({ name: "open_settings_page", arguments: {} }));
  try {
    await client.callTool({ name: "connect_account", arguments: {} });
    out.required = null;
  } catch (error) {
    if (!(error instanceof UrlElicitationRequiredError)) throw error;
    const [elicitation] = error.elicitations;
    out.required = { code: error.code, mode: elicitation.mode, elicitationId: elicitation.elicitationId };
    out.pages.push(await pressDone(elicitation.url));
    const until = Date.now() + 20_000;
    while (!out.completed.includes(elicitation.elicitationId) && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  out.connect = text(await client.callTool({ name: "connect_account", arguments: {} }));
  out.ok = true;
} catch (error) {
  out.ok = false;
  out.error = String(error?.stack ?? error);
} finally {
  clearTimeout(deadline);
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
