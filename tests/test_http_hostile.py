"""Hostile input over real HTTP, beyond tests/test_http_errors.py: Last-Event-ID abuse, charsets,
truncated / slow / stalled bodies, oversized headers, id types, deep nesting, huge numbers,
NaN / Infinity, duplicate keys, lone surrogates.

Where httpx cannot say it (bare LF in a header, a Content-Length larger than the body, a body
trickled byte by byte, a connection left half-sent), a raw socket does. Every answer must be
spec-shaped (a status and, where the endpoint answered, a JSON-RPC error body), never a 500,
never a hang (every read is bounded), and the server must answer a normal call afterwards.

The shared daphne's log is checked after each test (http_support.no_server_errors). Cases that
once crashed the server run on a quarantined daphne of their own, so a regression's log cannot
be blamed on the next test.
"""
from __future__ import annotations

import json
import re
import shutil
import socket
import threading
import time
from dataclasses import dataclass

import pytest

from mcp_transport.protocol.dispatch import MAX_KEPT_DEPTH

from .http_support import (  # noqa: F401  (fixtures)
    database_intact, db, json_column, mcp, no_server_errors, open_sse, parse_id, progress_values, resume_all,
    responses_to, run_call, server, statuses,
)
from .live import ACCEPT_BOTH, VERSION, DaphneServer, MCPClient

SOCKET_TIMEOUT = 10.0
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


# Raw HTTP/1.1 over a socket


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


class RawConnection:
    """One TCP connection to daphne: send exactly the bytes given, read one response at a time."""

    def __init__(self, port: int, timeout: float = SOCKET_TIMEOUT):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def send(self, data: bytes):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()

    def _fill(self) -> bool:
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        self.buffer += chunk
        return bool(chunk)

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self._fill():
                raise ConnectionError("connection closed in the middle of a response body")
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError("connection closed in the middle of a response")
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def response(self) -> RawResponse | None:
        """The next response, or None if the server closed the connection without one."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                if self.buffer:
                    raise ConnectionError(f"truncated response head: {self.buffer[:200]!r}")
                return None
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line():  # trailers
                        pass
                    break
                body += self._take(size)
                self._take(2)
        elif "content-length" in headers:
            body = self._take(int(headers["content-length"]))
        elif status in (204, 304) or status < 200:
            body = b""
        else:
            while self._fill():
                pass
            body, self.buffer = self.buffer, b""
        return RawResponse(status, headers, body)


def exchange(port: int, data: bytes, *, timeout: float = SOCKET_TIMEOUT) -> RawResponse | None:
    conn = RawConnection(port, timeout)
    try:
        conn.send(data)
        return conn.response()
    finally:
        conn.close()


def http_request(port: int, method: str = "POST", body: bytes = b"", *, session: str | None = None,
                 headers: list[tuple[str, bytes | str]] = (), content_length: int | None | bool = None,
                 accept: str | None = None, content_type: str | bytes | None = "application/json") -> bytes:
    """The bytes of one HTTP/1.1 request; `content_length=False` leaves the header out."""
    lines = [f"{method} /mcp HTTP/1.1".encode(), f"Host: 127.0.0.1:{port}".encode()]
    accept = accept if accept is not None else (ACCEPT_BOTH if method == "POST" else "text/event-stream")
    lines.append(b"Accept: " + accept.encode())
    if method == "POST" and content_type is not None:
        lines.append(b"Content-Type: " + (content_type if isinstance(content_type, bytes) else content_type.encode()))
    if session:
        lines += [b"Mcp-Session-Id: " + session.encode(), b"MCP-Protocol-Version: " + VERSION.encode()]
    for name, value in headers:
        lines.append(name.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    if content_length is not False and (method == "POST" or content_length is not None):
        lines.append(b"Content-Length: %d" % (len(body) if content_length in (None, True) else content_length))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


# Shapes


def assert_rpc_error(response, status: int, code: int, request_id=None) -> dict:
    """An httpx.Response or RawResponse carrying a JSON-RPC error with this status and code."""
    got = getattr(response, "status_code", None) or response.status
    text = response.text if hasattr(response, "text") else response.body.decode("utf-8", "replace")
    assert got == status, (got, text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = json.loads(text)
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert "result" not in body
    return body


def assert_refused(response: RawResponse | None):
    """Refused by the endpoint (4xx + JSON-RPC error) or by the HTTP layer (4xx, or the connection
    closed with no answer) -- never a 5xx."""
    if response is None:
        return
    assert 400 <= response.status < 500, (response.status, response.body[:300])
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json
        assert body["jsonrpc"] == "2.0" and isinstance(body["error"]["code"], int) and "result" not in body


def strict_json(text: str):
    """RFC 8259 JSON only: NaN / Infinity are not JSON."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def assert_healthy(client):
    """A normal request and a streamed call still work on this client's server."""
    assert client.request("ping")["result"] == {}
    _, reader = run_call(client, "echo", {"message": "still fine"})
    assert reader.messages[-1]["result"]["content"][0]["text"] == "still fine"


