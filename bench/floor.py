"""The floor: the smallest ASGI app the bench's client can hold sessions and streams against.

No Django, no MCP beyond what the client checks (a session id from `initialize`, 202 for
notifications, `echo` answered on an SSE stream, a session's GET held open until the client goes
or DELETE ends the session), no state but the held GET streams. Served by the same launcher as
the project, it shows what the server underneath (daphne, Twisted, asyncio, the kernel) costs per
call, and how that cost moves when as many streams are held open: the `growth` scenario measures
both, on it and on the project, side by side; the yardstick puts it beside the SDKs as the floor.
"""
from __future__ import annotations

import asyncio
import json
import secrets

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
JSON_HEADERS = [(b"content-type", b"application/json")]
PRIMING = b"id: 0\ndata: \n\n"
HELD: dict[bytes, set[asyncio.Event]] = {}  # session id -> its GET streams' "end now"


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


async def _disconnected(receive):
    while (await receive())["type"] != "http.disconnect":
        pass


async def _hold(session: bytes, receive, send):
    """A GET stream: open until the client goes away or its session is deleted."""
    ended = asyncio.Event()
    HELD.setdefault(session, set()).add(ended)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": PRIMING, "more_body": True})
        waits = {asyncio.ensure_future(_disconnected(receive)), asyncio.ensure_future(ended.wait())}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in waits:
            task.cancel()
        if ended.is_set():
            await send({"type": "http.response.body", "body": b""})
    finally:
        streams = HELD.get(session, set())
        streams.discard(ended)
        if not streams:
            HELD.pop(session, None)


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
        return
    session = next((value for name, value in scope["headers"] if name == b"mcp-session-id"), None)
    if method == "GET" and session:
        await _hold(session, receive, send)
    else:
        if method == "DELETE":
            for ended in HELD.pop(session, ()):
                ended.set()
        status = 200 if method == "DELETE" else 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
