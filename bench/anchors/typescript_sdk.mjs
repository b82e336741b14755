// Anchor: the official TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x, pinned in package.json),
// its StreamableHTTPServerTransport on node's own http server: stateful sessions (one transport and
// one McpServer per session, as the SDK's examples do), with an event store so that SSE streams can
// be resumed. Bound to 127.0.0.1; one process.
//
//   node typescript_sdk.mjs --port 8123 [--json]
//
// --json is enableJsonResponse: tools/call answered with JSON, no SSE stream. Run from the
// directory install.sh filled (its node_modules), with the Node it installed.
//
// Tools, the same as the example project's: echo(message) returns the message; progress(count=10,
// delay=0.01) sends `count` notifications/progress to the call's _meta.progressToken, sleeping
// `delay` s before each, then returns "done <count>".
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import * as z from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const portAt = argv.indexOf('--port');
const PORT = portAt >= 0 ? Number(argv[portAt + 1]) : NaN;
const JSON_RESPONSE = argv.includes('--json');
if (!Number.isInteger(PORT)) {
  console.error('usage: node typescript_sdk.mjs --port PORT [--json]');
  process.exit(2);
}

// Every event in memory, in order per stream; ids "<stream number>-<position>", the form the
// bench's resume check reads. Positions are compared as numbers.
class MemoryEventStore {
  constructor() {
    this.streams = new Map(); // stream id -> { number, events: [[eventId, message]] }
    this.where = new Map(); // event id -> [stream id, position]
    this.next = 1;
  }

  async storeEvent(streamId, message) {
    let stream = this.streams.get(streamId);
    if (!stream) {
      stream = { number: this.next++, events: [] };
      this.streams.set(streamId, stream);
    }
    const eventId = `${stream.number}-${stream.events.length}`;
    this.where.set(eventId, [streamId, stream.events.length]);
    stream.events.push([eventId, message]);
    return eventId;
  }

  async getStreamIdForEventId(eventId) {
    return this.where.get(eventId)?.[0];
  }

  async replayEventsAfter(lastEventId, { send }) {
    const found = this.where.get(lastEventId);
    if (!found) return '';
    const [streamId, position] = found;
    for (const [eventId, message] of this.streams.get(streamId).events.slice(position + 1)) {
      if (message && message.jsonrpc) await send(eventId, message); // a priming event's message is {}
    }
    return streamId;
  }
}

function mcpServer() {
  const server = new McpServer({ name: 'bench-anchor-typescript-sdk', version: '1.0.0' });
  server.registerTool('echo', { description: 'Return the message unchanged.', inputSchema: { message: z.string() } },
    async ({ message }) => ({ content: [{ type: 'text', text: message }] }));
  server.registerTool('progress', {
    description: 'Send `count` progress notifications `delay` seconds apart, then return "done <count>".',
    inputSchema: { count: z.number().int().default(10), delay: z.number().default(0.01) },
  }, async ({ count, delay }, extra) => {
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= count; i++) {
      if (delay) await new Promise((resolve) => setTimeout(resolve, delay * 1000));
      if (token !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: count, message: `step ${i}` } });
      }
    }
    return { content: [{ type: 'text', text: `done ${count}` }] };
  });
  return server;
}

const sessions = new Map(); // session id -> transport

function fail(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function handle(req, res) {
  if (new URL(req.url, 'http://x').pathname !== '/mcp') return fail(res, 404, -32000, 'Not found');
  const host = req.headers.host ?? '';
  if (!host.startsWith('127.0.0.1:') && !host.startsWith('localhost:')) return fail(res, 403, -32000, 'Bad host');
  const sid = req.headers['mcp-session-id'];
  let transport = sid ? sessions.get(sid) : undefined;
  if (sid && !transport) return fail(res, 404, -32001, 'Session not found');
  if (req.method !== 'POST') {
    if (!transport) return fail(res, 400, -32000, 'No session id');
    return transport.handleRequest(req, res);
  }
  let body;
  try {
    body = await readJson(req);
  } catch {
    return fail(res, 400, -32700, 'Parse error');
  }
  if (!transport) {
    if (!isInitializeRequest(body)) return fail(res, 400, -32000, 'No session id');
    const created = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: JSON_RESPONSE,
      eventStore: new MemoryEventStore(),
      onsessioninitialized: (id) => sessions.set(id, created),
    });
    created.onclose = () => {
      if (created.sessionId) sessions.delete(created.sessionId);
    };
    await mcpServer().connect(created);
    transport = created;
  }
  return transport.handleRequest(req, res, body);
}

createServer((req, res) => {
  handle(req, res).catch((error) => {
    console.error(error);
    if (!res.headersSent) fail(res, 500, -32603, 'Internal error');
  });
}).listen(PORT, '127.0.0.1');
