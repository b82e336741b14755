"""The floor: the smallest ASGI app the bench's client can hold sessions and streams against.

No Django, no MCP beyond what the client checks (a session id from `initialize`, 202 for
notifications, `echo` answered on an SSE stream, a session's GET held open, DELETE 200), no
state. Served by the same launcher as the project, it shows what the server underneath (daphne,
Twisted, asyncio, the kernel) costs per call, and how that cost moves when as many streams are
held open: the `growth` scenario measures both, on it and on the project, side by side.
"""
from __future__ import annotations

import json
import secrets

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
JSON_HEADERS = [(b"content-type", b"application/json")]
PRIMING = b"id: 0\ndata: \n\n"


def answer(message: dict) -> tuple[int, list, bytes]:
    """(status, headers, body) for one JSON-RPC message."""
    if "id" not in message:
        return 202, [], b""
    method = message.get("method")
    reply = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"),
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "floor", "version": "1"}}
        headers = [*JSON_HEADERS, (b"mcp-session-id", secrets.token_hex(16).encode())]
        return 200, headers, json.dumps(reply).encode()
    if method == "tools/call":
        text = str(message.get("params", {}).get("arguments", {}).get("message", ""))
        reply["result"] = {"content": [{"type": "text", "text": text}]}
        return 200, SSE_HEADERS, PRIMING + b"id: 1\nevent: message\ndata: " + json.dumps(reply).encode() + b"\n\n"
    reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
    return 200, JSON_HEADERS, json.dumps(reply).encode()


async def _body(receive) -> bytes:
    parts = []
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return b""
        parts.append(event.get("body", b""))
        if not event.get("more_body"):
            return b"".join(parts)


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].rsplit(".", 1)[-1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    method = scope["method"]
    if method == "POST":
        try:
            status, headers, body = answer(json.loads(await _body(receive)))
        except (ValueError, AttributeError):
            status, headers, body = 400, [], b""
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif method == "GET" and any(name == b"mcp-session-id" for name, _ in scope["headers"]):
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": PRIMING, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
    else:
        status = 200 if method == "DELETE" else 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
