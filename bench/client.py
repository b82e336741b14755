"""A minimal HTTP/1.1 client (keep-alive, Content-Length and chunked bodies) with an SSE reader,
and MCP Streamable HTTP on top of it: `MCPSession` (2025-11-25 sessions) and `ModernClient` (the
stateless 2026-07-28 revision). Standard library only, plain http:// only.

It is written for load: one `reader.read()` per arrival of bytes, headers and chunks parsed out
of one buffer, no per-request objects beyond the response head. Every wait is bounded by the
caller's timeout (`asyncio.timeout`), every loop by what has arrived.
"""
from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
META = "io.modelcontextprotocol/"
ACCEPT_POST = "application/json, text/event-stream"
SSE = "text/event-stream"
READ_SIZE = 256 * 1024
MAX_HEAD = 64 * 1024
_END = object()  # the last chunk of a chunked body


class HTTPError(Exception):
    """A status the caller did not expect, with the start of the body."""

    def __init__(self, status: int, body: bytes = b"", what: str = ""):
        super().__init__(f"{what} HTTP {status}: {body[:200]!r}".strip())
        self.status = status
        self.body = body


class ProtocolError(Exception):
    """The peer sent something this client cannot read as HTTP/1.1."""


class Response:
    """The head of a response; the body is read from its Connection."""

    __slots__ = ("status", "headers", "chunked", "length", "done")

    def __init__(self, status: int, headers: dict[str, str]):
        self.status = status
        self.headers = headers
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self.length = int(length) if length is not None and not self.chunked else None
        self.done = False

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == SSE


def split_url(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"only http:// URLs are supported, not {url!r}")
    return parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"