def request(method="ping", request_id=1, params=None) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


@pytest.fixture
def c(mcp):
    client = mcp()
    client.initialize()
    return client


@pytest.fixture(scope="module")
def quarantine_server():
    """A daphne of its own for the known bugs: whatever they log or leave running stays here."""
    s = DaphneServer().start()
    yield s
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


@pytest.fixture
def quarantine(quarantine_server):
    """`quarantine(initialized=True)` -> a client on the quarantined daphne (its statuses unchecked)."""
    clients = []

    def make(initialized=True) -> MCPClient:
        client = MCPClient(quarantine_server.url, timeout=10)
        clients.append(client)
        if initialized:
            client.initialize()
        return client

    yield make
    for client in clients:
        client.close()


def last_event_get(client, last_event_id):
    return client.http.get(client.url, headers=client.headers({"Last-Event-ID": last_event_id},
                                                              accept="text/event-stream"))


def test_the_server_keeps_its_tables_in_the_suites_database(c, example_server):
    """Run with --ds=tests.settings_postgres or settings_mariadb (make test does), this battery meets
    that database (its column types, lengths, NUL and JSON rules), not SQLite."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[1]
    assert example_server.backend == {"sqlite3": "sqlite"}.get(engine, engine)
    assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_session WHERE id = ?", (c.session_id,)) == [(1,)]


# Last-Event-ID


def test_last_event_id_of_another_stream_of_the_session_replays_only_that_stream(c):
    """Two calls in one session: resuming one replays only its own events, and a sequence
    number that exists only in the other stream is 400, not the other stream's events."""
    _, short = run_call(c, "progress", {"count": 2, "delay": 0}, progress_token="short")
    _, long = run_call(c, "progress", {"count": 8, "delay": 0}, progress_token="long")
    short_stream, short_last = parse_id(short.last_id)
    long_stream, long_last = parse_id(long.last_id)
    assert short_stream != long_stream and long_last > short_last
    replay = resume_all(c, f"{short_stream}-0")
    assert replay.status == 200
    assert {parse_id(e.id)[0] for e in replay.events if e.id} == {short_stream}
    assert progress_values(replay.messages) == [1, 2]
    assert all(m.get("params", {}).get("progressToken") != "long" for m in replay.messages)
    for seq in (short_last + 1, long_last):
        assert_rpc_error(last_event_get(c, f"{short_stream}-{seq}"), 400, -32600)
    # The other stream is untouched by all this.
    assert progress_values(resume_all(c, f"{long_stream}-0").messages, "long") == list(range(1, 9))


INJECTIONS = [
    "1-0' OR '1'='1",
    "1-0; DROP TABLE mcp_transport_event;--",
    "1 OR 1=1",
    "1-0 UNION SELECT payload FROM mcp_transport_event",
    "0x1-0x0",
    "1-0%0d%0aid: 9-9",
    "1-0\\r\\ndata: injected",
    "../1-0",
    "1-0\t1",
    "+1-+0",
    "1e3-0",
    "1-0.5",
    "\u00bd-1",
]


@pytest.mark.parametrize("last_event_id", INJECTIONS)
def test_injection_in_last_event_id_is_refused_and_touches_nothing(c, example_server, last_event_id):
    _, reader = run_call(c, "echo", {"message": "keep me"})
    stream, _ = parse_id(reader.last_id)
    before = db(example_server, "SELECT seq, payload FROM mcp_transport_event WHERE stream_id = ? ORDER BY seq",
                (stream,))
    # Aimed at this session's own stream: a valid id with something after it.
    response = last_event_get(c, last_event_id.replace("1-0", f"{stream}-0").encode("latin-1"))
    body = assert_rpc_error(response, 400, -32600)
    assert "keep me" not in response.text and "Last-Event-ID" in body["error"]["message"]
    after = db(example_server, "SELECT seq, payload FROM mcp_transport_event WHERE stream_id = ? ORDER BY seq",
               (stream,))
    assert after == before
    assert_healthy(c)


