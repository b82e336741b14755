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
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import httpx
import pytest

from mcp_transport.protocol.dispatch import MAX_KEPT_DEPTH
from mcp_transport.protocol.jsonrpc import MAX_DEPTH

from .http_support import (  # noqa: F401  (fixtures)
    CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, VERSION_KEY, ModernClient, _server_errors, b64_header,
    database_intact, db, json_column, mcp, modern, no_server_errors, open_sse, parse_id, progress_values,
    resume_all, responses_to, run_call, server, statuses, wait_for,
)
from .live import ACCEPT_BOTH, ROOT, VERSION, DaphneServer, MCPClient, manage_oauth_server, start_oauth_server

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


# MCP 2026-07-28 ("modern") requests: request state, headers, _meta, listen streams, both eras side by side

MRTR_TOOL = "test_input_required_result_elicitation"
ASKING = {"elicitation": {}, "sampling": {}, "roots": {}}
NAME_ANSWER = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}


@pytest.fixture
def m(modern):
    """A modern client that may be asked anything (elicitation, sampling, roots)."""
    return modern(capabilities=ASKING)


@pytest.fixture(scope="module")
def bystander(example_server):
    """A 2025-11-25 session opened before this module's modern requests, that every test checks is
    still served afterwards (ping, a streamed call)."""
    client = MCPClient(example_server.url, timeout=10)
    client.initialize()
    yield client
    client.close()


def assert_modern_error(reply, status: int, code: int, request_id, fragment: str | None = None) -> dict:
    """A modern refusal: this status, one JSON body, a JSON-RPC error with the request's id."""
    assert reply.status == status, (reply.status, reply.text[:300])
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    assert "mcp-session-id" not in reply.headers
    body = strict_json(reply.text)
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id and "result" not in body, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    if fragment is not None:
        assert fragment in body["error"]["message"], body
    return body


def assert_modern_healthy(client: "ModernClient"):
    """A quick modern call and an MRTR round trip (the client declares elicitation) still work."""
    echo = client.call("echo", {"message": "modern still fine"})
    assert echo.status == 200 and echo.result["resultType"] == "complete", echo.text
    assert echo.result["content"] == [{"type": "text", "text": "modern still fine"}]
    first_message = client.message("tools/call", {"name": MRTR_TOOL, "arguments": {}})
    first = client.send(first_message)
    assert first.result["resultType"] == "input_required", first.text
    done = client.retry(first, first_message, NAME_ANSWER)
    assert done.result["content"][0]["text"] == "Hello, Ada!", done.text


def assert_both_eras_serve(session_client, client):
    """After the hostile request: a session (legacy) and a stateless (modern) client are both served."""
    assert_healthy(session_client)
    assert_modern_healthy(client)


def reseal(state: str, *, age: float = 0, change=None) -> str:
    """The server's own requestState, re-signed with its key (the example project's SECRET_KEY, the
    same in this process): `change(payload)` edits it, `age` dates it that many seconds back."""
    from unittest import mock

    from django.core import signing

    from mcp_transport.protocol import mrtr

    payload = signing.loads(state, key=mrtr._key(), salt=mrtr.SALT)
    if change is not None:
        change(payload)
    stamp = signing.b62_encode(int(time.time() - age))
    with mock.patch.object(signing.TimestampSigner, "timestamp", lambda self: stamp):
        return signing.dumps(payload, key=mrtr._key(), salt=mrtr.SALT, compress=True)


def first_round(client, name=MRTR_TOOL, arguments=None):
    message = client.message("tools/call", {"name": name, "arguments": arguments or {}})
    reply = client.send(message)
    assert reply.status == 200 and reply.result["resultType"] == "input_required", reply.text
    return message, reply


def with_state(client, message, state, answers=NAME_ANSWER, request_id=None, **changes):
    params = {**message["params"], "inputResponses": answers, "requestState": state, **changes}
    return client.send({**message, "id": client.next_id() if request_id is None else request_id, "params": params})


def signed_elsewhere(payload) -> str:
    from django.core import signing

    from mcp_transport.protocol import mrtr

    return signing.dumps(payload, key="another-deployment-key", salt=mrtr.SALT, compress=True)


def other_salt(payload) -> str:
    from django.core import signing

    from mcp_transport.protocol import mrtr

    return signing.dumps(payload, key=mrtr._key(), salt="django.core.signing", compress=True)


FORGERIES = {
    "last-char": lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),
    "truncated": lambda s: s[: len(s) // 2],
    "signature-only": lambda s: s.rsplit(":", 1)[1],
    "payload-flipped": lambda s: ("." + s[2:]) if s.startswith(".") else ("x" + s[1:]),
    "empty": lambda s: "",
    "colons": lambda s: "::::",
    "garbage": lambda s: "not a state at all \u00e9\u4e2d",
    "other-key": lambda s: signed_elsewhere({"b": ["", "tools/call", MRTR_TOOL, "0"], "a": {}, "p": {}}),
    "other-salt": lambda s: other_salt({"b": ["", "tools/call", MRTR_TOOL, "0"], "a": {}, "p": {}}),
    "nul": lambda s: s + "\x00",
    "whitespace": lambda s: " " + s + "\n",
}


@pytest.mark.parametrize("how", list(FORGERIES))
def test_forged_request_state_is_invalid_params(bystander, m, how):
    message, first = first_round(m)
    state = FORGERIES[how](first.result["requestState"])
    reply = with_state(m, message, state, request_id=f"forged-{how}")
    assert_modern_error(reply, 400, -32602, f"forged-{how}", "requestState")
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("payload", [[1, 2], "b", None, 7, {"b": "x"}, {}, {"a": {}, "p": {}}],
                         ids=["list", "string", "null", "number", "b-string", "empty", "no-binding"])
def test_validly_signed_state_of_another_shape_is_invalid_params(m, payload):
    """Signed with the server's own key but not a state it made: refused, never a crash."""
    from django.core import signing

    from mcp_transport.protocol import mrtr

    message, _ = first_round(m)
    state = signing.dumps(payload, key=mrtr._key(), salt=mrtr.SALT, compress=True)
    assert_modern_error(with_state(m, message, state, request_id=9), 400, -32602, 9, "another request")


def test_expired_request_state_is_invalid_params_and_says_so(bystander, m):
    message, first = first_round(m)
    state = first.result["requestState"]
    expired = with_state(m, message, reseal(state, age=900 + 60), request_id="late")
    assert_modern_error(expired, 400, -32602, "late", "expired")
    # The same state, re-dated to now, is the server's own again: only its age was refused.
    fresh = with_state(m, message, reseal(state), request_id="on-time")
    assert fresh.status == 200 and fresh.result["content"][0]["text"] == "Hello, Ada!", fresh.text
    assert_both_eras_serve(bystander, m)


def test_replayed_request_state_answers_the_same_and_cannot_change_an_earlier_answer(m):
    """requestState is not single-use (the spec's retries must be safe to repeat): a replay gets the
    same answer, and a replayed later round keeps the answers it signed, whatever the client adds."""
    message = m.message("tools/call", {"name": "test_input_required_result_multi_round", "arguments": {}})
    r1 = m.send(message)
    r2 = m.retry(r1, message, {"step1": {"action": "accept", "content": {"name": "Ada"}}})
    assert list(r2.result["inputRequests"]) == ["step2"]
    blue = {"step2": {"action": "accept", "content": {"color": "blue"}}}
    done = [m.retry(r2, message, blue) for _ in range(3)]
    assert [d.result["content"][0]["text"] for d in done] == ["Ada likes blue"] * 3
    # Round 1's state again, after round 2: asks step2 again, as it did the first time.
    again = m.retry(r1, message, {"step1": {"action": "accept", "content": {"name": "Ada"}}})
    assert list(again.result["inputRequests"]) == ["step2"]
    # Round 2's state with a new answer to step1: the signed one stands.
    forged = m.retry(r2, message, {"step1": {"action": "accept", "content": {"name": "Mallory"}}, **blue})
    assert forged.result["content"][0]["text"] == "Ada likes blue"


@pytest.mark.parametrize("change", ["arguments", "tool", "method", "principal", "uri"])
def test_request_state_for_another_request_is_invalid_params(bystander, m, change):
    message, first = first_round(m, "test_elicitation", {"message": "m"})
    state = first.result["requestState"]
    answers = {next(iter(first.result["inputRequests"])): {"action": "accept", "content": {"username": "u"}}}
    if change == "arguments":
        reply = with_state(m, message, state, answers, arguments={"message": "other"})
    elif change == "tool":
        reply = with_state(m, message, state, answers, name=MRTR_TOOL)
    elif change == "method":
        prompt = m.message("prompts/get", {"name": "test_input_required_result_prompt", "arguments": {},
                                           "requestState": state, "inputResponses": answers})
        reply = m.send(prompt)
    elif change == "principal":
        reply = with_state(m, message, reseal(state, change=lambda p: p["b"].__setitem__(0, "someone-else")), answers)
    else:
        read = m.message("resources/read", {"uri": "test://static-text", "requestState": state})
        reply = m.send(read)
    assert_modern_error(reply, 400, -32602, reply.final["id"], "another request")
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("state", [1, 1.5, True, [], ["x"], {}, {"b": []}, None],
                         ids=["int", "float", "bool", "empty-list", "list", "empty-object", "object", "null"])
def test_request_state_that_is_not_a_string_is_invalid_params(m, state):
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "requestState": state}, "typed")
    assert_modern_error(m.send(message), 400, -32602, "typed", "requestState")


def test_absurdly_large_request_state_is_refused_without_a_500(bystander, m, example_server):
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "requestState": "A" * 3_500_000}, "big")
    assert_modern_error(m.send(message), 400, -32602, "big", "requestState")
    # A real state with a megabyte of colons and base64 after it: still only "not valid".
    _, first = first_round(m)
    padded = first.result["requestState"] + ":" + "QUFB" * 250_000
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "requestState": padded}, "padded")
    assert_modern_error(m.send(message), 400, -32602, "padded", "requestState")
    # Past MAX_REQUEST_BYTES (4 MiB): the HTTP refusal, 413, before any parsing.
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "requestState": "A" * 5_000_000})
    reply = m.send(message)
    assert reply.status == 413 and strict_json(reply.text)["error"]["code"] == -32600
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("responses", [[], [NAME_ANSWER], "user_name", 12, True, None],
                         ids=["list", "list-of-answers", "string", "number", "bool", "null"])