class Connection:
    """One HTTP/1.1 connection; requests on it are sequential (keep-alive)."""

    def __init__(self, host: str, port: int):
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.buf = bytearray()
        self.reusable = False

    async def open(self, timeout: float = 10.0) -> "Connection":
        async with asyncio.timeout(timeout):
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
        self.reusable = True
        return self

    @property
    def is_open(self) -> bool:
        return self.writer is not None and not self.writer.is_closing()

    def abort(self):
        """Drop the connection at once (a client that goes away)."""
        self.reusable = False
        if self.writer is not None:
            self.writer.transport.abort()
            self.writer = None

    async def close(self):
        self.reusable = False
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()
            try:
                async with asyncio.timeout(2):
                    await writer.wait_closed()
            except (OSError, TimeoutError):
                pass

    async def _fill(self):
        data = await self.reader.read(READ_SIZE)
        if not data:
            self.reusable = False
            raise ConnectionResetError("the server closed the connection")
        self.buf += data

    async def send(self, data: bytes):
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size() > 65536:
            await self.writer.drain()

    async def request(self, data: bytes) -> Response:
        """Send one complete request and read the head of its response."""
        if self.buf:
            raise ProtocolError("unread bytes from a previous response on this connection")
        await self.send(data)
        return await self.read_head()

    async def read_head(self) -> Response:
        buf = self.buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > MAX_HEAD:
                raise ProtocolError("response head too large")
            await self._fill()
        head = bytes(buf[:end]).decode("latin-1")
        del buf[:end + 4]
        lines = head.split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
            raise ProtocolError(f"bad status line {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        response = Response(int(status_line[1]), headers)
        if headers.get("connection", "").lower() == "close" or status_line[0] == "HTTP/1.0":
            self.reusable = False
        if response.status in (204, 304) or 100 <= response.status < 200:
            response.length = 0
        return response

    def _take_chunk(self):
        """The next piece of a chunked body from the buffer: bytes, _END, or None (need more)."""
        buf = self.buf
        i = buf.find(b"\r\n")
        if i < 0:
            if len(buf) > 1024:
                raise ProtocolError("chunk size line too long")
            return None
        try:
            size = int(bytes(buf[:i]).split(b";", 1)[0], 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line {bytes(buf[:i])[:40]!r}") from None
        if size == 0:
            j = buf.find(b"\r\n\r\n", i)
            if j < 0:
                return None
            del buf[:j + 4]
            return _END
        if len(buf) < i + 4 + size:
            return None
        piece = bytes(buf[i + 2:i + 2 + size])
        del buf[:i + 4 + size]
        return piece

    async def read_some(self, response: Response) -> bytes | None:
        """What has arrived of the body (waiting for at least one byte), or None at its end."""
        if response.done:
            return None
        if response.chunked:
            pieces = []
            while True:
                piece = self._take_chunk()
                if piece is None:
                    if pieces:
                        return b"".join(pieces)
                    await self._fill()
                    continue
                if piece is _END:
                    response.done = True
                    return b"".join(pieces) if pieces else None
                pieces.append(piece)
        if response.length is not None:
            if response.length == 0:
                response.done = True
                return None
            if not self.buf:
                await self._fill()
            piece = bytes(self.buf[:response.length])
            del self.buf[:len(piece)]
            response.length -= len(piece)
            if response.length == 0:
                response.done = True
            return piece
        # Neither: the body runs to the end of the connection.
        self.reusable = False
        if not self.buf:
            try:
                await self._fill()
            except ConnectionResetError:
                response.done = True
                return None
        piece = bytes(self.buf)
        self.buf.clear()
        return piece

    async def read_body(self, response: Response) -> bytes:
        """The whole body (until the last chunk, Content-Length, or the end of the connection)."""
        if response.length is not None and not response.chunked:
            while len(self.buf) < response.length:
                await self._fill()
            body = bytes(self.buf[:response.length])
            del self.buf[:response.length]
            response.length = 0
            response.done = True
            return body
        parts = []
        while True:
            piece = await self.read_some(response)
            if piece is None:
                return b"".join(parts)
            parts.append(piece)


class SSEEvent:
    __slots__ = ("id", "data", "retry", "event")

    def __init__(self):
        self.id = None
        self.data = None
        self.retry = None
        self.event = None

    def __repr__(self):
        return f"SSEEvent(id={self.id!r}, data={self.data!r:.60}, retry={self.retry!r})"


class SSEParser:
    """Incremental text/event-stream parser: feed bytes, get the complete events.

    Every block with a field is returned (the priming event too: an id and empty data);
    comments (keep-alives) are only counted. `last_id` follows the spec's last event ID.
    """

    def __init__(self):
        self.pending = b""
        self.cr = False
        self.last_id: str | None = None
        self.retry: int | None = None
        self.comments = 0
        self.events = 0

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self.cr and data[:1] == b"\n":  # the LF of a CRLF split between two reads
            data = data[1:]
        self.cr = False
        if b"\r" in data:  # CRLF or CR line ends
            self.cr = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self.pending + data if self.pending else data
        blocks = buf.split(b"\n\n")
        self.pending = blocks.pop()
        out = []
        for block in blocks:
            event = None
            data_lines = None
            for line in block.split(b"\n"):
                if not line:
                    continue
                if line[0] == 58:  # b":"
                    self.comments += 1
                    continue
                name, _, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if event is None:
                    event = SSEEvent()
                if name == b"data":
                    if data_lines is None:
                        data_lines = [value]
                    else:
                        data_lines.append(value)
                elif name == b"id":
                    if b"\0" not in value:
                        event.id = value.decode()
                        self.last_id = event.id
                elif name == b"retry":
                    if value.isdigit():
                        event.retry = self.retry = int(value)
                elif name == b"event":
                    event.event = value.decode()
            if event is not None:
                if data_lines is not None:
                    event.data = b"\n".join(data_lines).decode()
                self.events += 1
                out.append(event)
        return out


def message_of(event: SSEEvent):
    """The JSON-RPC message an event carries, or None (priming event, retry-only block)."""
    if not event.data:
        return None
    return json.loads(event.data)


class MCPSession:
    """One MCP session: its id and headers. Connections are passed in, so one session can hold a
    POST stream and a GET stream at once, as a real client does."""

    def __init__(self, url: str, version: str = PROTOCOL_VERSION, client_name: str = "mcp-transport-bench"):
        self.host, self.port, self.path = split_url(url)
        self.version = version
        self.client_name = client_name
        self.session_id: str | None = None
        self._next_id = 0
        self._fixed = ""
        self._rebuild()

    def _rebuild(self):
        lines = [f"Host: {self.host}:{self.port}"]
        if self.session_id:
            lines += [f"Mcp-Session-Id: {self.session_id}", f"MCP-Protocol-Version: {self.version}"]
        self._fixed = "\r\n".join(lines) + "\r\n"

    def connection(self) -> Connection:
        return Connection(self.host, self.port)

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def post_bytes(self, body: bytes) -> bytes:
        return (
            f"POST {self.path} HTTP/1.1\r\n{self._fixed}Accept: {ACCEPT_POST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body

    def get_bytes(self, last_event_id: str | None = None) -> bytes:
        extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
        return f"GET {self.path} HTTP/1.1\r\n{self._fixed}Accept: {SSE}\r\n{extra}\r\n".encode("latin-1")

    def delete_bytes(self) -> bytes:
        return f"DELETE {self.path} HTTP/1.1\r\n{self._fixed}Content-Length: 0\r\n\r\n".encode("latin-1")

    @staticmethod
    def encode(message: dict) -> bytes:
        return json.dumps(message, separators=(",", ":")).encode()

    async def rpc(self, conn: Connection, method: str, params: dict | None = None, what: str = ""):
        """A request answered with JSON or with an SSE stream that ends after the response:
        -> (response message, the other messages on the stream, the head)."""
        request_id = self.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        response = await conn.request(self.post_bytes(self.encode(message)))
        body = await conn.read_body(response)
        if response.status != 200:
            raise HTTPError(response.status, body, what or method)
        return (*self.find_response(response, body, request_id), response)

    @staticmethod
    def find_response(response: Response, body: bytes, request_id):
        if not response.is_sse:
            return json.loads(body), []
        found, others = None, []
        for event in SSEParser().feed(body + b"\n\n"):
            message = message_of(event)
            if message is None:
                continue
            if found is None and message.get("id") == request_id and ("result" in message or "error" in message):
                found = message
            else:
                others.append(message)
        if found is None:
            raise ProtocolError(f"the stream ended without the response to {request_id!r}")
        return found, others

    async def initialize(self, conn: Connection) -> dict:
        params = {"protocolVersion": self.version, "capabilities": {},
                  "clientInfo": {"name": self.client_name, "version": "1"}}
        message, _, response = await self.rpc(conn, "initialize", params)
        if "result" not in message:
            raise ProtocolError(f"initialize failed: {message}")
        self.session_id = response.headers.get("mcp-session-id")
        if not self.session_id:
            raise ProtocolError("initialize answered without Mcp-Session-Id")
        self.version = message["result"].get("protocolVersion", self.version)
        self._rebuild()
        await self.notify(conn, "notifications/initialized")
        return message["result"]

    async def notify(self, conn: Connection, method: str, params: dict | None = None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = await conn.request(self.post_bytes(self.encode(message)))
        body = await conn.read_body(response)
        if response.status != 202:
            raise HTTPError(response.status, body, method)

    def tool_call(self, name: str, arguments: dict, progress_token=None) -> tuple[int, bytes]:
        """(request id, request bytes) for a tools/call."""
        request_id = self.next_id()
        params = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        body = self.encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        return request_id, self.post_bytes(body)

    async def open_get(self, conn: Connection, last_event_id: str | None = None) -> Response:
        """Open the standalone GET stream, or resume a stream with Last-Event-ID: the head."""
        response = await conn.request(self.get_bytes(last_event_id))
        if response.status != 200:
            body = await conn.read_body(response)
            raise HTTPError(response.status, body, "GET")
        return response

    async def delete(self, conn: Connection) -> int:
        response = await conn.request(self.delete_bytes())
        await conn.read_body(response)
        return response.status


def header_value(value: str) -> str:
    """An Mcp-Name value as 2026-07-28 sends it: plain when a header can carry it, else base64 of
    its UTF-8 between `=?base64?` and `?=`."""
    if value.isascii() and value.isprintable() and value == value.strip() and not (
            value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


class ModernClient:
    """An MCP 2026-07-28 client: no initialize, no session, no GET stream. Every request is one POST
    whose `params._meta` carries the protocol version, the client's capabilities and its info (merged
    with the request's own `_meta`, so a progress token stays), with the headers that mirror the body:
    MCP-Protocol-Version, Mcp-Method and, for tools/call, prompts/get and resources/read, Mcp-Name.
    The answer is one JSON body, or an SSE stream (notifications, then the response)."""

    NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

    def __init__(self, url: str, version: str = MODERN_VERSION, client_name: str = "mcp-transport-bench",
                 capabilities: dict | None = None):
        self.host, self.port, self.path = split_url(url)
        self.version = version
        self.envelope = {f"{META}protocolVersion": version, f"{META}clientCapabilities": capabilities or {},
                         f"{META}clientInfo": {"name": client_name, "version": "1"}}
        self._next_id = 0
        self._fixed = (f"Host: {self.host}:{self.port}\r\nMCP-Protocol-Version: {version}\r\n"
                       f"Accept: {ACCEPT_POST}\r\nContent-Type: application/json\r\n")

    def connection(self) -> Connection:
        return Connection(self.host, self.port)

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: dict | None = None) -> tuple[int, bytes]:
        """(request id, request bytes) for one request with its envelope and headers."""
        request_id = self.next_id()
        params = dict(params or {})
        params["_meta"] = {**self.envelope, **(params.get("_meta") or {})}
        body = MCPSession.encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        extra = f"Mcp-Method: {method}\r\n"
        target = self.NAMED.get(method)
        if target and isinstance(params.get(target), str):
            extra += f"Mcp-Name: {header_value(params[target])}\r\n"
        head = f"POST {self.path} HTTP/1.1\r\n{self._fixed}{extra}Content-Length: {len(body)}\r\n\r\n"
        return request_id, head.encode("latin-1") + body

    def tool_call(self, name: str, arguments: dict, progress_token=None) -> tuple[int, bytes]:
        params = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        return self.request("tools/call", params)

    find_response = staticmethod(MCPSession.find_response)

    async def rpc(self, conn: Connection, method: str, params: dict | None = None, what: str = ""):
        """-> (response message, the other messages on the stream, the head)."""
        request_id, data = self.request(method, params)
        response = await conn.request(data)
        body = await conn.read_body(response)
        if response.status != 200:
            raise HTTPError(response.status, body, what or method)
        return (*self.find_response(response, body, request_id), response)