@pytest.mark.parametrize("last_event_id", [
    "9223372036854775807-0",            # the largest SQLite integer
    "9223372036854775808-0",            # one past it
    "1-9223372036854775808",
    "99999999999999999999999999999999999-1",
    "0-0",
], ids=["max-int64", "int64-overflow", "seq-overflow", "35-digits", "zero"])
def test_huge_or_zero_stream_numbers_in_last_event_id_are_400(c, last_event_id):
    body = assert_rpc_error(last_event_get(c, last_event_id), 400, -32600)
    assert "event" in body["error"]["message"].lower()
    assert_healthy(c)


@pytest.mark.parametrize("size", [10 * 1024, 15 * 1024])
def test_very_long_last_event_id_is_400(c, size):
    for value in ("1" * size, "1-" + "0" * size, "x" * size):
        assert_rpc_error(last_event_get(c, value), 400, -32600)
    assert_healthy(c)


def test_last_event_id_too_long_for_the_http_layer_is_refused_there(c, example_server):
    """Past Twisted's 16 KiB header line the connection is dropped before the app sees it."""
    data = http_request(example_server.port, "GET", session=c.session_id,
                        headers=[("Last-Event-ID", "1-" + "0" * 100_000)])
    assert_refused(exchange(example_server.port, data))
    assert_healthy(c)


@pytest.mark.parametrize("raw_value", [
    b"1-0\nid: 9-9", b"1-0\rdata: injected", b"1-0\x00", b"1-0\x0bx", b"1-0\r\n data: folded",
], ids=["bare-lf", "bare-cr", "nul", "vertical-tab", "obs-fold"])
def test_line_break_injection_in_last_event_id_never_reaches_the_stream(c, example_server, raw_value):
    """Raw bytes no client library would send: a 400 from the HTTP layer or the endpoint, and
    nothing the attacker wrote comes back as SSE."""
    _, reader = run_call(c, "echo", {"message": "x"})
    stream, _ = parse_id(reader.last_id)
    value = raw_value.replace(b"1-0", f"{stream}-0".encode())
    data = http_request(example_server.port, "GET", session=c.session_id, headers=[("Last-Event-ID", value)])
    response = exchange(example_server.port, data, timeout=5)
    assert response is not None and response.status == 400, response
    assert_refused(response)
    assert b"injected" not in response.body and b"9-9" not in response.body and b"folded" not in response.body
    assert_healthy(c)


def test_two_last_event_id_headers_are_one_malformed_value(c, example_server):
    _, reader = run_call(c, "echo", {"message": "x"})
    stream, _ = parse_id(reader.last_id)
    data = http_request(example_server.port, "GET", session=c.session_id,
                        headers=[("Last-Event-ID", f"{stream}-0"), ("Last-Event-ID", f"{stream}-1")])
    assert_rpc_error(exchange(example_server.port, data), 400, -32600)


@pytest.mark.parametrize("raw_value", [b"1-\xb2", b"\xb9-0", b"\xb2\xb3-\xb9"])
def test_superscript_digits_in_last_event_id_are_400(quarantine, raw_value):
    """Header bytes are Latin-1: b"\\xb2" is "\u00b2", for which str.isdigit() is true, so
    store.parse_event_id lets it through to int(), which raises ValueError -> 500."""
    client = quarantine()
    assert_rpc_error(last_event_get(client, raw_value), 400, -32600)


# Charset and encodings


@pytest.mark.parametrize("content_type", [
    "application/json; charset=UTF-8", 'application/json; charset="utf-8"', "application/json;charset=utf-8",
    "APPLICATION/JSON", "application/json; charset=us-ascii",
])
def test_utf8_compatible_content_types_are_accepted(c, content_type):
    response = c.post_raw(json.dumps(request("ping", 3)), {"Content-Type": content_type})
    assert response.status_code == 200 and response.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.parametrize("charset,encoding", [
    ("iso-8859-1", "latin-1"), ("windows-1252", "cp1252"), ("utf-16", "utf-16"), ("utf-16le", "utf-16-le"),
    ("utf-16be", "utf-16-be"), ("utf-32", "utf-32"),
])
def test_non_utf8_bodies_get_a_clear_parse_error(c, charset, encoding):
    """The body must be UTF-8 whatever the charset parameter says (JSON is UTF-8, RFC 8259 8.1)."""
    body = json.dumps(request("tools/call", 4, {"name": "echo", "arguments": {"message": "caf\u00e9 \u00fc"}}),
                      ensure_ascii=False).encode(encoding)
    response = c.post_raw(body, {"Content-Type": f"application/json; charset={charset}"})
    error = assert_rpc_error(response, 400, -32700)
    assert "UTF-8" in error["error"]["message"]
    assert_healthy(c)