def test_input_responses_that_are_not_an_object_are_invalid_params(m, responses):
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "inputResponses": responses}, "r")
    assert_modern_error(m.send(message), 400, -32602, "r", "inputResponses")


@pytest.mark.parametrize("answer", [12345, "accept", [], None, True, {"action": "maybe"}, {"action": None},
                                    {"action": ["accept"]}, {"content": {"name": "x"}}],
                         ids=["number", "string", "list", "null", "bool", "unknown-action", "null-action",
                              "list-action", "no-action"])
def test_an_answer_of_the_wrong_shape_is_invalid_params_or_asked_again(m, answer):
    """The tool asks again when the answer is missing (null), and -32602 when it is no answer at all."""
    message = m.message("tools/call", {"name": MRTR_TOOL, "arguments": {}, "inputResponses": {"user_name": answer}},
                        "a")
    reply = m.send(message)
    if answer is None:
        assert reply.status == 200 and list(reply.result["inputRequests"]) == ["user_name"], reply.text
        return
    # After dispatch (the tool asked): a JSON-RPC error in a 200, as any tool's invalid params.
    assert_modern_error(reply, 200, -32602, "a", "inputResponses.user_name")


@pytest.mark.parametrize("kind", ["sampling", "roots"])
def test_sampling_and_roots_answers_of_the_wrong_shape_are_invalid_params(m, kind):
    name, key, bad = {"sampling": ("test_input_required_result_sampling", "capital_question", {"content": "Paris"}),
                      "roots": ("test_input_required_result_list_roots", "client_roots", {"roots": "file:///"})}[kind]
    message = m.message("tools/call", {"name": name, "arguments": {}, "inputResponses": {key: bad}}, kind)
    assert_modern_error(m.send(message), 200, -32602, kind, key)


@pytest.mark.parametrize("name, key, answer", [
    (MRTR_TOOL, "user_name", {"action": "accept", "content": "Ada"}),
    (MRTR_TOOL, "user_name", {"action": "accept", "content": ["Ada"]}),
    ("test_input_required_result_list_roots", "client_roots", {"roots": [1, None, "x"]}),
    ("test_input_required_result_list_roots", "client_roots", {"roots": [{"name": "no uri"}]}),
    ("test_input_required_result_list_roots", "client_roots", {"roots": [{"uri": 7}]}),
    ("test_input_required_result_sampling", "capital_question", {"content": [None, 1]}),
    ("test_input_required_result_sampling", "capital_question", {"content": {"text": "no type"}}),
    ("test_input_required_result_sampling", "capital_question", {"content": [{"type": 1}]}),
], ids=["content-string", "content-list", "roots-scalars", "root-without-uri", "root-uri-int", "blocks-scalars",
        "block-without-type", "block-type-int"])
def test_answers_of_the_right_kind_but_wrong_insides_are_invalid_params(bystander, m, name, key, answer):
    """What a tool reads in an answer is checked too: such answers once reached the tools, which
    failed on them (AttributeError, a traceback in the log, an isError result)."""
    reply = m.call(name, inputResponses={key: answer}, request_id="insides")
    assert_modern_error(reply, 200, -32602, "insides", key)
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("name, key, answer, text", [
    (MRTR_TOOL, "user_name", {"action": "decline"}, "Hello, stranger!"),
    (MRTR_TOOL, "user_name", {"action": "accept", "content": None}, "Hello, stranger!"),
    ("test_input_required_result_list_roots", "client_roots", {"roots": []}, "The client has 0 root(s): "),
    ("test_input_required_result_sampling", "capital_question", {"content": []}, "The model says: "),
    ("test_input_required_result_sampling", "capital_question",
     {"content": [{"type": "text", "text": "Paris"}, {"type": "image", "data": "", "mimeType": "image/png"}]},
     "The model says: Paris"),
])
def test_minimal_answers_of_the_right_shape_are_taken(m, name, key, answer, text):
    reply = m.call(name, inputResponses={key: answer})
    assert reply.status == 200 and reply.result["content"][0]["text"] == text, reply.text


def test_many_unasked_answers_and_odd_keys_are_ignored(m):
    answers = {f"k{i}": {"action": "accept", "content": {}} for i in range(20_000)}
    answers.update({"": {"action": "accept"}, "\x00": {"action": "accept"}, "\u00e9\U0001f600": 1, **NAME_ANSWER})
    reply = m.call(MRTR_TOOL, inputResponses=answers)
    assert reply.status == 200 and reply.result["content"][0]["text"] == "Hello, Ada!", reply.text[:300]


@pytest.mark.parametrize("depth", [100_000, 2_000])
def test_deeply_nested_answers_and_state_are_parse_errors(bystander, m, depth):
    for where in ("inputResponses", "requestState"):
        body = ('{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"%s","arguments":{},'
                '"_meta":%s,"%s":%s}}' % (MRTR_TOOL, json.dumps(m.meta()), where, _nested(depth, "mixed")))
        reply = m.send({"method": "tools/call", "params": {"name": MRTR_TOOL}}, raw=body.encode())
        assert_modern_error(reply, 400, -32700, None)
    assert_both_eras_serve(bystander, m)


def test_answers_as_deep_as_a_message_may_nest_are_kept_in_the_state(m):
    """An answer nested to the parser's limit goes into the signed state and back (it once passed the
    parser and broke signing: RecursionError, the tool failed)."""
    message = m.message("tools/call", {"name": "test_input_required_result_multi_round", "arguments": {}})
    deep = json.loads(_nested(MAX_DEPTH - 12))
    r2 = m.send({**message, "params": {**message["params"], "inputResponses": {
        "step1": {"action": "accept", "content": {"name": "Ada", "deep": deep}}}}})
    assert r2.status == 200 and list(r2.result["inputRequests"]) == ["step2"], r2.text[:300]
    done = m.retry(r2, message, {"step2": {"action": "accept", "content": {"color": "red"}}})
    assert done.result["content"][0]["text"] == "Ada likes red"


# Nesting right at the limit, wherever it is: served, or -32700, never the RecursionError of a
# message that parsed and could not be digested or serialized again (a 500 at 970 levels once).
NEAR_LIMIT = sorted({MAX_DEPTH - 6, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 960, 970, 975})
DEEP_PLACES = {
    "modern-arguments": ("tools/call", {"name": "echo", "arguments": {"message": "x", "deep": "@@"}}),
    "modern-prompt": ("prompts/get", {"name": "test_simple_prompt", "arguments": {"x": "@@"}}),
    "modern-read": ("resources/read", {"uri": "test://static-text", "x": "@@"}),
    "modern-answers": ("tools/call", {"name": "test_input_required_result_multi_round", "arguments": {},
                                      "inputResponses": {"step1": {"action": "accept", "content": {"d": "@@"}}}}),
    "modern-token": ("tools/call", {"name": "progress", "arguments": {"count": 1, "delay": 0},
                                    "_meta": "meta+token"}),
    "modern-listen": ("subscriptions/listen", {"notifications": {"x": "@@"}}),
    "legacy-arguments": ("legacy", {"name": "echo", "arguments": {"message": "x", "deep": "@@"}}),
    "legacy-token": ("legacy", {"name": "progress", "arguments": {"count": 1, "delay": 0},
                                "_meta": {"progressToken": "@@"}}),
}


@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_nesting_at_the_parsers_limit_is_served_or_a_parse_error(bystander, m, place):
    method, params = DEEP_PLACES[place]
    for depth in NEAR_LIMIT:
        if method == "legacy":
            message = request("tools/call", f"{place}-{depth}", dict(params))
        else:
            message = m.message(method, dict(params), f"{place}-{depth}")
            if params.get("_meta") == "meta+token":
                message["params"]["_meta"] = {**m.meta(), "progressToken": "@@"}
        body = json.dumps(message).replace('"@@"', _nested(depth - 5))
        if method == "legacy":
            response = bystander.post_raw(body)
            status, text = response.status_code, response.text
        elif method == "subscriptions/listen":
            with m.http.stream("POST", m.url, content=body, headers=m.headers(message)) as response:
                status = response.status_code
                text = next(response.iter_text(), "")
        else:
            reply = m.send(message, raw=body.encode())
            status, text = reply.status, reply.text
        assert status in (200, 400), (depth, status, text[:200])
        if status == 400:
            assert '"code":-32700' in text, (depth, text[:200])
        else:
            assert '"code":-32603' not in text and "Internal error" not in text, (depth, text[:300])
    assert_both_eras_serve(bystander, m)


# Headers that do not mirror the body


def modern_call_message(client, name="echo", arguments=None, request_id="h"):
    return client.message("tools/call", {"name": name, "arguments": {"message": "x"} if arguments is None
                                         else arguments}, request_id)


@pytest.mark.parametrize("headers, without, code, fragment", [
    ({}, ["MCP-Protocol-Version"], -32020, "MCP-Protocol-Version"),
    ({"MCP-Protocol-Version": "2025-11-25"}, [], -32020, "does not match"),
    ({"MCP-Protocol-Version": "2026-07-28, 2026-07-28"}, [], -32020, "does not match"),
    ({"MCP-Protocol-Version": ""}, [], -32020, "does not match"),
    ({"MCP-Protocol-Version": "2026-07-29"}, [], -32020, "does not match"),
    ({}, ["Mcp-Method"], -32020, "Mcp-Method"),
    ({"Mcp-Method": "tools/list"}, [], -32020, "Mcp-Method"),
    ({"Mcp-Method": "Tools/Call"}, [], -32020, "Mcp-Method"),
    ({"Mcp-Method": "tools/call, tools/call"}, [], -32020, "Mcp-Method"),
    ({"Mcp-Method": b64_header("tools/call")}, [], -32020, "Mcp-Method"),
    ({}, ["Mcp-Name"], -32020, "Mcp-Name"),
    ({"Mcp-Name": "progress"}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "ECHO"}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "echo, echo"}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "=?base64?!!?="}, [], -32020, "base64"),
    ({"Mcp-Name": "=?base64?ZWNobw?="}, [], -32020, "base64"),  # no padding
    ({"Mcp-Name": "=?base64?ZWNo bw==?="}, [], -32020, "base64"),
    ({"Mcp-Name": "=?base64??="}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": b64_header(b"\xff\xfeecho")}, [], -32020, "UTF-8"),
    ({"Mcp-Name": b64_header("echo\x00")}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": b64_header("progress")}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "=?BASE64?ZWNobw==?="}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "=?base64?" + "QUFB" * 2500 + "?="}, [], -32020, "Mcp-Name"),
    ({"Mcp-Name": "e" * 12_000}, [], -32020, "Mcp-Name"),
])
def test_headers_that_do_not_mirror_the_body_are_header_mismatch(bystander, m, headers, without, code, fragment):
    reply = m.send(modern_call_message(m), headers=headers, without=without)
    assert_modern_error(reply, 400, code, "h", fragment)
    assert_both_eras_serve(bystander, m)


