"""Shared helpers for the real-HTTP battery (tests/test_http_*.py).

* `SSEReader`: reads one SSE connection incrementally (event by event, comments and bare
  `retry:` blocks included), so a test can read a few events, post something on another
  connection, then go on reading the same connection.
* `open_sse(...)`: open a POST or GET SSE connection as a context manager.
* `db(server, sql)`: read the daphne's database (sessions, streams) to check server state, whether
  it is a SQLite file or (the suite on PostgreSQL / MariaDB) a database on that server.
* Fixtures: `mcp` (make clients on a server), `server` (start a daphne with overrides), and
  an autouse guard that fails a test when any response was a 500 or daphne logged an error.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from .live import ACCEPT_BOTH, DaphneServer, MCPClient, SSEEvent

READ_TIMEOUT = 10.0
PROGRESS = "notifications/progress"


# Incremental SSE reading


def sse_lines(chunks):
    """Split text chunks into lines on CRLF, LF or CR only, as the SSE spec says.

    (httpx's iter_lines() also splits on U+2028, U+0085 and friends, which may appear raw in
    JSON strings; the official Python client uses httpx-sse, which splits like this.)
    """
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find("\r"), buffer.find("\n")) if i >= 0), default=-1)
            if cut < 0 or (buffer[cut] == "\r" and cut == len(buffer) - 1):
                break  # no line end yet, or a CR that may be the start of a CRLF
            line, rest = buffer[:cut], buffer[cut + 1:]
            if buffer[cut] == "\r" and rest.startswith("\n"):
                rest = rest[1:]
            yield line
            buffer = rest
    if buffer.endswith("\r"):
        yield buffer[:-1]
    elif buffer:
        yield buffer


@dataclass
class Block:
    """One SSE block: an event (id/data), a comment line, or a bare `retry:` block."""

    kind: str  # "event" | "comment" | "retry"
    event: SSEEvent | None = None
    comment: str = ""
    retry: int | None = None


@dataclass
class SSEReader:
    response: httpx.Response
    blocks: list[Block] = field(default_factory=list)
    closed: bool = False

    def __post_init__(self):
        self.status = self.response.status_code
        self.headers = self.response.headers
        self.is_sse = self.headers.get("content-type", "").startswith("text/event-stream")
        self._lines = sse_lines(self.response.iter_text()) if self.is_sse else None

    # What was read so far

    @property
    def events(self) -> list[SSEEvent]:
        return [b.event for b in self.blocks if b.kind == "event"]

    @property
    def messages(self) -> list[dict]:
        return [e.message for e in self.events if e.data]

    @property
    def comments(self) -> list[str]:
        return [b.comment for b in self.blocks if b.kind == "comment"]

    @property
    def last_id(self) -> str | None:
        ids = [e.id for e in self.events if e.id is not None]
        return ids[-1] if ids else None

    @property
    def retry(self) -> int | None:
        """The last `retry` value the server announced on this connection."""
        values = [b.retry if b.kind == "retry" else b.event.retry for b in self.blocks
                  if (b.kind == "retry" or (b.kind == "event" and b.event.retry is not None))]
        return values[-1] if values else None

    def json(self):
        self.response.read()
        return self.response.json()

    # Reading

    def next_block(self) -> Block | None:
        """The next block, or None when the server ended the response."""
        if self.closed or self._lines is None:
            return None
        event, data, seen = SSEEvent(), [], False
        for line in self._lines:
            if line == "":
                if not seen:
                    continue
                event.data = "\n".join(data)
                if event.id is None and not data and event.event is None:
                    block = Block("retry", retry=event.retry)
                else:
                    block = Block("event", event=event)
                self.blocks.append(block)
                return block
            if line.startswith(":"):
                block = Block("comment", comment=line[1:].strip())
                self.blocks.append(block)
                if not seen:
                    return block
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            seen = True
            if name == "id":
                event.id = value
            elif name == "data":
                data.append(value)
            elif name == "retry" and value.isdigit():
                event.retry = int(value)
            elif name == "event":
                event.event = value
        self.closed = True
        return None

    def next_event(self) -> SSEEvent | None:
        while True:
            block = self.next_block()
            if block is None:
                return None
            if block.kind == "event":
                return block.event

    def next_message(self) -> dict | None:
        """The next event carrying data (skips priming events, comments, retry blocks)."""
        while True:
            event = self.next_event()
            if event is None:
                return None
            if event.data:
                return event.message

    def read_until(self, predicate) -> dict | None:
        """Read messages until `predicate(message)`; return that message (None at the end)."""
        while True:
            message = self.next_message()
            if message is None or predicate(message):
                return message

    def read_all(self) -> "SSEReader":
        while self.next_block() is not None:
            pass
        return self


@contextmanager
def open_sse(client: MCPClient, method: str, message: dict | None = None, *, headers=None, without=(),
             timeout: float = READ_TIMEOUT):
    """One SSE connection (POST with `message`, or GET), read incrementally; `without`: headers to omit."""
    body = json.dumps(message) if message is not None else None
    accept = ACCEPT_BOTH if method == "POST" else "text/event-stream"
    hdrs = client.headers(headers, accept=accept)
    for name in without:
        hdrs = {k: v for k, v in hdrs.items() if k.lower() != name.lower()}
    with client.http.stream(method, client.url, content=body, headers=hdrs,
                            timeout=httpx.Timeout(timeout, connect=5)) as response:
        yield SSEReader(response)


def call_message(request_id, name, arguments=None, progress_token=None) -> dict:
    params = {"name": name, "arguments": arguments if arguments is not None else {}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def open_call(client: MCPClient, name, arguments=None, *, progress_token=None, request_id=None, **kwargs):
    """Open a tools/call POST stream; returns (request_id, context manager of SSEReader)."""
    request_id = client.next_id() if request_id is None else request_id
    return request_id, open_sse(client, "POST", call_message(request_id, name, arguments, progress_token), **kwargs)


def run_call(client: MCPClient, name, arguments=None, **kwargs) -> tuple[int, SSEReader]:
    """A whole tools/call stream, read to its end."""
    request_id, cm = open_call(client, name, arguments, **kwargs)
    with cm as reader:
        reader.read_all()
    return request_id, reader


def resume(client: MCPClient, last_event_id: str, **kwargs):
    return open_sse(client, "GET", headers={"Last-Event-ID": last_event_id}, **kwargs)


def resume_all(client: MCPClient, last_event_id: str, **kwargs) -> SSEReader:
    with resume(client, last_event_id, **kwargs) as reader:
        reader.read_all()
    return reader


def rpc(client: MCPClient, method: str, params=None, request_id=None) -> tuple[httpx.Response | SSEReader, dict | None]:
    """A request whatever the answer's form (JSON or SSE); returns (response, final JSON-RPC message)."""
    request_id = client.next_id() if request_id is None else request_id
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    with open_sse(client, "POST", message) as reader:
        if not reader.is_sse:
            return reader, reader.json()
        reader.read_all()
    responses = [m for m in reader.messages if "method" not in m]
    return reader, (responses[-1] if responses else None)


