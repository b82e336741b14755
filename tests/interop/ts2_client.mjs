// The official TypeScript client 2.x (@modelcontextprotocol/client) against our server, in one mode.
//
//   MCP_INTEROP_NODE_DIR=DIR node ts2_client.mjs URL [pin|auto|legacy]
//   (the client is resolved from DIR/node_modules, where tests/interop/install.sh puts it)
//
// pin: versionNegotiation pinned to 2026-07-28; auto: the client's own negotiation; legacy: its
// default (initialize). Every mode: tools, progress, logs, an elicitation (answered through an
// input_required result in the modern era), a resource and a prompt; the modern modes also open a
// subscriptions/listen stream that receives a tools list change another request makes.
// Records every HTTP exchange (an injected fetch) and prints one JSON object.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const nodeDir = process.env.MCP_INTEROP_NODE_DIR ?? '.';
const require = createRequire(path.join(nodeDir, 'package.json'));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const clientVersion = JSON.parse(readFileSync(
    path.join(nodeDir, 'node_modules/@modelcontextprotocol/client/package.json'), 'utf8')).version;

const [url, mode = 'pin'] = process.argv.slice(2);
const out = { mode, clientVersion, exchanges: [], elicited: [], progress: [], logs: [] };

async function recordingFetch(input, init = {}) {
    let body = null;
    try { body = JSON.parse(init.body ?? 'null'); } catch { body = null; }
    const headers = new Headers(init.headers ?? {});
    const entry = {
        method: init.method ?? 'GET',
        rpcMethod: body?.method ?? null,
        protocolVersionHeader: headers.get('mcp-protocol-version'),
        sessionHeader: headers.has('mcp-session-id'),
    };
    out.exchanges.push(entry);
    const response = await fetch(input, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type');
    entry.sessionIdAssigned = response.headers.has('mcp-session-id');
    return response;
}

const negotiation = { pin: { versionNegotiation: { mode: { pin: '2026-07-28' } } },
                      auto: { versionNegotiation: { mode: 'auto' } }, legacy: {} }[mode];
const client = new Client({ name: 'interop-test', version: '1.0.0' },
                          { ...negotiation, capabilities: { elicitation: {} } });
client.setRequestHandler('elicitation/create', async request => {
    out.elicited.push(request.params.message);
    const props = request.params.requestedSchema?.properties ?? {};
    return { action: 'accept', content: Object.fromEntries(Object.keys(props).map(k => [k, `${k}-value`])) };
});
client.setNotificationHandler('notifications/message', n => out.logs.push(n.params.data));
const changed = new Promise(resolve => client.setNotificationHandler('notifications/tools/list_changed', resolve));

const deadline = setTimeout(() => { out.ok = false; out.error = 'timed out'; console.log(JSON.stringify(out)); process.exit(1); }, 60_000);
try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
    out.protocolVersion = client.getNegotiatedProtocolVersion();
    const modern = out.protocolVersion === '2026-07-28';
    const logLevel = { _meta: { 'io.modelcontextprotocol/logLevel': 'info' } };
    if (!modern) await client.setLoggingLevel('info');
    out.tools = (await client.listTools()).tools.map(t => t.name);
    let r = await client.callTool({ name: 'echo', arguments: { message: 'hello from ts 2.x' } });
    out.echo = r.content[0].text;
    r = await client.callTool({ name: 'progress', arguments: { count: 3, delay: 0.01 } },
                              { onprogress: p => out.progress.push([p.progress, p.total, p.message]) });
    out.progressResult = r.content[0].text;
    await client.callTool({ name: 'test_tool_with_logging', arguments: {}, ...(modern ? logLevel : {}) });
    r = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
    out.elicitResult = r.content[0].text;
    out.resource = (await client.readResource({ uri: 'test://static-text' })).contents[0].text;
    out.prompt = (await client.getPrompt({ name: 'test_simple_prompt' })).messages[0].content.text;
    if (modern) {
        const sub = await client.listen({ toolsListChanged: true }, { timeout: 15_000 });
        out.honored = sub.honoredFilter;
        await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
        await Promise.race([changed, new Promise((_, reject) => setTimeout(() => reject(new Error('no list_changed')), 15_000))]);
        out.event = 'tools/list_changed';
        await sub.close();
    }
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