def test_header_values_are_compared_after_trimming_and_decoding(m, example_server):
    message = modern_call_message(m)
    for name in (b" echo ", b"\techo\t", b64_header("echo").encode(), b"  " + b64_header("echo").encode() + b" "):
        hdrs = [(k, v) for k, v in m.headers(message, without=["Mcp-Name", "Mcp-Method", "Accept",
                                                               "Content-Type"]).items()]
        data = http_request(example_server.port, body=json.dumps(message).encode(),
                            headers=hdrs + [("Mcp-Name", name), ("Mcp-Method", b" tools/call\t")])
        response = exchange(example_server.port, data)
        assert response.status == 200 and response.json["result"]["content"][0]["text"] == "x", (name, response)


@pytest.mark.parametrize("body_name, header, outcome", [
    ("\u00e9cho", b64_header("\u00e9cho"), "unknown"),
    ("echo\x00", b64_header("echo\x00"), "unknown"),
    ("\x00", b64_header("\x00"), "unknown"),
    ("\u00e9cho", "\u00e9cho".encode("utf-8"), "mismatch"),  # raw UTF-8 bytes in the header
    ("\u00e9cho", "\u00e9cho".encode("latin-1"), "mismatch"),
    ("echo", b"ech\x7fo", "mismatch"),
    ("echo", b"ech\x01o", "mismatch"),
    ("echo", b"echo\x0b", "refused"),
    ("echo", b"echo\x00", "refused"),
    ("echo", b"echo\rX-Injected: 1", "refused"),
    ("echo", b"echo\nX-Injected: 1", "refused"),
    ("echo", b"echo\r\n injected-fold", "refused"),
    ("x" * 5000, b64_header("x" * 5000).encode(), "unknown"),
])
def test_names_a_header_cannot_carry_raw_are_refused_or_compared_decoded(bystander, m, example_server, body_name,
                                                                         header, outcome):
    """Raw bytes no client library sends (over a socket): a 400 from the HTTP layer or -32020 from
    the endpoint; the same name in the base64 form reaches the tool lookup (-32602 unknown tool)."""
    message = m.message("tools/call", {"name": body_name, "arguments": {}}, "raw-name")
    hdrs = [(k, v) for k, v in m.headers(message, without=["Mcp-Name", "Accept", "Content-Type"]).items()]
    data = http_request(example_server.port, body=json.dumps(message).encode(),
                        headers=hdrs + [("Mcp-Name", header if isinstance(header, bytes) else header.encode())])
    try:
        response = exchange(example_server.port, data, timeout=5)
    except (ConnectionError, socket.timeout):
        response = None
    if outcome == "refused":
        assert response is None or response.status == 400, response
        assert_refused(response)
        if response is not None and response.headers.get("content-type", "").startswith("application/json"):
            assert response.json["error"]["code"] in (-32020, -32600)
    elif outcome == "mismatch":
        assert_rpc_error(response, 400, -32020, "raw-name")
    else:
        body = assert_rpc_error(response, 200, -32602, "raw-name")
        assert "Unknown tool" in body["error"]["message"] or "unknown" in body["error"]["message"].lower()
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("method, params", [
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/read", {"uri": "test://static-text"}),
    ("resources/read", {"uri": "test://template/\u00e9\U0001f600/data"}),
])
def test_prompts_and_resources_name_their_target_in_mcp_name_too(m, method, params):
    message = m.message(method, params, "target")
    assert m.send(message).status == 200  # base64 for the URI that is not ASCII (ModernClient.headers)
    for headers, without in (({}, ["Mcp-Name"]), ({"Mcp-Name": "test://other"}, []),
                             ({"Mcp-Name": "=?base64?!!?="}, []), ({"Mcp-Name": b64_header("test://other")}, [])):
        assert_modern_error(m.send(message, headers=headers, without=without), 400, -32020, "target", "Mcp-Name")


@pytest.mark.parametrize("headers, without, fragment", [
    ({}, ["Mcp-Param-Region"], "Mcp-Param-Region"),
    ({"Mcp-Param-Region": "us"}, [], "Mcp-Param-Region"),
    ({"Mcp-Param-Region": "=?base64?%%%?="}, [], "base64"),
    ({"Mcp-Param-Region": "eu-west, eu-west"}, [], "Mcp-Param-Region"),
    ({"Mcp-Param-Region": "r" * 12_000}, [], "Mcp-Param-Region"),
])
def test_param_headers_that_do_not_mirror_the_arguments_are_header_mismatch(m, headers, without, fragment):
    message = m.message("tools/call", {"name": "test_header_param", "arguments": {"region": "eu-west"}}, "p")
    hdrs = {"Mcp-Param-Region": "eu-west", **headers}
    assert_modern_error(m.send(message, headers=hdrs, without=without), 400, -32020, "p", fragment)
    assert m.send(message, headers={"Mcp-Param-Region": "eu-west"}).result["content"][0]["text"].startswith(
        "region=eu-west")


@pytest.mark.parametrize("region, outcome", [
    (1, "invalid"), (1.0, "invalid"), (True, "invalid"), (None, "invalid"), ([], "no-header"), ({"a": 1}, "no-header"),
    ("\u00e9\U0001f600", "served"), ("a\x00b", "served"), ("x" * 5000, "served"),
], ids=["int", "float", "bool", "null", "list", "object", "unicode", "nul", "5k"])
def test_param_headers_for_arguments_of_any_type(m, region, outcome):
    """Whatever the argument's type, the header check answers: a header matching a scalar lets the
    tool's own validation speak (an isError result), a list or an object has no header form (-32020),
    and strings of any content travel in the base64 form."""
    message = m.message("tools/call", {"name": "test_header_param", "arguments": {"region": region}}, "typed")
    header = {str: b64_header, bool: lambda v: "true" if v else "false", int: str, float: lambda v: "1",
              type(None): lambda v: "null"}.get(type(region))
    reply = m.send(message, headers={"Mcp-Param-Region": header(region)} if header else {})
    if outcome == "no-header":
        assert_modern_error(reply, 400, -32020, "typed", "Mcp-Param-Region")
        return
    assert reply.status == 200, reply.text
    text = reply.result["content"][0]["text"]
    if outcome == "invalid":
        assert reply.result["isError"] is True and "region" in text, reply.text
    else:
        assert text == f"region={region} query=", reply.text[:200]


@pytest.mark.parametrize("headers", [
    [("Mcp-Name", "a" * 20_000)],
    [("Mcp-Param-Region", "a" * 1_000_000)],
    [(f"Mcp-Param-X{i}", "v") for i in range(1000)],
    [(f"Mcp-Param-X{i}", "v" * 8000) for i in range(20)],
], ids=["20k-name", "1M-param", "1000-params", "20x8k-params"])
def test_oversized_mcp_headers_are_refused_by_the_http_layer(bystander, m, example_server, headers):
    message = modern_call_message(m)
    base = [(k, v) for k, v in m.headers(message, without=["Accept", "Content-Type"]).items()]
    data = http_request(example_server.port, body=json.dumps(message).encode(), headers=base + headers)
    try:
        response = exchange(example_server.port, data)
    except (ConnectionError, BrokenPipeError):
        response = None
    assert_refused(response)
    assert_both_eras_serve(bystander, m)


# _meta: missing, malformed, every key of the wrong type

META_CASES = {
    "missing": (None, -32602),
    "meta-list": ([], -32602),
    "meta-string": ("2026-07-28", -32602),
    "meta-null": ("null", -32602),
    "meta-number": (1, -32602),
    "version-missing": ({"drop": VERSION_KEY}, -32602),
    "version-int": ({VERSION_KEY: 20260728}, -32602),
    "version-null": ({VERSION_KEY: None}, -32602),
    "version-list": ({VERSION_KEY: ["2026-07-28"]}, -32602),
    "version-object": ({VERSION_KEY: {}}, -32602),
    "version-empty": ({VERSION_KEY: ""}, -32020),
    "version-nul": ({VERSION_KEY: "2026-07-28\x00"}, -32020),
    "version-spaces": ({VERSION_KEY: " 2026-07-28"}, -32020),
    "capabilities-missing": ({"drop": CAPABILITIES_KEY}, -32602),
    "capabilities-list": ({CAPABILITIES_KEY: []}, -32602),
    "capabilities-string": ({CAPABILITIES_KEY: "all"}, -32602),
    "capabilities-null": ({CAPABILITIES_KEY: None}, -32602),
    "capabilities-bool": ({CAPABILITIES_KEY: True}, -32602),
    "client-info-list": ({CLIENT_INFO_KEY: ["tests"]}, -32602),
    "client-info-string": ({CLIENT_INFO_KEY: "tests"}, -32602),
    "client-info-number": ({CLIENT_INFO_KEY: 1}, -32602),
    "log-level-int": ({LOG_LEVEL_KEY: 7}, -32602),
    "log-level-list": ({LOG_LEVEL_KEY: ["info"]}, -32602),
    "log-level-upper": ({LOG_LEVEL_KEY: "INFO"}, -32602),
    "log-level-nul": ({LOG_LEVEL_KEY: "info\x00"}, -32602),
    "log-level-empty": ({LOG_LEVEL_KEY: ""}, -32602),
    "log-level-bool": ({LOG_LEVEL_KEY: False}, -32602),
}


