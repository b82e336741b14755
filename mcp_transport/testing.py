"""Helpers for your own tests: drive an MCP endpoint in-process, SSE included.

    from mcp_transport.testing import MCPCommunicator

    async def test_echo():
        client = MCPCommunicator(application)          # your asgi.py application
        await client.initialize()
        response = await client.call_tool("echo", {"message": "hi"})
        assert response.result["content"][0]["text"] == "hi"

Needs database access that other threads can see (pytest-django: `transactional_db`; Django:
`TransactionTestCase`). With pytest-django, `mcp_transport.pytest_plugin` gives them as fixtures.
"""
from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field

from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.http.request import validate_host

from .protocol.modern import NAMED

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


def default_host() -> str:
    """`localhost` where the project allows it (Django's rule: with DEBUG and no ALLOWED_HOSTS too); else
    `testserver`, which Django's test runners and pytest-django add to ALLOWED_HOSTS (a new project
    under them allows nothing else)."""
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    return "localhost" if validate_host("localhost", allowed) else "testserver"


class MCPCommunicator:
    """An in-process MCP client over an ASGI application (no server, no sockets)."""

    def __init__(self, application, path: str = "/mcp", host: str | None = None, version: str = VERSION):
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
        headers = {"host": self.host or default_host(), "accept": accept}
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


MODERN_VERSION = "2026-07-28"


def _header_value(value: str) -> str:
    """Mcp-Name and Mcp-Param-* values: plain when a header can carry them, else the base64 form."""
    if value.isascii() and value.isprintable() and value == value.strip() and not (
            value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


class ModernCommunicator(MCPCommunicator):
    """The same, speaking MCP 2026-07-28: no initialize, no session; every request carries its
    `_meta` and the Mcp-* headers.

        client = ModernCommunicator(application, capabilities={"elicitation": {}})
        response = await client.call_tool("confirm", {"item": "x"})
        if response.result["resultType"] == "input_required":
            response = await client.retry(response, {"elicitation-1": {"action": "accept", "content": {}}})
    """

    def __init__(self, application, path: str = "/mcp", host: str | None = None, *,
                 capabilities: dict | None = None, log_level: str | None = None,
                 client_info: dict | None = None):
        super().__init__(application, path, host, MODERN_VERSION)
        self.capabilities = capabilities or {}
        self.log_level = log_level
        self.client_info = client_info or {"name": "mcp_transport.testing", "version": "1"}
        self.sent: dict[int, dict] = {}

    def envelope(self, params: dict | None) -> dict:
        meta = {"io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientCapabilities": self.capabilities,
                "io.modelcontextprotocol/clientInfo": self.client_info}
        if self.log_level:
            meta["io.modelcontextprotocol/logLevel"] = self.log_level
        params = dict(params or {})
        params["_meta"] = {**meta, **(params.get("_meta") or {})}
        return params

    def request_headers(self, method: str, params: dict) -> dict:
        headers = {"mcp-protocol-version": self.version, "mcp-method": method}
        target = NAMED.get(method)
        if target and isinstance(params.get(target), str):
            headers["mcp-name"] = _header_value(params[target])
        return headers

    async def request(self, method: str, params: dict | None = None, headers: dict | None = None,
                      **kwargs) -> Response:
        params = self.envelope(params)
        message = {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}
        self.sent[message["id"]] = message
        response = await self.post(message, {**self.request_headers(method, params), **(headers or {})}, **kwargs)
        response.request = message
        return response

    async def retry(self, response: Response, input_responses: dict | None = None, **kwargs) -> Response:
        """Send an `input_required` answer's request again, with the client's answers (MRTR)."""
        original = response.request
        result = response.result
        params = {k: v for k, v in original["params"].items() if k not in ("inputResponses", "requestState")}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if "requestState" in result:
            params["requestState"] = result["requestState"]
        return await self.request(original["method"], params, **kwargs)

    async def initialize(self, capabilities: dict | None = None) -> dict:
        raise TypeError("MCP 2026-07-28 has no initialize: send requests directly (server/discover to look first)")

    async def discover(self) -> dict:
        return (await self.request("server/discover")).result