def test_utf8_bom_is_a_parse_error_or_ignored(c):
    """RFC 8259 lets a parser ignore a BOM or refuse it; either way a JSON-RPC answer."""
    response = c.post_raw(b"\xef\xbb\xbf" + json.dumps(request("ping", 5)).encode())
    if response.status_code == 200:
        assert response.json()["id"] == 5
    else:
        assert_rpc_error(response, 400, -32700)


def test_ascii_body_with_a_latin1_charset_label_is_read_as_utf8(c):
    response = c.post_raw(json.dumps(request("ping", 6)), {"Content-Type": "application/json; charset=latin-1"})
    assert response.status_code == 200 and response.json()["id"] == 6


def test_overlong_and_invalid_utf8_sequences_are_parse_errors(c):
    for junk in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"):
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + junk + b'"}}'
        assert_rpc_error(c.post_raw(body), 400, -32700)


# Bodies at the socket level: truncated, mis-sized, chunked, slow, stalled


def test_truncated_body_then_close_runs_nothing(mcp, example_server):
    """Content-Length larger than what was sent, then the connection is closed: no session is
    created, nothing is logged as an error, and the server goes on."""
    body = json.dumps(request("initialize", 1, {"protocolVersion": VERSION, "capabilities": {},
                                                "clientInfo": {"name": "truncated", "version": "1"}})).encode()
    before = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session WHERE client_name = 'truncated'")
    for sent in (0, 1, len(body) // 2, len(body) - 1):
        conn = RawConnection(example_server.port)
        conn.send(http_request(example_server.port, body=body[:sent], content_length=len(body) + 100))
        conn.close()
    conn = RawConnection(example_server.port)
    conn.send(http_request(example_server.port, body=body[:20], content_length=len(body)))
    conn.sock.shutdown(socket.SHUT_WR)  # half-close: the server sees the end, not the rest of the body
    try:
        assert_refused(conn.response())
    except (socket.timeout, ConnectionError):
        pass
    finally:
        conn.close()
    client = mcp()
    client.initialize()
    assert_healthy(client)
    after = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session WHERE client_name = 'truncated'")
    assert after == before


def test_truncated_tools_call_opens_no_stream(c, example_server):
    body = json.dumps(request("tools/call", 2, {"name": "echo", "arguments": {"message": "never"}})).encode()
    streams = "SELECT COUNT(*) FROM mcp_transport_stream WHERE session_id = ?"
    before = db(example_server, streams, (c.session_id,))
    conn = RawConnection(example_server.port)
    conn.send(http_request(example_server.port, body=body[:-5], session=c.session_id, content_length=len(body)))
    conn.close()
    assert c.request("ping")["result"] == {}  # after the server saw the disconnect
    assert db(example_server, streams, (c.session_id,)) == before
    assert_healthy(c)


def test_content_length_smaller_than_the_body(c, example_server):
    """The first Content-Length bytes are the request (a parse error); the rest is not a request."""
    conn = RawConnection(example_server.port)
    try:
        # The rest, ended by a blank line, reads as a (bad) request line of its own.
        conn.send(http_request(example_server.port, body=PING + b"\r\n\r\n", session=c.session_id,
                               content_length=10))
        assert_rpc_error(conn.response(), 400, -32700)
        assert_refused(conn.response())
    finally:
        conn.close()
    assert_healthy(c)


@pytest.mark.parametrize("headers", [
    [("Content-Length", "-5")], [("Content-Length", "abc")], [("Content-Length", "1e3")],
    [("Content-Length", str(len(PING))), ("Content-Length", "3")],
    [("Content-Length", str(len(PING))), ("Transfer-Encoding", "chunked")],
    [("Transfer-Encoding", "gzip")],
], ids=["negative", "junk", "exponent", "two-lengths", "length-and-chunked", "unknown-coding"])
def test_bad_framing_headers_are_refused_without_a_500(c, example_server, headers):
    data = http_request(example_server.port, body=PING, session=c.session_id, headers=headers, content_length=False)
    try:
        response = exchange(example_server.port, data, timeout=5)
    except socket.timeout:
        response = None  # waiting for a body that will not come is fine too
    assert_refused(response)
    assert_healthy(c)


def test_chunked_bodies(c, example_server):
    port = example_server.port
    good = b"%x\r\n%s\r\n0\r\n\r\n" % (len(PING), PING)
    data = http_request(port, body=good, session=c.session_id, headers=[("Transfer-Encoding", "chunked")],
                        content_length=False)
    response = exchange(port, data)
    assert response.status == 200 and response.json == {"jsonrpc": "2.0", "id": 1, "result": {}}
    one_byte_chunks = b"".join(b"1\r\n%s\r\n" % PING[i:i + 1] for i in range(len(PING))) + b"0\r\n\r\n"
    data = http_request(port, body=one_byte_chunks, session=c.session_id,
                        headers=[("Transfer-Encoding", "chunked")], content_length=False)
    assert exchange(port, data).json["result"] == {}
    for bad in (b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\nabcdefgh\r\n0\r\n\r\n", b"ffffffffffffffffffff\r\nx\r\n"):
        data = http_request(port, body=bad, session=c.session_id, headers=[("Transfer-Encoding", "chunked")],
                            content_length=False)
        try:
            response = exchange(port, data, timeout=2)
        except socket.timeout:
            response = None  # still waiting for the huge chunk: fine, it costs one idle connection
        assert_refused(response)
    assert_healthy(c)


def test_a_slow_body_does_not_hold_up_other_requests(mcp, example_server):
    """A body trickled a byte at a time: meanwhile other clients are served, then it completes."""
    slow = mcp()
    slow.initialize()
    body = json.dumps(request("tools/call", 9, {"name": "echo", "arguments": {"message": "slowly"}})).encode()
    conn = RawConnection(example_server.port, timeout=30)
    half_sent = threading.Event()
    others_done = threading.Event()
    result: dict = {}

    def trickle():
        try:
            conn.send(http_request(example_server.port, body=b"", session=slow.session_id,
                                   content_length=len(body)))
            for i, byte in enumerate(body):
                conn.send(bytes([byte]))
                if i == len(body) // 2:
                    half_sent.set()
                    others_done.wait(30)
                elif i % 8 == 0:
                    time.sleep(0.005)
            result["response"] = conn.response()
        except Exception as exc:  # reported below
            result["error"] = exc

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    assert half_sent.wait(30)
    try:
        for _ in range(3):  # other sessions, new and old, are served while the body is half-sent
            other = mcp()
            other.initialize()
            assert_healthy(other)
    finally:
        others_done.set()
    thread.join(30)
    conn.close()
    assert "error" not in result, result.get("error")
    response = result["response"]
    assert response.status == 200
    assert "slowly" in response.body.decode()


def test_stalled_connections_do_not_block_the_server(mcp, example_server):
    """Connections left mid-headers and mid-body (slowloris): the server still serves others,
    and forgets them cleanly once they go."""
    port = example_server.port
    stalled = []
    try:
        for i in range(40):
            conn = RawConnection(port)
            full = http_request(port, body=PING * 4, content_length=len(PING) * 4)
            conn.send(full[: len(full) // 2] if i % 2 else full[:30])  # mid-body / mid-headers
            stalled.append(conn)
        client = mcp()
        client.initialize()
        assert_healthy(client)
    finally:
        for conn in stalled:
            conn.close()
    client = mcp()
    client.initialize()
    assert_healthy(client)


def test_pipelined_requests_each_get_their_answer(c, example_server):
    port = example_server.port
    one = http_request(port, body=json.dumps(request("ping", 1)).encode(), session=c.session_id)
    two = http_request(port, body=b"{broken", session=c.session_id)
    three = http_request(port, body=json.dumps(request("ping", 3)).encode(), session=c.session_id)
    conn = RawConnection(port)
    try:
        conn.send(one + two + three)
        assert conn.response().json == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert_rpc_error(conn.response(), 400, -32700)
        assert conn.response().json == {"jsonrpc": "2.0", "id": 3, "result": {}}
    finally:
        conn.close()


def test_not_http_at_all_is_dropped(c, example_server):
    """A TLS ClientHello or binary junk on the plain-HTTP port."""
    for junk in (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
                 b"\x00\xff" * 100 + b"\r\n\r\n", b"GET\r\n\r\n", b"POST /mcp HTTP/9.9\r\n\r\n"):
        try:
            response = exchange(example_server.port, junk, timeout=5)
        except (socket.timeout, ConnectionError):
            response = None
        assert_refused(response)
    assert_healthy(c)


# Oversized headers


def test_a_10k_header_is_fine(c, example_server):
    data = http_request(example_server.port, body=PING, session=c.session_id, headers=[("X-Padding", "a" * 10_000)])
    assert exchange(example_server.port, data).json["result"] == {}


@pytest.mark.parametrize("headers", [
    [("X-Padding", "a" * 20_000)],
    [("X-Padding", "a" * 1_000_000)],
    [(f"X-H{i}", "v") for i in range(1000)],
    [(f"X-H{i}", "v" * 8000) for i in range(20)],
], ids=["20k-value", "1M-value", "1000-headers", "20x8k"])
def test_oversized_headers_are_refused_by_the_http_layer(c, example_server, headers):
    data = http_request(example_server.port, body=PING, session=c.session_id, headers=headers)
    try:
        response = exchange(example_server.port, data)
    except (ConnectionError, BrokenPipeError):
        response = None  # dropped while we were still sending
    assert_refused(response)
    assert_healthy(c)


@pytest.mark.parametrize("name,status,code", [
    ("Mcp-Session-Id", 404, -32001), ("MCP-Protocol-Version", 400, -32600), ("Origin", 403, -32600),
    ("Host", 403, -32600), ("Accept", 406, -32600), ("Content-Type", 415, -32600),
])
def test_8k_values_of_the_headers_that_matter(c, name, status, code):
    hdrs = {name: "x" * 8000}
    assert_rpc_error(c.post_raw(json.dumps(request("ping", 1)), hdrs), status, code,
                     1 if name in ("Mcp-Session-Id", "MCP-Protocol-Version") else None)


def test_8k_authorization_header_is_ignored_without_auth_backends(c):
    response = c.post_raw(json.dumps(request("ping", 1)), {"Authorization": "Bearer " + "x" * 8000})
    assert response.status_code == 200


# Id types


@pytest.mark.parametrize("request_id", [
    2 ** 63 - 1, 2 ** 63, 2 ** 64, -(2 ** 63), -(2 ** 64), int("9" * 4000), "\u00e9\u4e2d\U0001f600",
    "line\nbreak", "data: x\n\nid: 9-9\n\n", "\r\r\n", "\u2028\u2029\u0085", "x" * 100_000, " ", "null",
], ids=["int64-max", "int64-overflow", "2^64", "int64-min", "-2^64", "4000-digits", "unicode", "newline",
        "sse-injection", "cr", "unicode-line-separators", "100k", "space", "null-string"])
def test_odd_but_valid_ids_are_echoed_exactly_plain_and_streamed(c, request_id):
    response = c.post(request("ping", request_id))
    assert response.status_code == 200 and response.json() == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    message = request("tools/call", request_id, {"name": "echo", "arguments": {"message": "m"}})
    with open_sse(c, "POST", message) as reader:
        reader.read_all()
    assert reader.status == 200 and len(reader.messages) == 1
    assert reader.messages[0] == {"jsonrpc": "2.0", "id": request_id,
                                  "result": {"content": [{"type": "text", "text": "m"}]}}
    assert reader.events[-1].id is not None and re.fullmatch(r"\d+-\d+", reader.events[-1].id)


def test_an_id_too_long_for_python_ints_is_a_parse_error(c):
    body = b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}'
    assert_rpc_error(c.post_raw(body), 400, -32700)


@pytest.mark.parametrize("literal", [b"1.0", b"1e2", b"-0.0", b"1e-400", b"0.1"])
def test_non_integer_numeric_ids_are_invalid_requests(c, literal):
    assert_rpc_error(c.post_raw(b'{"jsonrpc":"2.0","id":' + literal + b',"method":"ping"}'), 400, -32600)


def test_minus_zero_id_is_the_integer_zero(c):
    response = c.post_raw(b'{"jsonrpc":"2.0","id":-0,"method":"ping"}')
    assert response.status_code == 200 and response.json()["id"] == 0


def test_ids_1_and_string_1_in_flight_together_stay_apart(c):
    from concurrent.futures import ThreadPoolExecutor

    def call(request_id, token):
        message = request("tools/call", request_id, {"name": "progress", "arguments": {"count": 3, "delay": 0.05},
                                                     "_meta": {"progressToken": token}})
        with open_sse(c, "POST", message) as reader:
            reader.read_all()
        return reader.messages

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(call, [1, "1"], ["int", "str"])
    assert progress_values(a, "int") == [1, 2, 3] and progress_values(a, "str") == []
    assert progress_values(b, "str") == [1, 2, 3] and progress_values(b, "int") == []
    assert responses_to(a, 1)[0]["result"]["content"][0]["text"] == "done 3"
    assert responses_to(b, "1")[0]["result"]["content"][0]["text"] == "done 3"


def test_client_responses_with_odd_ids_are_accepted_and_ignored(c):
    for request_id in (2 ** 64, "\n", "x" * 10_000, -1):
        response = c.post({"jsonrpc": "2.0", "id": request_id, "result": {"anything": [1, 2]}})
        assert response.status_code == 202 and response.content == b""
    assert_healthy(c)


# Deep nesting, huge numbers, duplicate keys


def _nested(depth: int, kind: str = "array") -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    return '{"a":[' * (depth // 2) + "1" + "]}" * (depth // 2)


@pytest.mark.parametrize("kind", ["array", "object", "mixed"])
@pytest.mark.parametrize("where", ["top", "params", "arguments", "id"])
def test_100k_nesting_is_a_parse_error_not_a_recursion_crash(c, kind, where):
    deep = _nested(100_000, kind)
    body = {
        "top": deep,
        "params": '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%s}}' % deep,
        "arguments": '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":%s}}' % deep,
        "id": '{"jsonrpc":"2.0","id":%s,"method":"ping"}' % deep,
    }[where]
    assert_rpc_error(c.post_raw(body), 400, -32700)
    assert_healthy(c)


@pytest.mark.parametrize("depth", [100, 500])
def test_moderate_nesting_in_params_is_served(c, depth):
    deep = json.loads(_nested(depth))
    assert c.post(request("ping", 1, {"x": deep})).json()["result"] == {}
    _, reader = run_call(c, "echo", {"message": "m", "extra": deep})
    assert reader.messages[-1]["result"]["content"][0]["text"] == "m"
    _, reader = run_call(c, "progress", {"count": 1, "delay": 0}, progress_token={"deep": deep})
    assert progress_values(reader.messages, {"deep": deep}) == [1]


@pytest.mark.parametrize("depth", [MAX_KEPT_DEPTH, MAX_KEPT_DEPTH + 1, 100, 500])
def test_capabilities_nest_only_as_deep_as_every_database_keeps(mcp, example_server, depth):
    """The session keeps its client's capabilities as JSON, and MariaDB's JSON check refuses 32
    levels: initialize with deeper ones was a 500 there (IntegrityError), stored elsewhere. Now the
    same on every database: kept exactly up to MAX_KEPT_DEPTH, -32602 and no session beyond."""
    capabilities = {"experimental": {"deep": json.loads(_nested(depth - 2))}}
    client = mcp()
    sessions = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session")
    message = request("initialize", 7, {"protocolVersion": VERSION, "capabilities": capabilities,
                                        "clientInfo": {"name": "deep", "version": "1"}})
    response = client.post(message)
    if depth <= MAX_KEPT_DEPTH:
        assert response.status_code == 200, response.text
        stored = db(example_server, "SELECT client_capabilities FROM mcp_transport_session WHERE id = ?",
                    (response.headers["mcp-session-id"],))
        assert json_column(stored[0][0]) == capabilities
    else:
        body = assert_rpc_error(response, 400, -32602, 7)
        assert "capabilities" in body["error"]["message"]
        assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_session") == sessions


@pytest.mark.parametrize("number", [b"1e308", b"-1e308", b"1e-400", b"123456789012345678901234567890",
                                    b"9" * 4000, b"-" + b"9" * 4000, b"0.000000000000000000000000001"])
def test_huge_numbers_in_params_get_json_rpc_answers(c, number):
    cases = [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":%s}}', 200),
        (b'{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":%s}}', 200),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%s}}', 200),
    ]
    for template, status in cases:
        response = c.post_raw(template % number)
        assert response.status_code == status, response.text
        assert response.json()["id"] == 1
    body = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":%s}}}'
    with c.http.stream("POST", c.url, content=body % number, headers=c.headers()) as response:
        response.read()
    assert response.status_code == 200
    assert '"isError":true' in response.text  # a tool error: the message must be a string
    assert_healthy(c)


def test_huge_number_as_a_progress_token_is_echoed_exactly(c):
    token = int("7" * 4000)
    _, reader = run_call(c, "progress", {"count": 2, "delay": 0}, progress_token=token)
    assert progress_values(reader.messages, token) == [1, 2]


@pytest.mark.parametrize("body,expected", [
    (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', ("ok", 2)),
    (b'{"jsonrpc":"2.0","id":1,"method":"no/such","method":"ping"}', ("ok", 1)),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"no/such"}', ("error", -32601)),
    (b'{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"ping"}', ("ok", 1)),
    (b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}', ("invalid", -32600)),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"params":[1]}', ("invalid", -32600)),
], ids=["id", "method-last-wins", "method-last-unknown", "jsonrpc-last-ok", "jsonrpc-last-bad", "params"])
def test_duplicate_keys_last_one_wins_consistently(c, body, expected):
    """Documented behaviour (Python's json): the last duplicate wins, for routing and echo alike."""
    response = c.post_raw(body)
    kind, value = expected
    if kind == "ok":
        assert response.status_code == 200 and response.json() == {"jsonrpc": "2.0", "id": value, "result": {}}
    elif kind == "error":
        assert_rpc_error(response, 200, value, 1)
    else:
        assert_rpc_error(response, 400, value)


def test_duplicate_tool_names_and_arguments_last_one_wins(c):
    body = (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool","name":"echo",'
            b'"arguments":{"message":"first","message":"second"}}}')
    with c.http.stream("POST", c.url, content=body, headers=c.headers()) as response:
        response.read()
    assert response.status_code == 200
    assert '"text":"second"' in response.text and "first" not in response.text


# NaN / Infinity, numbers out of range, lone surrogates: not JSON, or not sendable back

NOT_JSON_BODIES = {
    "nan-id": b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    "nan-params": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
    "infinity": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
    "-infinity": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
    "1e400-id": b'{"jsonrpc":"2.0","id":1E400,"method":"ping"}',
    "-1e400": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-1e400}}',
    "nan-progress-token": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress",'
                           b'"arguments":{"count":1,"delay":0},"_meta":{"progressToken":NaN}}}'),
    "1e400-progress-token": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress",'
                             b'"arguments":{"count":1,"delay":0},"_meta":{"progressToken":1e400}}}'),
    "nan-tool-argument": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress",'
                          b'"arguments":{"count":1,"delay":NaN}}}'),
    "initialize-capabilities": (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                                b'"2025-11-25","capabilities":{"x":NaN},"clientInfo":{"name":"n","version":"1"}}}'),
    "client-response": b'{"jsonrpc":"2.0","id":"srv-1","result":{"x":Infinity}}',
    "surrogate-method": b'{"jsonrpc":"2.0","id":1,"method":"x\\ud800"}',
    "surrogate-id": b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    "surrogate-tool-name": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\udfff"}}',
    "surrogate-echo": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",'
                       b'"arguments":{"message":"a\\udc00b"}}}'),
    "surrogate-key": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\ud800":1}}',
    "reversed-pair": b'{"jsonrpc":"2.0","id":"\\udc00\\ud800","method":"ping"}',
    "initialize-client-name": (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                               b'"2025-11-25","capabilities":{},"clientInfo":{"name":"\\ud800","version":"1"}}}'),
}