@pytest.mark.parametrize("case", list(META_CASES))
@pytest.mark.parametrize("method", ["tools/call", "tools/list", "subscriptions/listen"])
def test_malformed_meta_is_a_clear_error(m, case, method):
    change, code = META_CASES[case]
    params = {"tools/call": {"name": "echo", "arguments": {"message": "x"}}, "tools/list": {},
              "subscriptions/listen": {"notifications": {"toolsListChanged": True}}}[method]
    message = m.message(method, params, f"meta-{case}")
    if change is None:
        del message["params"]["_meta"]
    elif change == "null":
        message["params"]["_meta"] = None
    elif isinstance(change, dict) and "drop" in change:
        del message["params"]["_meta"][change["drop"]]
    elif isinstance(change, dict):
        message["params"]["_meta"].update(change)
    else:
        message["params"]["_meta"] = change
    # The headers a client would send for 2026-07-28: the body's own version is checked against them.
    assert_modern_error(m.send(message), 400, code, f"meta-{case}")


@pytest.mark.parametrize("info", [
    {"name": "a\x00b", "version": "1\x00"}, {"name": None}, {}, {"name": ["x"], "version": {"v": 1}},
    {"name": "x" * 100_000}, {"\x00": "\x00"}, {"name": "\u00e9\U0001f600\u2028"},
], ids=["nul", "null-name", "empty", "odd-types", "100k", "nul-key", "unicode"])
def test_client_info_of_any_content_is_only_read_never_kept(bystander, m, example_server, info):
    """Stateless: clientInfo is not stored, so NUL and odd types are served on every database."""
    sessions = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session")
    reply = m.request("tools/call", {"name": "echo", "arguments": {"message": "x"}},
                      meta=m.meta(**{CLIENT_INFO_KEY: info}))
    assert reply.status == 200 and reply.result["content"][0]["text"] == "x", reply.text[:300]
    assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_session") == sessions
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2099-01-01", "x" * 5000, "\u00e9"])
def test_a_version_no_modern_request_may_name_is_unsupported_with_the_list(m, version):
    """Header and body agree on a version this envelope cannot ask for: -32022 lists 2026-07-28."""
    msg = m.message("tools/list", {}, "v", meta=m.meta(**{VERSION_KEY: version}))
    header = version if version.isascii() else b64_header(version)
    reply = m.send(msg, headers={"MCP-Protocol-Version": header})
    if not version.isascii():
        assert_modern_error(reply, 400, -32020, "v")  # the version header has no base64 form
        return
    body = assert_modern_error(reply, 400, -32022, "v")
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": version}


def test_modern_responses_and_notifications_from_a_client(m):
    response = {"jsonrpc": "2.0", "id": 5, "result": {"_meta": m.meta()}}
    reply = m.send(response, headers={"Mcp-Method": "x"})
    # No params, so nothing says modern but the header: a modern client sends no responses.
    assert reply.status == 400 and strict_json(reply.text)["error"]["code"] == -32600
    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": "nothing", "_meta": m.meta()}}
    reply = m.send(notification)
    assert reply.status == 202 and reply.text == ""
    garbage = {"jsonrpc": "2.0", "method": "notifications/\x00", "params": {"_meta": [1, {"\x00": None}]}}
    assert m.send(garbage, headers={"Mcp-Method": b64_header("notifications/\x00")}).status == 202


# subscriptions/listen with absurd filters, and many listen streams opened and dropped


@pytest.mark.parametrize("notifications, fragment", [
    (None, "notifications"), ([], "notifications"), ("all", "notifications"), (1, "notifications"),
    ({"toolsListChanged": "yes"}, "toolsListChanged"), ({"promptsListChanged": 1}, "promptsListChanged"),
    ({"resourcesListChanged": []}, "resourcesListChanged"),
    ({"resourceSubscriptions": "test://x"}, "resourceSubscriptions"),
    ({"resourceSubscriptions": {"test://x": True}}, "resourceSubscriptions"),
    ({"resourceSubscriptions": [1, 2]}, "resourceSubscriptions"),
    ({"resourceSubscriptions": [None]}, "resourceSubscriptions"),
    ({"resourceSubscriptions": [["test://x"]]}, "resourceSubscriptions"),
    ({"resourceSubscriptions": [""]}, "resourceSubscriptions"),
    ({"resourceSubscriptions": ["test://x\x00"]}, "resourceSubscriptions"),
    ({"resourceSubscriptions": ["test://ok"] * 50_000 + [7]}, "resourceSubscriptions"),
])
def test_listen_with_an_absurd_filter_is_invalid_params(bystander, m, notifications, fragment):
    message = m.message("subscriptions/listen", {}, "listen")
    if notifications is not None:
        message["params"]["notifications"] = notifications
    assert_modern_error(m.send(message), 400, -32602, "listen", fragment)
    assert_both_eras_serve(bystander, m)


def open_descriptors(server) -> int:
    """How many files and sockets the daphne process holds (Linux)."""
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def settled_descriptors(server) -> int:
    """The fewest over half a second: once the connections of what came just before were let go."""
    counts = []
    for _ in range(10):
        counts.append(open_descriptors(server))
        time.sleep(0.05)
    return min(counts)


def read_ack(reader) -> dict:
    ack = reader.next_message()
    assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged", ack
    return ack


