// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.x) against our server:
// call `progress(count, delay)` with a progress handler and print what arrived as one JSON line.
//
// Usage: node ts_progress_client.mjs URL [COUNT] [DELAY]
// The SDK is resolved from $MCP_INTEROP_NODE_DIR/node_modules (where tests/interop/install.sh
// put it), so nothing is installed into the repository.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [url, countArg = "50", delayArg = "0.02"] = process.argv.slice(2);
const nodeDir = process.env.MCP_INTEROP_NODE_DIR;
if (!url || !nodeDir) {
  console.error("usage: MCP_INTEROP_NODE_DIR=DIR node ts_progress_client.mjs URL [COUNT] [DELAY]");
  process.exit(2);
}
const require = createRequire(path.join(nodeDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
// (the package's "./*" export maps package.json into dist/, so read the real one directly)
const sdkVersion = JSON.parse(
  readFileSync(path.join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"), "utf8"),
).version;

const count = Number(countArg);
const delay = Number(delayArg);
const out = { sdkVersion, nodeVersion: process.version, progress: [], requests: [], transportErrors: [] };

// Record every HTTP exchange the SDK makes (method, Last-Event-ID, status), for diagnostics
// and to show that the call really was resumed.
const recordingFetch = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  const entry = { method: init.method || "GET", lastEventId: headers.get("last-event-id") };
  out.requests.push(entry);
  const response = await fetch(input, init);
  entry.status = response.status;
  return response;
};

const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
const client = new Client({ name: "django-mcp-transport-interop", version: "1.0.0" });
client.onerror = (error) => out.transportErrors.push(String(error && error.message || error));

try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? null;
  const result = await client.callTool(
    { name: "progress", arguments: { count, delay } },
    undefined,
    {
      onprogress: (p) => out.progress.push(p.progress),
      timeout: 60000,
      resetTimeoutOnProgress: true,
    },
  );
  out.isError = Boolean(result.isError);
  out.text = (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
  out.ok = true;
} catch (error) {
  out.ok = false;
  out.error = String(error && error.stack || error);
} finally {
  try {
    await transport.terminateSession();
  } catch (error) {
    out.transportErrors.push(`terminateSession: ${error}`);
  }
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
