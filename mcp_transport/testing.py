"""Helpers for your own tests: drive an MCP endpoint in-process, SSE included.

    from mcp_transport.testing import MCPCommunicator

    async def test_echo():
        client = MCPCommunicator(application)          # your asgi.py application
        await client.initialize()
        response = await client.call_tool("echo", {"message": "hi"})
        assert response.result["content"][0]["text"] == "hi"

Needs database access that other threads can see (pytest-django: `transactional_db`).
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from asgiref.testing import ApplicationCommunicator

VERSION = "2025-11-25"


@dataclass
class Event:
    id: str | None
    data: str
    retry: int | None = None

    @property
    def message(self):
        return json.loads(self.data) if self.data else None


@dataclass
class Response:
    status: int
    headers: dict
    body: bytes = b""
    events: list[Event] = field(default_factory=list)
    complete: bool = True

    @property
    def json(self):
        return json.loads(self.body) if self.body else None

    @property
    def messages(self) -> list[dict]:
        if self.events:
            return [e.message for e in self.events if e.data]
        return [self.json] if self.body else []

    @property
    def result(self):
        """The `result` of the JSON-RPC response in this reply (JSON body or last SSE message)."""
        for message in reversed(self.messages):
            if "result" in message or "error" in message:
                return message.get("result")
        return None


def parse_events(text: str) -> list[Event]:
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event_id, data, retry, seen = None, [], None, False
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            seen = True
            if name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
            elif name == "retry" and value.isdigit():
                retry = int(value)
        if seen:
            events.append(Event(event_id, "\n".join(data), retry))
    return events


class MCPCommunicator:
    """An in-process MCP client over an ASGI application (no server, no sockets)."""

    def __init__(self, application, path: str = "/mcp", host: str = "localhost", version: str = VERSION):
        self.application = application
        self.path = path
        self.host = host
        self.version = version
        self.session_id: str | None = None
        self._id = 0

    def next_id(self) -> int:
        self._id += 1
        return self._id

    def _headers(self, method: str, extra: dict | None) -> list:
        accept = "application/json, text/event-stream" if method == "POST" else "text/event-stream"
        headers = {"host": self.host, "accept": accept}
        if method == "POST":
            headers["content-type"] = "application/json"
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = self.version
        headers.update({k.lower(): v for k, v in (extra or {}).items()})
        return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    async def send(self, method: str, body: bytes = b"", headers: dict | None = None, *,
                   timeout: float = 10, until=None) -> Response:
        """One HTTP exchange. For SSE, read until the response ends, `until(event)` is true, or `timeout`."""
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": self.path, "raw_path": self.path.encode(), "query_string": b"",
            "headers": self._headers(method, headers), "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        comm = ApplicationCommunicator(self.application, scope)
        await comm.send_input({"type": "http.request", "body": body, "more_body": False})
        start = await comm.receive_output(timeout)
        response = Response(start["status"], {k.decode().lower(): v.decode() for k, v in start.get("headers", [])})
        chunks = []
        complete = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                message = await comm.receive_output(remaining)
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    complete = True
                    break
                if until and any(until(e) for e in parse_events(b"".join(chunks).decode())):
                    break
        except asyncio.TimeoutError:
            pass
        response.body = b"".join(chunks)
        response.complete = complete
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.events = parse_events(response.body.decode())
        await comm.send_input({"type": "http.disconnect"})
        try:
            await comm.wait(timeout)
        except asyncio.TimeoutError:
            pass
        return response

    async def post(self, message: dict, headers=None, **kwargs) -> Response:
        return await self.send("POST", json.dumps(message).encode(), headers, **kwargs)

    async def initialize(self, capabilities: dict | None = None) -> dict:
        response = await self.post({
            "jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
            "params": {"protocolVersion": self.version, "capabilities": capabilities or {},
                       "clientInfo": {"name": "mcp_transport.testing", "version": "1"}},
        })
        if response.status != 200:
            raise AssertionError(f"initialize failed: {response.status} {response.body!r}")
        self.session_id = response.headers["mcp-session-id"]
        self.version = response.json["result"]["protocolVersion"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response.json["result"]

    async def request(self, method: str, params: dict | None = None, **kwargs) -> Response:
        message = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if params is not None:
            message["params"] = params
        return await self.post(message, **kwargs)

    async def call_tool(self, name: str, arguments: dict | None = None, **kwargs) -> Response:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **kwargs)

    async def resume(self, last_event_id: str, **kwargs) -> Response:
        return await self.send("GET", headers={"last-event-id": last_event_id}, **kwargs)

    async def delete(self) -> Response:
        return await self.send("DELETE")