def test_listen_with_a_huge_list_of_uris_acknowledges_them_once_each_and_delivers(bystander, m, modern):
    uris = [f"test://r/{i}" for i in range(60_000)] + ["test://watched-resource"] * 3 + ["test://\u00e9\U0001f600"]
    with m.listen({"resourceSubscriptions": uris}, "huge") as reader:
        assert reader.status == 200 and reader.headers["content-type"] == "text/event-stream"
        ack = read_ack(reader)
        agreed = ack["params"]["notifications"]["resourceSubscriptions"]
        assert len(agreed) == 60_002 and agreed[-2:] == ["test://watched-resource", "test://\u00e9\U0001f600"]
        changer = modern()
        assert changer.call("update_resource", {"uri": "test://not-listened"}).status == 200
        assert changer.call("update_resource", {"uri": "test://\u00e9\U0001f600"}).status == 200
        update = reader.next_message()
        assert update["method"] == "notifications/resources/updated", update
        assert update["params"]["uri"] == "test://\u00e9\U0001f600"
        assert update["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "huge"}
    assert_both_eras_serve(bystander, m)


@pytest.mark.parametrize("listen_id", ["\x00", "x" * 50_000, 2 ** 70, -1, "\u2028id: 9\n\ndata: x", ""],
                         ids=["nul", "50k", "huge-int", "negative", "sse-injection", "empty"])
def test_listen_ids_of_any_kind_are_echoed_exactly(m, listen_id):
    with m.listen({"toolsListChanged": True}, listen_id) as reader:
        ack = read_ack(reader)
    assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": listen_id}


def test_listen_needs_an_sse_client(m):
    """Refused before the body is read (every POST must accept both): no id to echo."""
    message = m.message("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, "json-only")
    assert_modern_error(m.send(message, accept="application/json"), 406, -32600, None, "text/event-stream")


def test_many_listen_streams_opened_and_dropped_leave_the_server_serving(bystander, m, modern, example_server):
    """Forty listen streams at once, half dropped before their acknowledgement was read, half after,
    some reset: daphne lets every connection go, a new listener still gets its change, both
    eras still work, and the server logged nothing."""
    assert_modern_healthy(m)  # warm: the database connections daphne keeps are open
    before = settled_descriptors(example_server)
    message = m.message("subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                                   "resourceSubscriptions": ["test://w"]}}, "many")
    hdrs = [(k, v) for k, v in m.headers(message, without=["Accept", "Content-Type"]).items()]
    data = http_request(example_server.port, body=json.dumps(message).encode(), headers=hdrs)

    def open_one(i):
        conn = RawConnection(example_server.port)
        conn.send(data)
        if i % 2:
            while b"acknowledged" not in conn.buffer:
                assert conn._fill(), conn.buffer
        return conn

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        socks = list(pool.map(open_one, range(40)))
    assert wait_for(lambda: open_descriptors(example_server) >= before + 40)  # all forty held at once
    for i, conn in enumerate(socks):
        if i % 4 == 0:  # a quarter reset (linger 0), the rest closed
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    # Every connection is let go (the listen's pump ends with it); a few descriptors of slack.
    assert wait_for(lambda: open_descriptors(example_server) <= before + 2), open_descriptors(example_server)
    changer = modern()
    assert changer.call("test_trigger_tool_change").status == 200  # fans out to whatever is left
    with m.listen({"toolsListChanged": True}, "after") as reader:
        read_ack(reader)
        assert changer.call("test_trigger_tool_change").status == 200
        note = reader.next_message()
        assert note["method"] == "notifications/tools/list_changed"
        assert note["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "after"}
    assert_both_eras_serve(bystander, m)


def test_modern_calls_dropped_mid_stream_are_let_go(bystander, m, example_server):
    """Streaming modern calls (progress) whose clients vanish after the first event: their
    connections are let go and the server goes on serving (the calls are cancelled, never finished)."""
    assert_modern_healthy(m)
    before = settled_descriptors(example_server)
    conns = []
    for i in range(12):
        message = m.message("tools/call", {"name": "progress", "arguments": {"count": 400, "delay": 0.05},
                                           "_meta": {**m.meta(), "progressToken": i}}, f"dropped-{i}")
        hdrs = [(k, v) for k, v in m.headers(message, without=["Accept", "Content-Type"]).items()]
        conn = RawConnection(example_server.port)
        conn.send(http_request(example_server.port, body=json.dumps(message).encode(), headers=hdrs))
        conns.append(conn)
    for conn in conns:
        while b"notifications/progress" not in conn.buffer:
            assert conn._fill(), conn.buffer
        assert b"text/event-stream" in conn.buffer.split(b"\r\n\r\n")[0]
        conn.close()
    assert wait_for(lambda: open_descriptors(example_server) <= before + 2), open_descriptors(example_server)
    assert_both_eras_serve(bystander, m)


def test_listen_streams_held_open_do_not_block_other_clients(bystander, m, modern):
    from contextlib import ExitStack

    with ExitStack() as stack:
        readers = [stack.enter_context(modern().listen({"promptsListChanged": True}, i)) for i in range(12)]
        for reader in readers:
            read_ack(reader)
        assert_both_eras_serve(bystander, m)
        assert modern().call("test_trigger_prompt_change").status == 200
        for i, reader in enumerate(readers):
            note = reader.next_message()
            assert note["method"] == "notifications/prompts/list_changed" and \
                note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == i


# Both eras on one endpoint: modern requests naming sessions, sessions sending modern envelopes


def session_row(server, session_id):
    return db(server, "SELECT log_level, terminated_at, client_name FROM mcp_transport_session WHERE id = ?",
              (session_id,))


def session_streams(server, session_id):
    return db(server, "SELECT COUNT(*) FROM mcp_transport_stream WHERE session_id = ?", (session_id,))[0][0]


@pytest.mark.parametrize("which", ["live", "deleted", "unknown", "garbage"])
def test_a_modern_request_naming_a_session_is_served_stateless_and_touches_it_not(c, m, mcp, example_server, which):
    session_id = {"live": c.session_id, "unknown": "0" * 32, "garbage": "x\u00e9" * 40}.get(which)
    if which == "deleted":
        gone = mcp()
        gone.initialize()
        assert gone.delete().status_code == 200
        session_id = gone.session_id
    before_row, before_streams = session_row(example_server, c.session_id), session_streams(example_server,
                                                                                             c.session_id)
    header = {"Mcp-Session-Id": session_id if session_id.isascii() else b64_header(session_id)}
    echo = m.call("echo", {"message": "stateless"}, headers=header)
    assert echo.status == 200 and echo.result["resultType"] == "complete", echo.text
    assert "mcp-session-id" not in echo.headers
    # The session-era methods are not there for it, whichever session it names.
    level = m.request("logging/setLevel", {"level": "debug"}, headers=header, request_id="lvl")
    assert_modern_error(level, 404, -32601, "lvl")
    subscribe = m.request("resources/subscribe", {"uri": "test://watched-resource"}, headers=header, request_id="sub")
    assert_modern_error(subscribe, 404, -32601, "sub")
    assert session_row(example_server, c.session_id) == before_row
    assert session_streams(example_server, c.session_id) == before_streams
    assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_subscription WHERE session_id = ?",
              (c.session_id,)) == [(0,)]
    assert_both_eras_serve(c, m)


@pytest.mark.parametrize("meta, code", [
    ({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}, -32020),
    ({VERSION_KEY: "2025-11-25", CAPABILITIES_KEY: {}}, -32020),
    ({VERSION_KEY: "2026-07-28"}, -32602),
    ({VERSION_KEY: None, CAPABILITIES_KEY: {}}, -32602),
    ({VERSION_KEY: 2026, "progressToken": "t"}, -32602),
    ({VERSION_KEY: "\x00", CAPABILITIES_KEY: {"\x00": "\x00"}}, -32020),
], ids=["modern", "legacy-version", "no-capabilities", "null-version", "int-version", "nul"])
@pytest.mark.parametrize("method", ["tools/call", "ping", "resources/subscribe", "logging/setLevel"])
def test_a_sessions_request_with_a_modern_envelope_is_refused_and_the_session_unchanged(c, example_server, meta,
                                                                                          code, method):
    """The body says 2026-07-28, the headers name a 2025-11-25 session: the modern path's clear error
    (with the id), and nothing of the session is touched (no stream, level, subscription)."""
    params = {"tools/call": {"name": "echo", "arguments": {"message": "x"}}, "ping": {},
              "resources/subscribe": {"uri": "test://watched-resource"},
              "logging/setLevel": {"level": "debug"}}[method]
    before_row, before_streams = session_row(example_server, c.session_id), session_streams(example_server,
                                                                                             c.session_id)
    response = c.post(request(method, "envelope", {**params, "_meta": meta}))
    assert_rpc_error(response, 400, code, "envelope")
    assert "mcp-session-id" not in response.headers
    assert session_row(example_server, c.session_id) == before_row
    assert session_streams(example_server, c.session_id) == before_streams
    assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_subscription WHERE session_id = ?",
              (c.session_id,)) == [(0,)]
    assert_healthy(c)


def test_a_session_era_initialize_with_a_modern_envelope_and_header(mcp, m, example_server):
    """initialize is never modern unless its _meta says so: with the modern key it is a method the
    modern path does not have (404), without it a session as before (a client falling back keeps
    its header)."""
    sessions = db(example_server, "SELECT COUNT(*) FROM mcp_transport_session")
    init = m.message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}}, "init")
    assert_modern_error(m.send(init), 404, -32601, "init")
    # Without the modern key but with the modern header: a session-era initialize, served as one.
    plain = request("initialize", "plain", init["params"] | {"_meta": {}})
    response = m.http.post(m.url, json=plain, headers=m.headers(plain))
    assert response.status_code == 200 and response.json()["result"]["protocolVersion"] == VERSION
    assert db(example_server, "SELECT COUNT(*) FROM mcp_transport_session") == [(sessions[0][0] + 1,)]
    legacy = mcp()
    assert legacy.initialize()["protocolVersion"] == VERSION


# A session's client answering the server's questions with garbage (the same checks as MRTR answers)

LEGACY_ANSWERS = {
    "error-code-string": ({"error": {"code": "boom", "message": 5}}, -32603),
    "error-code-float": ({"error": {"code": 1.5, "message": "m"}}, -32603),
    "error-code-bool": ({"error": {"code": True, "message": "m"}}, -32603),
    "error-empty": ({"error": {}}, -32603),
    "error-kept": ({"error": {"code": -1, "message": "User rejected", "data": {"x": 1}}}, -1),
    "result-number": ({"result": 5}, -32602),
    "result-list": ({"result": [1]}, -32602),
    "result-string": ({"result": "accept"}, -32602),
    "no-action": ({"result": {"content": {"name": "x"}}}, -32602),
    "content-string": ({"result": {"action": "accept", "content": "Ada"}}, -32602),
    "roots-string": ({"result": {"roots": "file:///"}}, -32602),
    "roots-without-uri": ({"result": {"roots": [{"name": "x"}]}}, -32602),
}


@pytest.mark.parametrize("case", list(LEGACY_ANSWERS))
def test_a_sessions_garbage_answers_end_the_call_with_a_json_rpc_error(mcp, bystander, case):
    """Such answers once reached the tools, which failed on them (a traceback in the log, an isError
    result), and an error answer with a code that is not an integer was passed on as the call's own
    error, which JSON-RPC does not allow. Now: -32602 for an answer of the wrong shape, the client's
    error as it sent it when it is a JSON-RPC error, -32603 when not."""
    answer, code = LEGACY_ANSWERS[case]
    roots = "roots" in json.dumps(answer)
    client = mcp()
    client.initialize({"elicitation": {}, "roots": {}})
    tool = "test_input_required_result_list_roots" if roots else MRTR_TOOL
    with open_sse(client, "POST", request("tools/call", "asks", {"name": tool, "arguments": {}})) as reader:
        ask = reader.read_until(lambda message: "method" in message and "id" in message)
        assert ask["method"] == ("roots/list" if roots else "elicitation/create"), ask
        assert client.post({"jsonrpc": "2.0", "id": ask["id"], **answer}).status_code == 202
        final = reader.read_until(lambda message: message.get("id") == "asks")
    assert "result" not in final and final["error"]["code"] == code, final
    assert isinstance(final["error"]["message"], str) and final["error"]["message"], final
    if case == "error-kept":
        assert final["error"] == answer["error"]
    assert_healthy(client)
    assert_healthy(bystander)


# URL-mode elicitation and sampling with tools: odd capabilities, answers a tool cannot read, the
# page a URL leads to given any id

URL_AND_TOOLS = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}}
ODD_CAPABILITIES = {
    "elicitation-number": {"elicitation": 5, "sampling": {}},
    "elicitation-list": {"elicitation": ["url"], "sampling": []},
    "url-number": {"elicitation": {"url": 5}, "sampling": {"tools": 5}},
    "modes-null": {"elicitation": {"form": None, "url": None}, "sampling": {"tools": None}},
    "sampling-string": {"elicitation": {}, "sampling": "tools"},
}
NEW_TOOLS = ("connect_account", "open_settings_page", "weather_agent")
USE = {"type": "tool_use", "id": "u1", "name": "get_weather", "input": {"city": "Oslo"}}
QUESTIONS_ANSWERS = {
    "url-action-unknown": ("open_settings_page", {"result": {"action": "opened"}}, -32602),
    "url-content-string": ("open_settings_page", {"result": {"action": "accept", "content": "k"}}, -32602),
    "url-error-kept": ("open_settings_page", {"error": {"code": -1, "message": "User rejected"}}, -1),
    "tool-use-input-list": ("weather_agent", {"result": {"role": "assistant", "content": [{**USE, "input": []}]}},
                            -32602),
    "tool-use-no-id": ("weather_agent", {"result": {"role": "assistant", "content": [
        {k: v for k, v in USE.items() if k != "id"}]}}, -32602),
    "tool-use-twice": ("weather_agent", {"result": {"role": "assistant", "content": [USE, USE]}}, -32602),
    "stop-reason-object": ("weather_agent", {"result": {"role": "assistant", "stopReason": {"x": 1},
                                                        "content": {"type": "text", "text": "x"}}}, -32602),
    "role-number": ("weather_agent", {"result": {"role": 1, "content": {"type": "text", "text": "x"}}}, -32602),
}


def _spec_shaped_call(final: dict, request_id):
    assert final.get("id") == request_id and ("result" in final) != ("error" in final), final
    if "error" in final:
        assert type(final["error"]["code"]) is int and isinstance(final["error"]["message"], str), final
    else:
        assert isinstance(final["result"]["content"], list), final


