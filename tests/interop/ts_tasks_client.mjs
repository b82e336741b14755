// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.x), its experimental task API
// (2025-11-25) against our server: a task-augmented call streamed to its result, a task polled and
// listed, one cancelled, and one that asks the user (elicitation) while it runs.
//
// Usage: MCP_INTEROP_NODE_DIR=DIR node ts_tasks_client.mjs URL     (prints one JSON line)
import { createRequire } from "node:module";
import path from "node:path";

const [url] = process.argv.slice(2);
const nodeDir = process.env.MCP_INTEROP_NODE_DIR;
if (!url || !nodeDir) {
  console.error("usage: MCP_INTEROP_NODE_DIR=DIR node ts_tasks_client.mjs URL");
  process.exit(2);
}
const require = createRequire(path.join(nodeDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { CreateTaskResultSchema, ElicitRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

const out = { streamed: [], elicited: [] };
const client = new Client({ name: "interop-tasks", version: "1.0.0" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  out.elicited.push(request.params.message);
  return { action: "accept", content: { ok: true } };
});
const deadline = setTimeout(() => { out.ok = false; out.error = "timed out"; console.log(JSON.stringify(out)); process.exit(1); }, 60_000);

async function streamed(name, args) {
  const messages = [];
  for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args }, undefined,
                                                                        { task: { ttl: 60_000 } })) {
    messages.push(message);
  }
  return messages;
}

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.protocolVersion = client.transport?.protocolVersion;
  await client.listTools();
  const progress = await streamed("progress", { count: 3, delay: 0.05 });
  out.streamed = progress.map((m) => m.type);
  const created = progress.find((m) => m.type === "taskCreated");
  out.taskId = created?.task.taskId;
  out.result = progress.at(-1)?.result?.content?.[0]?.text;
  out.polled = (await client.experimental.tasks.getTask(out.taskId)).status;
  out.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId).includes(out.taskId);

  const slow = await client.request(
    { method: "tools/call", params: { name: "slow_compute", arguments: { seconds: 30 }, task: {} } },
    CreateTaskResultSchema);
  out.cancelled = (await client.experimental.tasks.cancelTask(slow.task.taskId)).status;

  const asking = await streamed("confirm_delete", { path: "/srv/old" });
  out.askingResult = asking.at(-1)?.result?.content?.[0]?.text ?? JSON.stringify(asking.at(-1));
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