def is_priming(event) -> bool:
    """SEP-1699 priming: an event with an id and empty data."""
    return event is not None and event.id is not None and event.data == ""


def twin(make_client, client: MCPClient) -> MCPClient:
    """A second client on the same session (its own connections): `twin(mcp, client)`."""
    other = make_client()
    other.session_id = client.session_id
    other.version = client.version
    return other


def progress_values(messages, token=None) -> list:
    return [m["params"]["progress"] for m in messages
            if m.get("method") == PROGRESS and (token is None or m["params"].get("progressToken") == token)]


def responses_to(messages, request_id) -> list[dict]:
    return [m for m in messages if "method" not in m and m.get("id") == request_id]


def parse_id(event_id: str) -> tuple[int, int]:
    stream, _, seq = event_id.partition("-")
    return int(stream), int(seq)


def client_response(request_id, result) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def wait_for(predicate, timeout=10.0, interval=0.02):
    """Poll `predicate` until it is truthy (a safety net, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# MCP 2026-07-28 ("modern"): no session, every request carries its `_meta` and the Mcp-* headers

MODERN_VERSION = "2026-07-28"
PREFIX = "io.modelcontextprotocol/"
VERSION_KEY = PREFIX + "protocolVersion"
CAPABILITIES_KEY = PREFIX + "clientCapabilities"
CLIENT_INFO_KEY = PREFIX + "clientInfo"
LOG_LEVEL_KEY = PREFIX + "logLevel"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
         "tasks/update": "taskId", "tasks/cancel": "taskId"}


def b64_header(value: str | bytes) -> str:
    """The `=?base64?...?=` form of a header value."""
    import base64

    return "=?base64?" + base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode() + "?="


@dataclass
class ModernReply:
    """One modern exchange: its status and headers, and every JSON-RPC message it carried (one JSON
    body, or the SSE stream's events); `final` is the response (result or error), `id` echoed."""

    status: int
    headers: httpx.Headers
    messages: list[dict]
    text: str

    @property
    def final(self) -> dict | None:
        answers = [m for m in self.messages if "method" not in m]
        return answers[-1] if answers else None

    @property
    def result(self) -> dict | None:
        return (self.final or {}).get("result")

    @property
    def error(self) -> dict | None:
        return (self.final or {}).get("error")


class ModernClient:
    """A hand-rolled 2026-07-28 client over HTTP: what it sends is exactly what the test says
    (`meta`, `headers` to add or override, `without` headers to leave out, or a `raw` body)."""

    def __init__(self, url: str, capabilities: dict | None = None, timeout: float = READ_TIMEOUT):
        self.url = url
        self.capabilities = capabilities if capabilities is not None else {}
        self.http = httpx.Client(timeout=timeout)
        self._next_id = 0

    def close(self):
        self.http.close()

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def meta(self, **extra) -> dict:
        return {VERSION_KEY: MODERN_VERSION, CAPABILITIES_KEY: self.capabilities,
                CLIENT_INFO_KEY: {"name": "tests", "version": "1"}, **extra}

    def message(self, method: str, params: dict | None = None, request_id=None, meta: dict | None = None) -> dict:
        """A request with the envelope (`meta` replaces it whole; put `"_meta"` in params to send your own)."""
        params = dict(params or {})
        params.setdefault("_meta", meta if meta is not None else self.meta())
        return {"jsonrpc": "2.0", "id": self.next_id() if request_id is None else request_id, "method": method,
                "params": params}

    def headers(self, message: dict | None, extra: dict | None = None, without=(), accept=ACCEPT_BOTH) -> dict:
        headers = {"Accept": accept, "Content-Type": "application/json", "MCP-Protocol-Version": MODERN_VERSION}
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            method = message["method"]
            headers["Mcp-Method"] = method
            params = message.get("params")
            target = params.get(NAMED.get(method, "")) if isinstance(params, dict) else None
            if isinstance(target, str):
                plain = target.isascii() and target.isprintable() and target == target.strip()
                headers["Mcp-Name"] = target if plain and not target.startswith("=?") else b64_header(target)
        headers.update(extra or {})
        return {k: v for k, v in headers.items() if k.lower() not in {w.lower() for w in without}}

    def send(self, message: dict | None = None, *, headers: dict | None = None, without=(), raw: bytes | None = None,
             accept=ACCEPT_BOTH) -> ModernReply:
        """POST one message (or `raw` bytes, headers from `message`) and read the whole answer."""
        body = raw if raw is not None else json.dumps(message).encode()
        hdrs = self.headers(message, headers, without, accept)
        with self.http.stream("POST", self.url, content=body, headers=hdrs) as response:
            response.read()
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = [json.loads(e.data) for e in _sse_events(text) if e.data]
        else:
            messages = [response.json()] if text else []
        return ModernReply(response.status_code, response.headers, messages, text)

    def request(self, method: str, params: dict | None = None, **kwargs) -> ModernReply:
        send = {k: kwargs.pop(k) for k in ("headers", "without", "raw", "accept") if k in kwargs}
        return self.send(self.message(method, params, **kwargs), **send)

    def call(self, name: str, arguments: dict | None = None, **params) -> ModernReply:
        """tools/call; `request_id`, `meta`, `headers`, `without`, `raw`, `accept` as for `request`, the
        other keywords go into params (inputResponses=..., requestState=...)."""
        kwargs = {k: params.pop(k) for k in ("request_id", "meta", "headers", "without", "raw", "accept")
                  if k in params}
        return self.request("tools/call", {"name": name, "arguments": arguments or {}, **params}, **kwargs)

    def retry(self, reply: ModernReply, message: dict, answers: dict | None = None, **changes) -> ModernReply:
        """`message` again with `reply`'s requestState and these answers (MRTR)."""
        params = {k: v for k, v in message["params"].items() if k not in ("inputResponses", "requestState")}
        if answers is not None:
            params["inputResponses"] = answers
        params["requestState"] = reply.result["requestState"]
        params.update(changes)
        return self.send({**message, "id": self.next_id(), "params": params})

    @contextmanager
    def listen(self, notifications, request_id=None, *, timeout: float = READ_TIMEOUT, headers=None):
        """A subscriptions/listen stream, read incrementally (SSEReader)."""
        message = self.message("subscriptions/listen", {"notifications": notifications}, request_id)
        with self.http.stream("POST", self.url, content=json.dumps(message), headers=self.headers(message, headers),
                              timeout=httpx.Timeout(timeout, connect=5)) as response:
            yield SSEReader(response)


def _sse_events(text: str) -> list[SSEEvent]:
    reader_events = []
    event, data = SSEEvent(), []
    for line in sse_lines([text, "\n\n"]):
        if line == "":
            if data or event.id is not None:
                event.data = "\n".join(data)
                reader_events.append(event)
            event, data = SSEEvent(), []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "id":
                event.id = value
    return reader_events


# Server state, read from daphne's database


def db(server, sql: str, params=()) -> list[tuple]:
    """Rows of `sql` (with `?` placeholders) on the server's database, whatever its backend."""
    return server.query(sql, params)


def json_column(value):
    """A JSON column as Python: SQLite and MariaDB give its text, PostgreSQL (jsonb) the value."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def database_intact(server) -> bool:
    """The server's database passes its engine's own check (SQLite's integrity_check, MariaDB's
    CHECK TABLE), or on PostgreSQL, every table of the app can be read through."""
    if server.backend == "sqlite":
        return db(server, "PRAGMA integrity_check") == [("ok",)]
    tables = ["mcp_transport_session", "mcp_transport_stream", "mcp_transport_event",
              "mcp_transport_streamconnection", "mcp_transport_worker", "mcp_transport_delivery",
              "mcp_transport_subscription", "mcp_transport_accesstoken"]
    if server.backend == "mysql":
        return all(row[3] == "OK" for table in tables for row in db(server, f"CHECK TABLE {table}")
                   if row[2] == "status")
    return all(isinstance(db(server, f"SELECT COUNT(*) FROM {table}")[0][0], int) for table in tables)


def session_count(server) -> int:
    return db(server, "SELECT COUNT(*) FROM mcp_transport_session")[0][0]


def stream_status(server, stream_id: int) -> str | None:
    rows = db(server, "SELECT status FROM mcp_transport_stream WHERE id = %d" % stream_id)
    return rows[0][0] if rows else None


# Fixtures

def _server_errors(log_text: str) -> list[str]:
    bad = []
    for line in log_text.splitlines():
        if "Traceback (most recent call last)" in line or "Unexpected error" in line or " ERROR " in line:
            bad.append(line)
        elif '" 500 ' in line:  # daphne's access log: ... "POST /mcp" 500 123
            bad.append(line)
    return bad


@pytest.fixture
def statuses():
    """Every HTTP status seen by clients made with `mcp`; a 500 fails the test."""
    seen: list[int] = []
    yield seen
    assert 500 not in seen, f"the server answered 500: {seen}"


@pytest.fixture(autouse=True)
def no_server_errors(example_server, request):
    """Fail any test after which the shared daphne logged a 500 or a traceback.

    (Not for tests marked xfail: they document a known bug, which may well log.)"""
    before = len(example_server.logs())
    yield
    if request.node.get_closest_marker("xfail"):
        return
    errors = _server_errors(example_server.logs()[before:])
    assert not errors, "daphne logged errors:\n" + "\n".join(errors)


@pytest.fixture
def mcp(example_server, statuses):
    """`mcp()` -> a new MCPClient on the shared daphne; `mcp(server)` on another one."""
    clients = []

    def make(server=None, **kwargs) -> MCPClient:
        kwargs.setdefault("timeout", READ_TIMEOUT)  # a wrongly endless response fails fast
        c = MCPClient((server or example_server).url, **kwargs)
        c.http.event_hooks["response"].append(lambda r: statuses.append(r.status_code))
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def modern(example_server, statuses):
    """`modern(capabilities={...})` -> a new ModernClient on the shared daphne; `modern(server=...)` elsewhere."""
    clients = []

    def make(server=None, **kwargs) -> ModernClient:
        c = ModernClient((server or example_server).url, **kwargs)
        c.http.event_hooks["response"].append(lambda r: statuses.append(r.status_code))
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def server(daphne, request):
    """`server({...})`: a daphne with MCP_TRANSPORT overrides, whose log must stay free of errors."""
    started = []

    def start(transport=None, **kwargs):
        s = daphne(transport, **kwargs)
        started.append(s)
        return s

    yield start
    if request.node.get_closest_marker("xfail"):
        return
    for s in started:
        errors = _server_errors(s.logs())
        assert not errors, "daphne logged errors:\n" + "\n".join(errors)


def module_daphne(transport: dict):
    """A module-scoped fixture: one daphne with these MCP_TRANSPORT overrides for the whole module."""

    @pytest.fixture(scope="module")
    def fixture():
        with DaphneServer(transport) as s:
            yield s
            errors = _server_errors(s.logs())
            assert not errors, "daphne logged errors:\n" + "\n".join(errors)

    return fixture