@pytest.mark.parametrize("case", list(ODD_CAPABILITIES))
def test_odd_url_and_sampling_capabilities_in_both_eras(mcp, modern, case):
    """Whatever a client declared under elicitation and sampling, the new tools answer in the
    spec's shapes: a question, -32042, an isError result on a session; on 2026-07-28 an
    input_required result, or -32021 naming what is missing."""
    capabilities = ODD_CAPABILITIES[case]
    client = mcp()
    client.initialize(capabilities)
    for tool in NEW_TOOLS:
        arguments = {"question": "?"} if tool == "weather_agent" else {}
        with open_sse(client, "POST", request("tools/call", f"odd-{tool}", {"name": tool,
                                                                            "arguments": arguments})) as reader:
            message = reader.read_until(lambda m: m.get("id") == f"odd-{tool}" or "method" in m and "id" in m)
        if "method" in message:
            assert message["method"] in ("elicitation/create", "sampling/createMessage"), message
        else:
            _spec_shaped_call(message, f"odd-{tool}")
    assert_healthy(client)
    m = modern(capabilities=capabilities)
    for tool in NEW_TOOLS:
        reply = m.call(tool, {"question": "?"} if tool == "weather_agent" else {}, request_id=tool)
        if reply.status == 400:
            assert_modern_error(reply, 400, -32021, tool)
        else:
            assert reply.status == 200 and reply.result["resultType"] == "input_required", reply.text
    assert_modern_healthy(modern(capabilities=ASKING))


@pytest.mark.parametrize("case", list(QUESTIONS_ANSWERS))
def test_a_sessions_garbage_answers_to_url_elicitation_and_tool_sampling(mcp, bystander, case):
    tool, answer, code = QUESTIONS_ANSWERS[case]
    client = mcp()
    client.initialize(URL_AND_TOOLS)
    arguments = {"question": "Weather in Oslo?"} if tool == "weather_agent" else {}
    with open_sse(client, "POST", request("tools/call", "asks", {"name": tool, "arguments": arguments})) as reader:
        ask = reader.read_until(lambda message: "method" in message and "id" in message)
        assert client.post({"jsonrpc": "2.0", "id": ask["id"], **answer}).status_code == 202
        final = reader.read_until(lambda message: message.get("id") == "asks")
    assert "result" not in final and final["error"]["code"] == code, final
    assert_healthy(client)
    assert_healthy(bystander)


@pytest.mark.parametrize("case", [c for c in QUESTIONS_ANSWERS if "error" not in c])
def test_modern_garbage_answers_to_url_elicitation_and_tool_sampling(modern, bystander, case):
    tool, answer, code = QUESTIONS_ANSWERS[case]
    m = modern(capabilities=URL_AND_TOOLS)
    key = "round-1" if tool == "weather_agent" else "settings"
    reply = m.call(tool, {"question": "?"} if tool == "weather_agent" else {},
                   inputResponses={key: answer["result"]}, request_id="garbage")
    assert_modern_error(reply, 200, code, "garbage", key)
    assert_both_eras_serve(bystander, m)


def test_modern_forged_answers_cannot_complete_a_url_elicitation(modern):
    """An answer of "accept" is consent, not completion: connect_account asks again however often
    the client says so, with its state or without."""
    m = modern(capabilities=URL_AND_TOOLS)
    message, first = first_round(m, "connect_account")
    for answers in ({"connect": {"action": "accept"}}, {"connect": {"action": "accept", "content": {"done": True}}}):
        again = with_state(m, message, first.result["requestState"], answers)
        assert again.status == 200 and again.result["resultType"] == "input_required", again.text
        bare = m.call("connect_account", inputResponses=answers)
        assert bare.status == 200 and bare.result["resultType"] == "input_required", bare.text


PAGE_IDS = ["unknown", "%00", "a%00b", "x" * 5000, "%F0%9F%98%80", "%E9", "..%2F..%2Fadmin", "%20",
            "connect-" + "f" * 32]


@pytest.mark.parametrize("page_id", PAGE_IDS, ids=range(len(PAGE_IDS)))
def test_the_page_a_url_leads_to_with_any_id(example_server, mcp, page_id):
    """A browser may open the page with any id: never a 500, and only a real, open elicitation
    completes (here none does); a POST without the page's CSRF token is refused."""
    import httpx

    base = example_server.url.rsplit("/mcp", 1)[0]
    with httpx.Client(base_url=base, timeout=SOCKET_TIMEOUT) as browser:
        page = browser.get(f"/connect/{page_id}/")
        assert page.status_code in (200, 404), (page.status_code, page.text[:300])
        assert browser.post(f"/connect/{page_id}/").status_code in (403, 404)
        if page.status_code == 200:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
            done = browser.post(f"/connect/{page_id}/", data={"csrfmiddlewaretoken": token})
            assert done.status_code == 404 and "Nothing waits" in done.text, (done.status_code, done.text[:300])
    assert_healthy(mcp_started(mcp))


def _press_done(example_server, url: str) -> int:
    """The browser on the page a URL elicitation led to: open it, post its form."""
    import httpx
    from urllib.parse import urlsplit

    page = example_server.url.rsplit("/mcp", 1)[0] + urlsplit(url).path
    with httpx.Client(timeout=SOCKET_TIMEOUT) as browser:
        form = browser.get(page)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        return browser.post(page, data={"csrfmiddlewaretoken": token}).status_code


def test_the_page_completes_its_own_elicitation_once_and_no_other(example_server, mcp, modern):
    """On every database: the page completes the elicitation its URL names, once; another
    session's and a 2026-07-28 client's stay waiting."""
    client, other = mcp(), mcp()
    for c in (client, other):
        c.initialize(URL_AND_TOOLS)

    def refusal(c) -> dict:
        _, reader = run_call(c, "connect_account")
        return reader.messages[-1]["error"]

    error = refusal(client)
    assert error["code"] == -32042, error
    (elicitation,) = error["data"]["elicitations"]
    assert _press_done(example_server, elicitation["url"]) == 200
    assert _press_done(example_server, elicitation["url"]) == 404
    _, reader = run_call(client, "connect_account")
    assert reader.messages[-1]["result"]["content"][0]["text"] == "Your account is connected."
    assert refusal(other)["data"]["elicitations"][0]["elicitationId"] != elicitation["elicitationId"]
    m = modern(capabilities=URL_AND_TOOLS)
    assert m.call("connect_account").result["resultType"] == "input_required"


def mcp_started(make) -> MCPClient:
    client = make()
    client.initialize()
    return client


# Authenticated: another principal's request state, and modern requests naming its sessions