@pytest.mark.parametrize("where", list(NOT_JSON_BODIES))
def test_nan_infinity_out_of_range_numbers_and_lone_surrogates_are_parse_errors(mcp, example_server, where):
    """NaN / Infinity are not JSON (RFC 8259); 1e400 only parses to a float infinity; a lone
    surrogate escape parses to a string no UTF-8 answer can carry. All are -32700 up front: none
    reaches a tool, the store or a response (they once gave 500s, a bare `NaN` on the wire, a
    call that never answered, and a NaN sleep that stalled the event loop)."""
    client = mcp()
    initialize = where.startswith("initialize")
    if not initialize:
        client.initialize()
    sessions = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session")
    assert_rpc_error(client.post_raw(NOT_JSON_BODIES[where]), 400, -32700)
    if initialize:
        assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_session") == sessions
    else:
        assert_healthy(client)


@pytest.mark.parametrize("escape", [b"\\ud83d\\ude00", b"\\uD83D\\uDE00", b"\\u00e9", b"\\u2028", b"\\u0000"])
def test_valid_unicode_escapes_are_served_and_sent_back_as_json(c, escape):
    """Proper surrogate pairs and other escapes are fine, in ids and in tool text alike."""
    expected = json.loads(b'"' + escape + b'"')
    body = b'{"jsonrpc":"2.0","id":"' + escape + b'","method":"tools/call","params":{"name":"echo",' \
           b'"arguments":{"message":"' + escape + b'"}}}'
    with c.http.stream("POST", c.url, content=body, headers=c.headers()) as response:
        response.read()
    assert response.status_code == 200
    finals = [strict_json(line[6:]) for line in response.text.splitlines()
              if line.startswith("data: ") and line != "data: "]
    assert finals[-1] == {"jsonrpc": "2.0", "id": expected, "result": {"content": [{"type": "text", "text": expected}]}}


# Afterwards


def test_the_shared_server_is_healthy_after_the_battery(mcp, example_server):
    client = mcp()
    client.initialize()
    assert_healthy(client)
    _, reader = run_call(client, "progress", {"count": 5, "delay": 0}, progress_token="after")
    assert progress_values(reader.messages, "after") == [1, 2, 3, 4, 5]
    assert database_intact(example_server)
