// Anchor for MCP 2026-07-28: the official TypeScript MCP server SDK 2.x (@modelcontextprotocol/server
// and its Node adapter @modelcontextprotocol/node, pinned in package.json), served as the SDK's
// "serve over HTTP" recipe does: createMcpHandler(factory) turned into a Node handler by
// toNodeHandler, on node's own http server behind the SDK's localhost Host/Origin guards. SDK
// defaults: the factory builds a fresh McpServer for every HTTP request (the SDK's per-request
// model); 2026-07-28 requests go to the modern handler, 2025-era ones to its stateless legacy
// fallback; answers are JSON unless the tool sends a notification first, then SSE.
//
//   node typescript_sdk_modern.mjs --port 8123
//
// Bound to 127.0.0.1; one process. Run from the directory install.sh filled (its node_modules), with
// the Node it installed.
//
// Tools, the same as the example project's: echo(message) returns the message; progress(count=10,
// delay=0.01) sends `count` notifications/progress to the call's _meta.progressToken, sleeping
// `delay` s before each, then returns "done <count>".
import { createServer } from 'node:http';
import * as z from 'zod';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from '@modelcontextprotocol/node';

const argv = process.argv.slice(2);
const portAt = argv.indexOf('--port');
const PORT = portAt >= 0 ? Number(argv[portAt + 1]) : NaN;
if (!Number.isInteger(PORT)) {
  console.error('usage: node typescript_sdk_modern.mjs --port PORT');
  process.exit(2);
}

function mcpServer() {
  const server = new McpServer({ name: 'bench-anchor-typescript-sdk-2', version: '1' });
  server.registerTool('echo', { description: 'Return the message unchanged.',
    inputSchema: z.object({ message: z.string() }) },
  async ({ message }) => ({ content: [{ type: 'text', text: message }] }));
  server.registerTool('progress', {
    description: 'Send `count` progress notifications `delay` seconds apart, then return "done <count>".',
    inputSchema: z.object({ count: z.number().int().default(10), delay: z.number().default(0.01) }),
  }, async ({ count, delay }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (let i = 1; i <= count; i++) {
      if (delay) await new Promise((resolve) => setTimeout(resolve, delay * 1000));
      if (token !== undefined) {
        await ctx.mcpReq.notify({ method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: count, message: `step ${i}` } });
      }
    }
    return { content: [{ type: 'text', text: `done ${count}` }] };
  });
  return server;
}

const handler = createMcpHandler(mcpServer, { onerror: (error) => console.error(error) });
const node = toNodeHandler(handler);
const validHost = localhostHostValidation();
const validOrigin = localhostOriginValidation();

createServer((req, res) => {
  if (!validHost(req, res) || !validOrigin(req, res)) return;
  if (new URL(req.url, 'http://x').pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  node(req, res).catch((error) => {
    console.error(error);
    if (!res.headersSent) res.writeHead(500).end();
  });
}).listen(PORT, '127.0.0.1');