SECURED = {"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]}


@pytest.fixture(scope="module")
def auth_server():
    """A daphne with bearer tokens for two users (anonymous requests served too)."""
    s = DaphneServer(SECURED)
    s.manage("shell", "-c", "from django.contrib.auth.models import User; "
                            "User.objects.create_user('ann'); User.objects.create_user('ben')")
    s.tokens = {name: s.manage("mcp_token", "create", name) for name in ("ann", "ben")}
    s.start()
    yield s
    s.stop()
    errors = _server_errors(s.logs())
    assert not errors, "daphne logged errors:\n" + "\n".join(errors)


def test_another_principals_request_state_is_invalid_params(auth_server, modern, mcp):
    ann, ben, anonymous = (modern(server=auth_server, capabilities={"elicitation": {}}) for _ in range(3))
    ann.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ann']}"
    ben.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ben']}"
    message, first = first_round(ann)
    state = first.result["requestState"]
    for thief, label in ((ben, "ben"), (anonymous, "anonymous")):
        stolen = with_state(thief, message, state, request_id=label)
        assert_modern_error(stolen, 400, -32602, label, "another request")
    mine = with_state(ann, message, state, request_id="ann")
    assert mine.status == 200 and mine.result["content"][0]["text"] == "Hello, Ada!", mine.text
    # And the other way round: an anonymous client's state is no good to ann.
    message, first = first_round(anonymous)
    assert_modern_error(with_state(ann, message, first.result["requestState"], request_id=1), 400, -32602, 1)


def test_a_modern_request_naming_another_principals_session_is_served_as_its_own(auth_server, modern, mcp):
    owner = mcp(auth_server)
    owner.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ann']}"
    owner.initialize()
    ben = modern(server=auth_server)
    ben.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ben']}"
    echo = ben.call("echo", {"message": "ben"}, headers={"Mcp-Session-Id": owner.session_id})
    assert echo.status == 200 and echo.result["content"][0]["text"] == "ben" and "mcp-session-id" not in echo.headers
    # The session is still ann's alone: ben's legacy requests on it are 404, ann's are served.
    intruder = mcp(auth_server)
    intruder.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ben']}"
    intruder.session_id, intruder.version = owner.session_id, owner.version
    assert intruder.post(request("ping", 3)).status_code == 404
    assert owner.request("ping")["result"] == {}


TASKS_EXTENSION = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _poll(client, task_id, until=("completed", "failed", "cancelled")):
    for _ in range(300):
        reply = client.send(client.message("tasks/get", {"taskId": task_id}))
        if reply.status == 200 and reply.result["status"] in until:
            return reply.result
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {until}: {reply.status} {reply.text[:400]}")


def test_tasks_are_their_principals_alone_and_odd_task_ids_are_invalid_params(auth_server, modern):
    """Another principal's task id is as unknown as one that never was (-32602), for every task
    method; so are odd ids; a finished task's cancel is acknowledged and changes nothing; nothing of
    the task leaks into the refusals."""
    ann, ben, anonymous = (modern(server=auth_server, capabilities={**TASKS_EXTENSION, "elicitation": {}})
                           for _ in range(3))
    ann.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ann']}"
    ben.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ben']}"
    created = ann.call("confirm_delete", {"path": "/secret/ann"})
    assert created.status == 200 and created.result["resultType"] == "task", created.text
    task_id = created.result["taskId"]
    _poll(ann, task_id, until=("input_required",))
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    for thief in (ben, anonymous):
        for method, extra in (("tasks/get", {}), ("tasks/update", {"inputResponses": answer}), ("tasks/cancel", {})):
            message = thief.message(method, {"taskId": task_id, **extra})
            refused = assert_modern_error(thief.send(message), 200, -32602, message["id"])
            assert "/secret/ann" not in json.dumps(refused)
    assert _poll(ann, task_id, until=("input_required",))["status"] == "input_required"  # untouched
    for odd in ("", "x" * 65, "../../etc", "\u0000", "1 OR 1=1", "ﬀ" * 10):
        message = ann.message("tasks/get", {"taskId": odd})
        reply = ann.send(message)
        assert reply.status in (200, 400) and strict_json(reply.text)["error"]["code"] in (-32602, -32020), reply.text
    bad = ann.message("tasks/update", {"taskId": task_id, "inputResponses": {"confirm": [1, 2]}})
    assert_modern_error(ann.send(bad), 200, -32602, bad["id"])
    garbage = ann.message("tasks/update", {"taskId": task_id, "inputResponses": "yes"})
    assert_modern_error(ann.send(garbage), 200, -32602, garbage["id"])
    assert ann.send(ann.message("tasks/update", {"taskId": task_id, "inputResponses": answer})).status == 200
    done = _poll(ann, task_id)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted /secret/ann"
    again = ann.send(ann.message("tasks/cancel", {"taskId": task_id}))
    assert again.status == 200 and again.result["resultType"] == "complete"
    assert _poll(ann, task_id)["status"] == "completed"


def test_a_listen_for_tasks_hears_its_principals_own_and_nothing_of_others(auth_server, modern):
    """notifications.taskIds: another principal's task, unknown and odd ids are left out of the
    acknowledgement and nothing of them is sent; the listener's own task's changes are."""
    ann, ben = (modern(server=auth_server, capabilities={**TASKS_EXTENSION, "elicitation": {}}) for _ in range(2))
    ann.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ann']}"
    ben.http.headers["Authorization"] = f"Bearer {auth_server.tokens['ben']}"
    hers = ann.call("confirm_delete", {"path": "/secret/listened"}).result["taskId"]
    mine = ben.call("confirm_delete", {"path": "/bens"}).result["taskId"]
    _poll(ann, hers, until=("input_required",))
    _poll(ben, mine, until=("input_required",))
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    asked = [hers, "\x00", "x" * 65, "../../etc", "1 OR 1=1", "\ufb00" * 10, "", "no-such-task", mine, mine]
    with ben.listen({"taskIds": asked}, "ben-tasks") as reader:
        assert read_ack(reader)["params"]["notifications"] == {"taskIds": [mine]}
        assert ann.send(ann.message("tasks/update", {"taskId": hers, "inputResponses": answer})).status == 200
        assert _poll(ann, hers)["status"] == "completed"
        assert ben.send(ben.message("tasks/update", {"taskId": mine, "inputResponses": answer})).status == 200
        heard = reader.next_message()
        assert heard["method"] == "notifications/tasks" and heard["params"]["taskId"] == mine, heard
        assert heard["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "ben-tasks"}
        assert "/secret/listened" not in json.dumps(heard) and hers not in json.dumps(heard)
    plain = modern(server=auth_server)
    refused = plain.send(plain.message("subscriptions/listen", {"notifications": {"taskIds": [hers]}}, "p"))
    assert_modern_error(refused, 400, -32021, "p")
    too_many = ben.send(ben.message("subscriptions/listen", {"notifications": {"taskIds": [mine] * 101}}, "t"))
    assert_modern_error(too_many, 400, -32602, "t", "taskIds")
    assert _poll(ben, mine)["status"] == "completed"


@pytest.mark.parametrize("token", ["nul\u0000here", "\ufffe" * 3, "t" * 20_000, {"nested": [1, {"x": None}]},
                                   -1e308, True], ids=["nul", "noncharacters", "20k", "object", "huge", "bool"])
def test_odd_progress_tokens_of_a_task_are_stored_with_its_events_and_answer_polls(modern, example_server, token):
    """A task's progress is stored against it with the client's progress token in it, whatever the
    token: the task still completes, its polls answer, its status message is the tool's text."""
    client = modern(capabilities=TASKS_EXTENSION)
    created = client.call("progress", {"count": 6, "delay": 0.15}, meta=client.meta(progressToken=token))
    assert created.status == 200 and created.result["resultType"] == "task", created.text
    messages = set()
    for _ in range(300):
        reply = client.send(client.message("tasks/get", {"taskId": created.result["taskId"]}))
        assert reply.status == 200 and "error" not in reply.messages[-1], reply.text
        if reply.result["status"] != "working":
            break
        messages.add(reply.result.get("statusMessage"))
        time.sleep(0.05)
    assert reply.result["status"] == "completed" and reply.result["result"]["content"][0]["text"] == "done 6"
    assert messages - {None} <= {f"step {i}" for i in range(1, 7)} and messages - {None}, messages
    assert database_intact(example_server)


def _messages(response) -> list[dict]:
    """A JSON answer, or the data of an SSE one."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]


def test_a_session_task_of_another_session_is_unknown_and_a_cancelled_ones_result_is_an_error(mcp, example_server):
    """2025-11-25 tasks on the shared (anonymous) server: bound to their session."""
    owner, other = mcp(), mcp()
    owner.initialize()
    other.initialize()
    created = owner.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    for method in ("tasks/get", "tasks/cancel", "tasks/result"):
        body = [m for m in _messages(other.post(request(method, 7, {"taskId": task_id}))) if m.get("id") == 7][-1]
        assert body["error"]["code"] == -32602, (method, body)
    assert [t["taskId"] for t in other.request("tasks/list")["result"]["tasks"]] == []
    cancelled = owner.request("tasks/cancel", {"taskId": task_id})["result"]
    assert cancelled["status"] == "cancelled"
    assert owner.request("tasks/cancel", {"taskId": task_id})["error"]["code"] == -32602
    final = [m for m in _messages(owner.post(request("tasks/result", 9, {"taskId": task_id}))) if m.get("id") == 9][-1]
    assert final["error"]["code"] == -32800
    assert database_intact(example_server)


def test_the_shared_server_serves_both_eras_after_the_modern_battery(bystander, m, example_server):
    assert_both_eras_serve(bystander, m)
    assert database_intact(example_server)


# Afterwards


def test_the_shared_server_is_healthy_after_the_battery(mcp, example_server):
    client = mcp()
    client.initialize()
    assert_healthy(client)
    _, reader = run_call(client, "progress", {"count": 5, "delay": 0}, progress_token="after")
    assert progress_values(reader.messages, "after") == [1, 2, 3, 4, 5]
    assert database_intact(example_server)


# OAuth tokens (django-oauth-toolkit: mcp_transport.oauth.OAuthToolkitBackend) and scopes

OAUTH_TOKENS = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

url = {url!r}
ann, ben = User.objects.create_user("ann"), User.objects.create_user("ben")
gone = User.objects.create_user("gone", is_active=False)
app = Application.objects.create(name="hostile", client_type="public", redirect_uris="http://127.0.0.1:9/cb",
                                 authorization_grant_type="authorization-code")
soon = timezone.now() + timedelta(hours=1)
for name, user, scope, resource, expires in [
    ("mcp", ann, "mcp", [url], soon), ("profile", ann, "mcp profile", [url], soon),
    ("ben", ben, "mcp profile", [url], soon), ("client", None, "mcp profile", [url], soon),
    ("upper", ann, "MCP PROFILE", [url], soon), ("glued", ann, "mcpprofile", [url], soon),
    ("expired", ann, "mcp profile", [url], timezone.now() - timedelta(seconds=1)),
    ("unbound", ann, "mcp profile", [], soon), ("other", ann, "mcp profile", ["http://127.0.0.1:9/mcp"], soon),
    ("segment", ann, "mcp profile", [url[:-1]], soon), ("longer", ann, "mcp profile", [url + "-admin"], soon),
    ("userinfo", ann, "mcp profile", [url.replace("//", "//127.0.0.1@evil.example/", 1)], soon),
    ("inactive", gone, "mcp profile", [url], soon),
]:
    AccessToken.objects.create(user=user, application=app, token="hostile-" + name, scope=scope, resource=resource,
                               expires=expires)
"""


# Migrating the toolkit's tables on MariaDB may take minutes on a busy machine: the first test
# to use the server waits for it.
SETUP_TIMEOUT = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def oauth_server():
    """The example project with the toolkit (MCP_EXAMPLE_OAUTH=1) and tokens of every kind."""
    s = start_oauth_server()
    try:
        manage_oauth_server(s, "shell", "-c", OAUTH_TOKENS.format(url=s.url))
    except BaseException:
        s.stop()
        raise
    yield s
    s.stop()
    assert not _server_errors(s.logs()), s.logs()


def token(name: str) -> dict:
    return {"Authorization": f"Bearer hostile-{name}"}


def oauth_clients(server, name: str) -> tuple[MCPClient, ModernClient]:
    legacy, current = MCPClient(server.url, timeout=10), ModernClient(server.url)
    legacy.http.headers.update(token(name))
    current.http.headers.update(token(name))
    return legacy, current


def assert_challenge(response, status: int, error: str):
    assert response.status_code == status, response.text
    body = response.json() if hasattr(response, "json") and callable(response.json) else response.messages[-1]
    assert body["error"]["code"] == -32600
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and f'error="{error}"' in challenge
    assert "resource_metadata=" in challenge
    return body


@SETUP_TIMEOUT
@pytest.mark.parametrize("name", ["forged", "expired", "unbound", "other", "segment", "longer", "userinfo",
                                  "inactive"])
def test_oauth_tokens_that_are_not_for_this_resource_now_get_401(oauth_server, name):
    """Unknown, expired, bound to no resource, to another one (another port, a shorter or longer
    path, userinfo before the host) or of an inactive user: 401 invalid_token in both eras."""
    legacy, current = oauth_clients(oauth_server, name)
    try:
        assert_challenge(legacy.post(request("initialize", 1, {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})),
            401, "invalid_token")
        reply = current.request("tools/list")
        assert reply.status == 401 and reply.messages[-1]["error"]["code"] == -32600
        assert 'error="invalid_token"' in reply.headers["www-authenticate"]
    finally:
        legacy.close()
        current.close()


@SETUP_TIMEOUT
@pytest.mark.parametrize("value", ["Bearer", 'Bearer ""', "bearer hostile-mcp", "Bearer hostile-mcp, Bearer x",
                                   "Bearer " + "x" * 3000, "Bearer hostile-\u00e9", "Basic aG9zdGlsZS1tY3A6"])
def test_odd_authorization_headers_get_401(oauth_server, value):
    """A malformed or foreign scheme never reaches a token; `bearer` is a scheme name (case-insensitive)."""
    response = httpx.post(oauth_server.url, content=json.dumps(request("ping")).encode("utf-8"), headers={
        "Authorization": value.encode("utf-8"), "Accept": ACCEPT_BOTH, "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION}, timeout=10)
    if value == "bearer hostile-mcp":
        assert response.status_code == 400  # authenticated: a ping without a session
    else:
        assert response.status_code == 401 and response.json()["error"]["code"] == -32600


@SETUP_TIMEOUT
def test_a_token_in_the_query_string_is_not_read(oauth_server):
    response = httpx.post(f"{oauth_server.url}?access_token=hostile-profile", json=request("ping"), headers={
        "Accept": ACCEPT_BOTH, "MCP-Protocol-Version": VERSION}, timeout=10)
    assert response.status_code == 401


@SETUP_TIMEOUT
def test_a_forged_host_cannot_make_a_token_for_another_resource_fit(oauth_server):
    """A token for http://127.0.0.1:9/mcp sent with that Host (allowed: ALLOWED_HOSTS has no ports)
    is still measured against RESOURCE_ORIGIN; a foreign host is refused before any token is read."""
    response = httpx.post(oauth_server.url, json=request("ping"), headers={
        **token("other"), "Host": "127.0.0.1:9", "Accept": ACCEPT_BOTH, "MCP-Protocol-Version": VERSION}, timeout=10)
    assert response.status_code == 401 and "not issued for this resource" in response.json()["error"]["message"]
    assert f"http://127.0.0.1:{oauth_server.port}/.well-known" in response.headers["www-authenticate"]
    foreign = httpx.post(oauth_server.url, json=request("ping"), headers={
        **token("profile"), "Host": "evil.example", "Accept": ACCEPT_BOTH, "MCP-Protocol-Version": VERSION},
        timeout=10)
    assert foreign.status_code == 403 and "Host" in foreign.json()["error"]["message"]


@SETUP_TIMEOUT
@pytest.mark.parametrize("name", ["mcp", "upper", "glued"])
def test_scope_tricks_get_403_insufficient_scope_in_both_eras(oauth_server, name):
    """Scopes are compared exactly: MCP PROFILE, mcpprofile and a missing profile are not profile."""
    legacy, current = oauth_clients(oauth_server, name)
    try:
        legacy.initialize()
        body = assert_challenge(legacy.post(request("tools/call", 7, {"name": "whoami", "arguments": {}})), 403,
                                "insufficient_scope")
        assert body["id"] == 7
        reply = current.call("whoami")
        assert reply.status == 403 and reply.messages[-1]["error"]["code"] == -32600
        assert 'error="insufficient_scope"' in reply.headers["www-authenticate"]
        assert "profile" in reply.headers["www-authenticate"].split('scope="')[1].split('"')[0].split()
        assert "whoami" not in {t["name"] for t in current.request("tools/list").result["tools"]}
    finally:
        legacy.close()
        current.close()


@SETUP_TIMEOUT
def test_a_session_does_not_keep_the_scopes_of_the_token_that_opened_it(oauth_server):
    """Scopes are the request's token's: a session opened with profile, used with the same user's
    narrower token, gets 403 for whoami; another user's token gets 404 for the session."""
    wide, _ = oauth_clients(oauth_server, "profile")
    try:
        wide.initialize()
        _, result = wide.call_tool("whoami")
        assert result.messages[-1]["result"]["content"][0]["text"] == "ann"
        wide.http.headers.update(token("mcp"))
        assert_challenge(wide.post(request("tools/call", 8, {"name": "whoami", "arguments": {}})), 403,
                         "insufficient_scope")
        wide.http.headers.update(token("ben"))
        assert wide.post(request("tools/call", 9, {"name": "whoami", "arguments": {}})).status_code == 404
    finally:
        wide.close()


@SETUP_TIMEOUT
@pytest.mark.parametrize("params", [
    {"name": ["whoami"]}, {"name": {"x": 1}}, {"name": None}, {"name": "whoami\u0000"}, {"name": "whoami "},
    {"name": "WHOAMI"}, [], "whoami",
], ids=["list", "object", "null", "nul", "space", "upper", "params-list", "params-string"])
def test_odd_tool_names_with_a_narrow_token_get_json_rpc_errors(oauth_server, params):
    """Names that are not exactly a scoped tool's are unknown tools (or invalid params), never a 500."""
    legacy, current = oauth_clients(oauth_server, "mcp")
    try:
        legacy.initialize()
        response = legacy.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
        assert response.status_code in (200, 400), response.text
        messages = [json.loads(line[5:]) for line in response.text.splitlines()
                    if line.startswith("data:") and line[5:].strip()] or [response.json()]
        assert messages[-1]["error"]["code"] in (-32602, -32600)
    finally:
        legacy.close()
        current.close()


@SETUP_TIMEOUT
def test_a_client_credentials_token_acts_as_its_client(oauth_server):
    """A token without a user (client credentials) is its application's principal, with its scopes."""
    legacy, current = oauth_clients(oauth_server, "client")
    try:
        reply = current.call("whoami")
        assert reply.status == 200 and reply.result["content"][0]["text"] == "anonymous"
    finally:
        legacy.close()
        current.close()


# Trace context (tracing): params._meta and the HTTP headers, both eras. The test daphnes record
# spans (tests/live.py), so these values reach the span's parent, links and attributes.

GOOD_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOSTILE_TRACE_META = [
    {"traceparent": 1}, {"traceparent": None}, {"traceparent": ["00", "x"]}, {"traceparent": {"a": 1}},
    {"traceparent": ""}, {"traceparent": "x" * 100_000}, {"traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},
    {"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    {"traceparent": GOOD_TRACEPARENT + "\r\nx-injected: 1"},
    {"traceparent": GOOD_TRACEPARENT, "tracestate": "=" * 10_000},
    {"traceparent": GOOD_TRACEPARENT, "tracestate": ["rojo=1"]},
    {"traceparent": GOOD_TRACEPARENT, "baggage": "k=" + "v" * 100_000},
    {"traceparent": GOOD_TRACEPARENT, "baggage": ",;=%%%"},
]
HOSTILE_TRACE_HEADERS = [
    {"traceparent": "garbage"}, {"traceparent": "00-" + "f" * 32 + "-" + "f" * 16 + "-zz"},
    {"traceparent": GOOD_TRACEPARENT, "tracestate": "a" * 8000}, {"baggage": "=" * 8000},
]


@pytest.mark.parametrize("meta", HOSTILE_TRACE_META, ids=range(len(HOSTILE_TRACE_META)))
def test_hostile_trace_context_in_meta_is_ignored_in_both_eras(c, modern, meta):
    message = request("tools/call", 7, {"name": "echo", "arguments": {"message": "m"}, "_meta": meta})
    with open_sse(c, "POST", message) as reader:
        reader.read_all()
    assert reader.status == 200
    assert reader.messages[-1] == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "m"}]}}
    client = modern()
    reply = client.call("echo", {"message": "n"}, meta=client.meta(**meta))
    assert reply.status == 200 and reply.result["content"] == [{"type": "text", "text": "n"}]


@pytest.mark.parametrize("headers", HOSTILE_TRACE_HEADERS, ids=range(len(HOSTILE_TRACE_HEADERS)))
def test_hostile_trace_context_in_headers_is_ignored(c, modern, headers):
    response = c.post(request("tools/list", 8), headers=headers)
    assert response.status_code == 200 and response.json()["result"]["tools"]
    reply = modern().request("tools/list", headers=headers)
    assert reply.status == 200 and reply.result["tools"]


def test_initialize_with_hostile_trace_context_creates_its_session(mcp):
    for meta, headers in zip(HOSTILE_TRACE_META, HOSTILE_TRACE_HEADERS * len(HOSTILE_TRACE_META)):
        client = mcp()
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}, "_meta": meta}}
        response = client.http.post(client.url, json=body, headers=client.headers(headers))
        assert response.status_code == 200 and response.headers["mcp-session-id"], (meta, response.text)


def test_a_resumption_with_hostile_trace_headers_replays(c):
    message = request("tools/call", 9, {"name": "echo", "arguments": {"message": "r"}})
    with open_sse(c, "POST", message) as reader:
        reader.read_all()
    priming = reader.events[0].id
    replay = c.http.get(c.url, headers=c.headers({"Last-Event-ID": priming, "traceparent": "x" * 4000,
                                                  "tracestate": "\x7f"}, accept="text/event-stream"))
    assert replay.status_code == 200 and '"text":"r"' in replay.text.replace(" ", "")


# Django REST framework's authentication classes (mcp_transport.drf): what a client sends them.


@pytest.fixture(scope="module")
def drf_server():
    s = DaphneServer({"AUTH_BACKENDS": ["mcp_transport.drf.DRFAuthentication"], "REQUIRE_AUTH": True},
                     env={"MCP_TEST_DRF": "1"}).start()
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True,
                   env={**os.environ, **s.db_env(), "MCP_TEST_DRF": "1"})
    yield s
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


@pytest.mark.parametrize("raw_header", [
    b"Authorization: Token", b"Authorization: Token a b", b"Authorization: Token \xff\xfe", b"Authorization: Token "
    + b"x" * 6000, b"Authorization: Token ' OR 1=1 --", b"Authorization: Basic Og==",
    b"Cookie: sessionid=" + b"x" * 4000, b"Cookie: sessionid=\"\\\"; csrftoken=;;;", b"Cookie: sessionid=../../etc",
], ids=["empty", "spaces", "latin1", "6k", "sql", "basic", "4k-session", "quoted-session", "path-session"])
def test_hostile_credentials_for_drf_are_401_or_anonymous(drf_server, raw_header):
    response = exchange(drf_server.port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: " + ACCEPT_BOTH.encode()
                           + b"\r\nContent-Type: application/json\r\n" + raw_header + b"\r\nContent-Length: "
                           + str(len(PING)).encode() + b"\r\nConnection: close\r\n\r\n" + PING)
    assert_rpc_error(response, 401, -32600)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert _server_errors(open(drf_server.log_path, errors="replace").read()) == []
