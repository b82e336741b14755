"""Property-based fuzzing (hypothesis) of the message parser, of the endpoint through its ASGI
interface (in-process, no sockets), and of the SSE framing.

Reproducible by default: every test runs derandomized (the same examples on every run, no
example database written). `MCP_FUZZ_EXPLORE=1` switches to random seeds and ten times the
examples, for a longer hunt on a developer's machine.

NaN / Infinity, numbers beyond float range and lone surrogate escapes are spliced into
otherwise plausible messages: the parser must refuse them (-32700) and nothing may echo them.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import string

import pytest
from asgiref.testing import ApplicationCommunicator
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from example_project.asgi import application
from mcp_transport.protocol import jsonrpc
from mcp_transport.testing import MCPCommunicator, ModernCommunicator, parse_events

EXPLORE = os.environ.get("MCP_FUZZ_EXPLORE") == "1"


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples * (10 if EXPLORE else 1),
        derandomize=not EXPLORE,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


PARSE_CODES = {jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST}
ERROR_CODES = {jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.METHOD_NOT_FOUND, jsonrpc.INVALID_PARAMS,
               jsonrpc.INTERNAL_ERROR, jsonrpc.RESOURCE_NOT_FOUND, jsonrpc.URL_ELICITATION_REQUIRED,
               jsonrpc.REQUEST_CANCELLED, jsonrpc.SESSION_NOT_FOUND, jsonrpc.LIMIT_EXCEEDED,
               jsonrpc.CLIENT_ANSWER_TIMEOUT, jsonrpc.HEADER_MISMATCH, jsonrpc.MISSING_CLIENT_CAPABILITY,
               jsonrpc.UNSUPPORTED_PROTOCOL_VERSION}


def strict_json(text: str):
    """RFC 8259 JSON only (no NaN / Infinity)."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


# Strategies

json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)

KNOWN_METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                 "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
                 "completion/complete", "logging/setLevel", "notifications/initialized",
                 "notifications/cancelled", "notifications/roots/list_changed", "server/discover"]
methods = st.sampled_from(KNOWN_METHODS) | st.text(max_size=20)
ids = (st.integers(min_value=-(2 ** 64), max_value=2 ** 64) | st.text(max_size=20) | st.none() | st.booleans()
       | st.floats(allow_nan=False, allow_infinity=False) | st.lists(st.integers(), max_size=2)
       | st.just({"a": 1}))

# Tools that end by themselves (progress only with small arguments, below).
TOOLS = ["echo", "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
         "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress", "test_error_handling",
         "test_sampling", "test_elicitation", "json_schema_2020_12_tool", "update_resource", "no_such_tool"]
tool_calls = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(TOOLS) | st.text(max_size=10)},
                          optional={"arguments": json_values, "_meta": json_objects}),
    st.fixed_dictionaries({"name": st.just("progress"),
                           "arguments": st.fixed_dictionaries({"count": st.integers(0, 3),
                                                               "delay": st.sampled_from([0, 0.001])}),
                           "_meta": st.fixed_dictionaries({"progressToken": st.integers() | st.text(max_size=10)})}),
)
initialize_params = st.fixed_dictionaries(
    {}, optional={"protocolVersion": st.sampled_from(["2025-11-25", "2025-06-18", "2025-03-26", "1999-01-01"])
                  | json_scalars,
                  "capabilities": json_objects | json_values, "clientInfo": json_objects | json_values},
)


@st.composite
def rpc_messages(draw) -> dict:
    """Messages shaped like JSON-RPC, right or wrong in every field."""
    message: dict = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0" if draw(st.integers(0, 5)) else draw(json_scalars)
    kind = draw(st.sampled_from(["request", "request", "request", "notification", "response", "junk"]))
    if kind in ("request", "notification"):
        method = draw(methods)
        message["method"] = method
        if draw(st.integers(0, 3)):
            if method == "tools/call":
                message["params"] = draw(tool_calls | json_objects)
            elif method == "initialize":
                message["params"] = draw(initialize_params)
            else:
                message["params"] = draw(json_objects | json_values)
    if kind in ("request", "response") or (kind == "junk" and draw(st.booleans())):
        message["id"] = draw(ids)
    if kind == "response":
        if draw(st.booleans()):
            message["result"] = draw(json_values)
        else:
            message["error"] = draw(st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=10)})
                                    | json_values)
    if kind == "junk":
        message.update(draw(json_objects))
    return message


URIS = st.sampled_from(["test://static-text", "test://static-binary", "test://template/1/data",
                         "test://watched-resource", "test://template/{id}/data"]) | st.text(max_size=15)
PROMPTS = st.sampled_from(["test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                           "test_prompt_with_image"]) | st.text(max_size=10)
PARAMS_BY_METHOD = {
    "initialize": initialize_params,
    "ping": st.just({}) | json_objects,
    "tools/list": st.just({}) | st.fixed_dictionaries({"cursor": json_scalars}),
    "tools/call": tool_calls,
    "resources/list": st.just({}),
    "resources/templates/list": st.just({}),
    "resources/read": st.fixed_dictionaries({"uri": URIS}),
    "resources/subscribe": st.fixed_dictionaries({"uri": URIS}),
    "resources/unsubscribe": st.fixed_dictionaries({"uri": URIS}),
    "prompts/list": st.just({}),
    "prompts/get": st.fixed_dictionaries({"name": PROMPTS},
                                         optional={"arguments": st.dictionaries(st.text(max_size=6),
                                                                                st.text(max_size=6) | json_scalars)}),
    "completion/complete": st.fixed_dictionaries({
        "ref": st.fixed_dictionaries({"type": st.sampled_from(["ref/prompt", "ref/resource"]) | st.text(max_size=5),
                                      "name": PROMPTS, "uri": URIS}),
        "argument": st.fixed_dictionaries({"name": st.sampled_from(["arg1", "arg2", "id"]) | st.text(max_size=4),
                                           "value": st.text(max_size=6) | json_scalars})},
        optional={"context": json_objects}),
    "logging/setLevel": st.fixed_dictionaries({"level": st.sampled_from(["debug", "info", "error", "emergency"])
                                               | json_scalars}),
    "notifications/cancelled": st.fixed_dictionaries({"requestId": ids}, optional={"reason": json_scalars}),
}


@st.composite
def good_messages(draw) -> dict:
    """Well-formed requests and notifications with plausible (not always valid) params."""
    method = draw(st.sampled_from(sorted(PARAMS_BY_METHOD)))
    message = {"jsonrpc": "2.0", "method": method, "params": draw(PARAMS_BY_METHOD[method])}
    if not method.startswith("notifications/"):
        message["id"] = draw(st.integers(min_value=-(2 ** 63), max_value=2 ** 63) | st.text(max_size=12))
    return message


def serialized(messages) -> st.SearchStrategy[bytes]:
    return messages.map(lambda m: json.dumps(m, ensure_ascii=False).encode())


@st.composite
def mutated(draw, base: st.SearchStrategy[bytes]) -> bytes:
    """A serialized message cut short, or with junk bytes spliced in."""
    data = draw(base)
    how = draw(st.sampled_from(["cut", "splice", "replace"]))
    at = draw(st.integers(0, len(data)))
    if how == "cut":
        return data[:at]
    junk = draw(st.binary(min_size=1, max_size=4))
    return data[:at] + junk + data[at + (len(junk) if how == "replace" else 0):]


HOSTILE_LITERALS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1E999", b'"\\ud800"', b'"x\\udfff"',
                    b'"\\udc00\\ud800"']
PLACEHOLDER = "@@literal@@"


@st.composite
def with_hostile_literal(draw) -> bytes:
    """A plausible message with NaN, an infinity or a lone surrogate where an id, a param or a
    tool argument goes."""
    message = draw(good_messages())
    where = draw(st.sampled_from(["id", "param", "argument", "key"]))
    if where == "id" or not isinstance(message.get("params"), dict):
        message["id"] = PLACEHOLDER
    elif where == "argument" and isinstance(message["params"].get("arguments"), dict):
        message["params"]["arguments"]["x"] = PLACEHOLDER
    elif where == "key":
        message["params"][PLACEHOLDER] = 1
    else:
        message["params"]["x"] = PLACEHOLDER
    literal = draw(st.sampled_from(HOSTILE_LITERALS))
    if where == "key" and not literal.startswith(b'"'):
        literal = b'"\\ud800"'
    return json.dumps(message).encode().replace(f'"{PLACEHOLDER}"'.encode(), literal)


deep_nesting = st.tuples(st.integers(1, 200_000), st.sampled_from(["[", '{"a":'])).map(
    lambda t: (t[1] * t[0] + ("1" if t[1] != "[" else "") + ("]" if t[1] == "[" else "}") * t[0]).encode()
)
bodies = st.one_of(
    st.binary(max_size=300),
    with_hostile_literal(),
    serialized(rpc_messages()),
    serialized(good_messages()),
    serialized(json_values),
    mutated(serialized(rpc_messages())),
    deep_nesting,
)


# (a) The parser


def check_parsed(body: bytes):
    try:
        message = jsonrpc.parse(body)
    except jsonrpc.JSONRPCError as exc:
        assert exc.code in PARSE_CODES, exc.code
        assert isinstance(exc.message, str) and exc.message
        error = jsonrpc.error_from(None, exc)
        assert strict_json(jsonrpc.dumps(error)) == error
        return None
    assert isinstance(message, jsonrpc.Message)
    assert message.kind in ("request", "notification", "response")
    assert isinstance(message.raw, dict) and message.raw.get("jsonrpc") == "2.0"
    if message.kind == "request":
        assert isinstance(message.id, (str, int)) and not isinstance(message.id, bool)
        assert isinstance(message.method, str) and message.method
        assert message.params is None or isinstance(message.params, dict)
        assert isinstance(message.meta, dict)
    elif message.kind == "notification":
        assert "id" not in message.raw and isinstance(message.method, str) and message.method
    else:
        assert ("result" in message.raw) != ("error" in message.raw)
    return message


@fuzz_settings(1000)
@given(st.binary(max_size=2000))
def test_parse_any_bytes(body):
    check_parsed(body)


@fuzz_settings(1000)
@given(bodies)
@example(b"[" * 100_000)
@example(b"[" * 100_000 + b"]" * 100_000)
@example(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}')
@example(b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}')
@example(b"\xef\xbb\xbf{}")
@example(b'{"jsonrpc":"2.0","id":1,"id":true,"method":"ping"}')
def test_parse_json_rpc_shapes(body):
    check_parsed(body)


@fuzz_settings(500)
@given(rpc_messages())
def test_parse_classifies_like_the_spec(message):
    """An independent statement of the rules, checked against parse()."""
    def valid_id(value):
        return isinstance(value, (str, int)) and not isinstance(value, bool)

    body = json.dumps(message).encode()
    if message.get("jsonrpc") != "2.0":
        expected = "invalid"
    elif "method" in message:
        method_ok = isinstance(message["method"], str) and message["method"]
        params_ok = message.get("params") is None or isinstance(message.get("params"), dict)
        if not (method_ok and params_ok):
            expected = "invalid"
        elif "id" in message:
            expected = "request" if valid_id(message["id"]) else "invalid"
        else:
            expected = "notification"
    elif ("result" in message) != ("error" in message):
        id_ok = valid_id(message.get("id")) or ("error" in message and message.get("id") is None)
        error_ok = "error" not in message or isinstance(message["error"], dict)
        expected = "response" if id_ok and error_ok else "invalid"
    else:
        expected = "invalid"
    try:
        got = jsonrpc.parse(body).kind
    except jsonrpc.JSONRPCError as exc:
        assert exc.code == jsonrpc.INVALID_REQUEST
        got = "invalid"
    assert got == expected, message


@fuzz_settings(1000)
@given(bodies)
@example(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}')
@example(b'{"jsonrpc":"2.0","id":1,"method":"x\\ud800"}')
@example(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"ping"}')
def test_whatever_parse_accepts_can_be_sent_back_as_utf8_json(body):
    """Anything parse() accepts may be echoed (ids, tokens, arguments): it must serialize to
    strict JSON that encodes to UTF-8 and reads back the same."""
    try:
        message = jsonrpc.parse(body)
    except jsonrpc.JSONRPCError:
        return
    text = jsonrpc.dumps(message.raw)
    assert strict_json(text.encode("utf-8").decode("utf-8")) == message.raw
    assert not re.search(r"[\r\n\u2028\u2029\u0085]", text)  # one SSE data line, whatever splits lines


@fuzz_settings(300)
@given(with_hostile_literal())
def test_hostile_literals_are_parse_errors(body):
    with pytest.raises(jsonrpc.JSONRPCError) as raised:
        jsonrpc.parse(body)
    assert raised.value.code == jsonrpc.PARSE_ERROR


# (b) The endpoint through ASGI

ALLOWED_STATUSES = {200, 202, 204, 400, 403, 404, 405, 406, 409, 413, 415, 429}
# Latin-1 header text (superscript digits included: they once made Last-Event-ID a 500).
header_text = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF,
                                             exclude_characters="\x7f"), max_size=30)
token_text = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=15)


GOOD_HEADERS = {
    "host": "localhost", "accept": "application/json, text/event-stream", "content-type": "application/json",
    "mcp-session-id": "VALID_SESSION", "mcp-protocol-version": "2025-11-25",
}
HEADER_CHOICES = {
    "host": ["localhost", "127.0.0.1:8000", "evil.example", "", "localhost:1"],
    "accept": ["application/json, text/event-stream", "application/json", "text/event-stream", "*/*", "text/html"],
    "content-type": ["application/json", "application/json; charset=utf-8", "text/plain", ""],
    "mcp-session-id": ["VALID_SESSION", "0" * 32, "x" * 65, ""],
    "mcp-protocol-version": ["2025-11-25", "2025-06-18", "2025-03-26", "2026-07-28", ""],
    "origin": ["http://localhost", "http://evil.example", "null"],
    "last-event-id": ["VALID_EVENT", "1-0", "999999-0", "x", ""],
    "content-length": ["0", "5", "99999999999", "-1", "abc"],
    "access-control-request-method": ["POST"],
    "authorization": ["Bearer nope", "Basic Zm9vOmJhcg=="],
}


@st.composite
def json_rpc_bodies(draw) -> bytes:
    """Half plausible messages, the rest any JSON-RPC shape, broken JSON or bytes."""
    kind = draw(st.integers(0, 9))
    if kind < 5:
        return draw(serialized(good_messages()))
    if kind < 8:
        return draw(serialized(rpc_messages()))
    if kind == 8:
        return draw(mutated(serialized(good_messages() | rpc_messages())) | with_hostile_literal())
    return draw(st.binary(max_size=100) | serialized(json_values))


@st.composite
def requests(draw):
    """(method, headers, body chunks) for one HTTP exchange: mostly well-formed requests carrying
    any JSON-RPC shape, some with a header or two wrong, some chaos, some of the 2026-07-28 era.
    "VALID_SESSION" and "VALID_EVENT" are replaced by a live session id and a real event id of it
    (and "VALID_STATE" by a live requestState: `fill_in`)."""
    mode = draw(st.sampled_from(["good"] * 6 + ["mutated"] * 3 + ["chaos"] + ["modern"] * 2))
    if mode == "modern":  # a 2026-07-28 request among the sessions' (section (d))
        return draw(modern_requests())
    if mode == "chaos":
        method = draw(st.sampled_from(["POST", "GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "TRACE", "BREW"]))
        headers = {}
        for name, choices in HEADER_CHOICES.items():
            if draw(st.booleans()):
                headers[name] = draw(st.sampled_from(choices) | header_text)
        for name, value in draw(st.lists(st.tuples(token_text, header_text), max_size=3)):
            headers.setdefault(name.lower(), value)
        body = draw(bodies)
    else:
        method = draw(st.sampled_from(["POST"] * 15 + ["GET"] * 3 + ["DELETE"]))
        headers = dict(GOOD_HEADERS)
        if method != "POST":
            headers["accept"] = "text/event-stream"
            del headers["content-type"]
            if draw(st.booleans()):
                headers["last-event-id"] = draw(st.sampled_from(HEADER_CHOICES["last-event-id"]) | header_text)
        body = draw(json_rpc_bodies()) if method == "POST" else b""
        if mode == "mutated":
            for name in draw(st.lists(st.sampled_from(sorted(HEADER_CHOICES)), min_size=1, max_size=2, unique=True)):
                action = draw(st.sampled_from(["drop", "choice", "choice", "text"]))
                if action == "drop":
                    headers.pop(name, None)
                elif action == "choice":
                    headers[name] = draw(st.sampled_from(HEADER_CHOICES[name]))
                else:
                    headers[name] = draw(header_text)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    return method, headers, chunks


async def asgi_exchange(method: str, headers: dict[str, str], chunks: list[bytes], timeout: float = 5.0):
    """One request to the application; read until the answer is complete, or (SSE) until a final
    JSON-RPC response, or (a GET stream) the first block. Returns (status, headers, body, complete)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }
    comm = ApplicationCommunicator(application, scope)
    for i, chunk in enumerate(chunks):
        await comm.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
    start = await comm.receive_output(timeout)
    assert start["type"] == "http.response.start", start
    response_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start.get("headers", [])}
    sse = response_headers.get("content-type", "").startswith("text/event-stream")
    body, complete = b"", False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            message = await comm.receive_output(deadline - loop.time())
        except asyncio.TimeoutError:
            break
        body += message.get("body", b"")
        if not message.get("more_body"):
            complete = True
            break
        if sse and method == "GET" and body:
            break
        if sse and any(is_final(e) or is_listen_ack(e) for e in parse_events(body.decode("utf-8"))):
            break  # (a subscriptions/listen stream stays open: its acknowledgement is the answer)
    await comm.send_input({"type": "http.disconnect"})
    try:
        await comm.wait(timeout)
    except asyncio.TimeoutError:
        pass
    return start["status"], response_headers, body, complete


def is_final(event) -> bool:
    if not event.data:
        return False
    message = json.loads(event.data)
    return "method" not in message and ("result" in message or "error" in message)


def is_listen_ack(event) -> bool:
    return bool(event.data) and json.loads(event.data).get("method") == "notifications/subscriptions/acknowledged"


def check_error_body(body: bytes):
    payload = strict_json(body.decode("utf-8"))
    assert payload["jsonrpc"] == "2.0" and "result" not in payload, payload
    assert payload["error"]["code"] in ERROR_CODES, payload
    assert isinstance(payload["error"]["message"], str) and payload["error"]["message"], payload
    assert payload["id"] is None or isinstance(payload["id"], (str, int)), payload


def check_response_message(payload: dict):
    assert payload["jsonrpc"] == "2.0", payload
    if "method" in payload:  # a notification or a server-to-client request on a stream
        assert isinstance(payload["method"], str)
        return
    assert ("result" in payload) != ("error" in payload), payload
    if "error" in payload:
        assert payload["error"]["code"] in ERROR_CODES, payload
        assert payload["error"]["code"] != jsonrpc.INTERNAL_ERROR, payload  # no handler crashed


def check_exchange(method, status, headers, body, complete):
    assert status != 500, body
    assert status in ALLOWED_STATUSES, (status, body)
    content_type = headers.get("content-type", "")
    if status in (202, 204):
        assert body == b"", body
    elif status >= 400:
        assert content_type.startswith("application/json"), headers
        check_error_body(body)
    elif content_type.startswith("text/event-stream"):
        text = body.decode("utf-8")
        for line in re.split(r"\r\n|\r|\n", text):  # the framing itself, whatever any parser makes of it
            assert line == "" or line.startswith(("id: ", "data: ", "retry: ", ":")), line
        events = parse_events(text)
        for event in events:
            assert event.id is None or re.fullmatch(r"\d+-\d+", event.id), event.id
            if event.data:
                check_response_message(strict_json(event.data))
        if method == "POST":  # every streamed call ended with its answer; a listen stream is acknowledged
            assert any(is_final(e) or is_listen_ack(e) for e in events), text
    else:
        if body == b"":
            assert method == "DELETE", (method, headers)
        else:
            assert content_type.startswith("application/json"), headers
            check_response_message(strict_json(body.decode("utf-8")))


# State shared by the examples of one test (hypothesis runs them all inside one test call).
fuzz_state: dict = {}


@pytest.fixture(autouse=True)
def _fresh_fuzz_state():
    fuzz_state.clear()
    yield
    fuzz_state.clear()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
@fuzz_settings(1500)
@given(data=st.data())
async def test_endpoint_answers_anything_with_a_spec_shaped_response(data):
    state = await modern_fuzz_state()
    method, headers, chunks = data.draw(requests())
    headers, chunks = fill_in(state, headers, chunks)
    status, response_headers, body, complete = await asgi_exchange(method, headers, chunks)
    check_exchange(method, status, response_headers, body, complete)
    if method == "DELETE" and status == 200:
        state["alive"] = False


@pytest.mark.django_db(transaction=True)
async def test_the_endpoint_still_works_after_the_fuzzing():
    """What is process-wide (the database thread, the relay, the caches, the heartbeat) came
    through the fuzzing above in working order."""
    client = MCPCommunicator(application)
    await client.initialize()
    response = await client.call_tool("echo", {"message": "ok"})
    assert response.result == {"content": [{"type": "text", "text": "ok"}]}


# (c) SSE framing: text full of CR/LF and field names cannot break it

SSE_PIECES = ["\r", "\n", "\r\n", "\n\n", "\r\r", "data:", "data: ", "id:", "id: 9-9", "retry: 1", "event: x", ":",
              ": comment", "\u2028", "\u2029", "\u0085", "\x00", "\ufeff", " ", "\t", "\\n", '"', "}", "\U0001f600"]
sse_text = st.lists(st.sampled_from(SSE_PIECES) | st.text(max_size=5), max_size=25).map("".join)


def framing_ok(response):
    text = response.body.decode("utf-8")
    for line in re.split(r"\r\n|\r|\n", text):
        assert line == "" or line.startswith(("id: ", "data: ", "retry: ", ":")), repr(line)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
@fuzz_settings(400)
@given(text=sse_text)
@example(text="\r\n\r\ndata: {}\n\nid: 1-1\n\n")
@example(text="line1\rline2\nline3\r\nline4")
async def test_tool_text_cannot_break_sse_framing(text):
    client = fuzz_state.get("client")
    if client is None:
        client = fuzz_state["client"] = MCPCommunicator(application)
        await client.initialize()
    response = await client.call_tool("echo", {"message": text})
    assert response.status == 200 and response.complete
    framing_ok(response)
    assert [e.data == "" for e in response.events] == [True, False]  # priming, then the answer, nothing else
    assert response.result == {"content": [{"type": "text", "text": text}]}
    # The same text as a request id and as a progress token, which the server echoes.
    request_id = "id:" + text
    response = await client.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                   "params": {"name": "progress", "arguments": {"count": 1, "delay": 0},
                                              "_meta": {"progressToken": text}}})
    assert response.status == 200 and response.complete
    framing_ok(response)
    notification, answer = response.messages
    assert notification["params"]["progressToken"] == text
    assert answer["id"] == request_id and answer["result"]["content"][0]["text"] == "done 1"



# (d) MCP 2026-07-28 requests: the envelope (`_meta`) and the headers mirroring it, right or wrong

MODERN_VERSION = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
MODERN_CODES = {jsonrpc.HEADER_MISMATCH, jsonrpc.MISSING_CLIENT_CAPABILITY, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION}
MRTR_TOOL = "test_input_required_result_elicitation"
MRTR_TOOLS = [MRTR_TOOL, "test_input_required_result_multi_round", "test_input_required_result_multiple_inputs",
              "test_input_required_result_sampling", "test_input_required_result_list_roots",
              "test_input_required_result_capabilities", "test_missing_capability", "test_streaming_elicitation",
              "test_header_param", "test_logging_tool", "test_trigger_tool_change"]
ANSWER_KEYS = ["user_name", "step1", "step2", "greeting", "client_roots", "capital_question", "confirm",
               "elicitation-1", "sampling-1", "roots-1"]
# requestState: the live one (VALID_STATE, replaced before sending), altered, or anything.
STATES = (st.sampled_from(["VALID_STATE", "VALID_STATEx", "xVALID_STATE", "VALID_STATE:VALID_STATE",
                           "TRUNCATED_STATE", "", "::", "a:b:c"]) | json_values)
answers = st.one_of(
    st.fixed_dictionaries({"action": st.sampled_from(["accept", "decline", "cancel"]) | json_scalars},
                          optional={"content": json_objects | json_values}),
    st.fixed_dictionaries({"role": st.just("assistant"), "model": st.text(max_size=5),
                           "content": st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)})
                           | json_values}),
    st.fixed_dictionaries({"roots": st.lists(st.fixed_dictionaries({"uri": URIS}) | json_values, max_size=3)
                           | json_values}),
    json_values,
)
input_responses = st.dictionaries(st.sampled_from(ANSWER_KEYS) | st.text(max_size=6), answers, max_size=4) | json_values
envelopes = st.fixed_dictionaries(
    {}, optional={
        VERSION_KEY: st.sampled_from([MODERN_VERSION] * 8 + ["2025-11-25", "2099-01-01", ""]) | json_scalars,
        CAPABILITIES_KEY: st.sampled_from([{}, {"elicitation": {}}, {"sampling": {}, "roots": {}},
                                           {"elicitation": {}, "sampling": {}, "roots": {}}]) | json_values,
        CLIENT_INFO_KEY: st.fixed_dictionaries({"name": st.text(max_size=8), "version": st.text(max_size=4)})
        | json_values,
        LOG_LEVEL_KEY: st.sampled_from(["debug", "info", "error", "emergency", "INFO", "loud"]) | json_scalars,
        "progressToken": st.integers() | st.text(max_size=8) | json_values,
    })
listen_filters = st.fixed_dictionaries(
    {}, optional={"toolsListChanged": st.booleans() | json_scalars, "promptsListChanged": st.booleans(),
                  "resourcesListChanged": st.booleans() | json_scalars,
                  "resourceSubscriptions": st.lists(URIS | json_scalars, max_size=5) | json_values}) | json_values
MODERN_PARAMS = {
    **{k: v for k, v in PARAMS_BY_METHOD.items() if k not in ("tools/call", "notifications/cancelled")},
    "server/discover": st.just({}) | json_objects,
    "tools/call": st.one_of(
        tool_calls.map(lambda p: {k: v for k, v in p.items() if k != "_meta"}),
        st.fixed_dictionaries({"name": st.sampled_from(MRTR_TOOLS), "arguments": st.just({}) | json_objects},
                              optional={"inputResponses": input_responses, "requestState": STATES}),
        st.fixed_dictionaries({"name": st.just("test_header_param"),
                               "arguments": st.fixed_dictionaries({"region": st.text(max_size=6) | json_scalars})}),
    ),
    "subscriptions/listen": st.fixed_dictionaries({}, optional={"notifications": listen_filters}),
}
MODERN_HEADER_CHOICES = {
    "mcp-protocol-version": [MODERN_VERSION, "2025-11-25", "2099-01-01", "", f"{MODERN_VERSION}, {MODERN_VERSION}"],
    "mcp-method": ["tools/call", "tools/list", "server/discover", "subscriptions/listen", "",
                   "=?base64?dG9vbHMvY2FsbA==?="],
    "mcp-name": ["echo", "progress", "=?base64?ZWNobw==?=", "=?base64?!!?=", "=?base64??=", "=?base64?/w==?=",
                 "test://static-text", MRTR_TOOL],
    "mcp-param-region": ["eu", "=?base64?ZXU=?=", "=?base64?%?=", "1", "true"],
    "mcp-session-id": ["VALID_SESSION", "0" * 32],
}


@st.composite
def modern_messages(draw) -> dict:
    """A 2026-07-28 request (rarely a notification or a response), its envelope right or wrong.
    (Each choice's common case comes first: hypothesis favours it, when derandomized most of all.)"""
    method = draw(st.sampled_from(["tools/call"] * 6 + ["subscriptions/listen"] * 2 + sorted(MODERN_PARAMS))
                  | st.text(max_size=12))
    params = draw(MODERN_PARAMS.get(method, json_objects))
    params = dict(params) if isinstance(params, dict) else {}
    envelope = draw(st.sampled_from(["right"] * 5 + ["edited", "edited", "dropped", "any"]))
    if envelope == "any":
        params["_meta"] = draw(envelopes | json_values)
    else:
        meta = {VERSION_KEY: MODERN_VERSION, CAPABILITIES_KEY: {"elicitation": {}, "sampling": {}, "roots": {}}}
        if envelope == "edited":  # a key or two of the wrong type or value, or an optional one added
            meta.update(draw(envelopes))
        elif envelope == "dropped":
            meta.pop(draw(st.sampled_from([VERSION_KEY, CAPABILITIES_KEY])))
        params["_meta"] = meta
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    kind = draw(st.sampled_from(["request"] * 18 + ["notification", "response"]))
    if kind != "notification":
        message["id"] = draw(st.integers(min_value=-(2 ** 63), max_value=2 ** 63) | st.text(max_size=12))
    if kind == "response":  # a response carrying an envelope
        message = {"jsonrpc": "2.0", "id": message["id"], "result": {"_meta": params["_meta"]}}
    return message


def _mirror(message: dict) -> dict[str, str]:
    """The headers a correct client sends for this message (what the endpoint compares with the body)."""
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    version = meta.get(VERSION_KEY)
    headers = {"mcp-protocol-version": version if isinstance(version, str) and _plain(version) else MODERN_VERSION}
    method = message.get("method")
    if isinstance(method, str):
        headers["mcp-method"] = method if _plain(method) else _b64(method)
    target = params.get({"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method, ""))
    if isinstance(target, str):
        headers["mcp-name"] = target if _plain(target) else _b64(target)
    region = (params.get("arguments") or {}).get("region") if isinstance(params.get("arguments"), dict) else None
    if region is not None:
        headers["mcp-param-region"] = (_b64(region) if isinstance(region, str) else
                                       json.dumps(region) if not isinstance(region, (dict, list)) else "x")
    return headers


def _plain(value: str) -> bool:
    return value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?")


def _b64(value: str) -> str:
    import base64

    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + "?="


@st.composite
def modern_requests(draw):
    """(method, headers, body chunks) of a modern POST: mostly the headers mirroring the body, some
    with one or two dropped, swapped for another value, or any Latin-1 text; the body sometimes cut."""
    message = draw(modern_messages())
    headers = {"host": "localhost", "accept": "application/json, text/event-stream",
               "content-type": "application/json", **_mirror(message)}
    if draw(st.sampled_from([False, False, True])):
        for name in draw(st.lists(st.sampled_from(sorted(MODERN_HEADER_CHOICES)), min_size=1, max_size=2,
                                  unique=True)):
            action = draw(st.sampled_from(["drop", "choice", "choice", "text"]))
            if action == "drop":
                headers.pop(name, None)
            elif action == "choice":
                headers[name] = draw(st.sampled_from(MODERN_HEADER_CHOICES[name]))
            else:
                headers[name] = draw(header_text)
    body = json.dumps(message).encode()
    if draw(st.sampled_from([False] * 14 + [True])):
        body = draw(mutated(st.just(body)))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=2)))
    return "POST", headers, [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]


async def modern_fuzz_state() -> dict:
    """A live session (VALID_SESSION) and a live requestState for MRTR_TOOL's first round (VALID_STATE)."""
    state = fuzz_state.get("state")
    if state is None or not state["alive"]:
        client = MCPCommunicator(application)
        await client.initialize()
        echo = await client.call_tool("echo", {"message": "seed"})
        asked = await ModernCommunicator(application, capabilities={"elicitation": {}}).call_tool(MRTR_TOOL)
        state = fuzz_state["state"] = {"session": client.session_id, "event": echo.events[-1].id, "alive": True,
                                       "request_state": asked.result["requestState"]}
    return state


def fill_in(state: dict, headers: dict[str, str], chunks: list[bytes]):
    """The placeholders replaced by the live session, event and request state."""
    real = state.get("request_state", "")
    values = {"VALID_SESSION": state["session"], "VALID_EVENT": state["event"],
              "TRUNCATED_STATE": real[:len(real) // 2], "VALID_STATE": real}
    for placeholder, value in values.items():
        headers = {k: v.replace(placeholder, value) for k, v in headers.items()}
        chunks = [c.replace(placeholder.encode(), value.encode()) for c in chunks]
    return headers, chunks


def check_modern_exchange(headers, chunks, status, response_headers, body):
    """On top of check_exchange: what a modern request's answer must be."""
    try:
        message = json.loads(b"".join(chunks))
    except ValueError:
        return
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return
    meta = message["params"].get("_meta")
    if not (isinstance(meta, dict) and VERSION_KEY in meta) or status in (202, 406, 413, 415):
        return
    assert "mcp-session-id" not in response_headers, response_headers  # stateless, whatever it names
    if not response_headers.get("content-type", "").startswith("application/json") or not body:
        return
    payload = strict_json(body.decode("utf-8"))
    if "error" in payload and "id" in message and isinstance(message.get("method"), str):
        code = payload["error"]["code"]
        if code in MODERN_CODES:
            assert status == 400, (status, payload)
        # (-32700 and -32600: the body is no request, so its id is not one either: null, as JSON-RPC says.)
        if code not in PARSE_CODES and jsonrpc._valid_id(message["id"]) and status != 403:
            assert payload["id"] == message["id"], (message.get("id"), payload)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
@fuzz_settings(800)
@given(data=st.data())
@example(data=None)
async def test_modern_requests_get_spec_shaped_answers(data):
    state = await modern_fuzz_state()
    if data is None:  # the live state itself, then the same tool with its answer: the happy path works
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": MRTR_TOOL, "arguments": {}, "requestState": "VALID_STATE",
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Fuzz"}}},
            "_meta": {VERSION_KEY: MODERN_VERSION, CAPABILITIES_KEY: {"elicitation": {}}}}}
        headers = {"host": "localhost", "accept": "application/json, text/event-stream",
                   "content-type": "application/json", **_mirror(message)}
        headers, chunks = fill_in(state, headers, [json.dumps(message).encode()])
        status, response_headers, body, _ = await asgi_exchange("POST", headers, chunks)
        assert status == 200 and b"Hello, Fuzz!" in body, body
        return
    method, headers, chunks = data.draw(modern_requests())
    headers, chunks = fill_in(state, headers, chunks)
    status, response_headers, body, complete = await asgi_exchange(method, headers, chunks)
    check_exchange(method, status, response_headers, body, complete)
    check_modern_exchange(headers, chunks, status, response_headers, body)


@pytest.mark.django_db(transaction=True)
async def test_both_eras_still_work_after_the_modern_fuzzing():
    client = MCPCommunicator(application)
    await client.initialize()
    assert (await client.call_tool("echo", {"message": "ok"})).result == {"content": [{"type": "text", "text": "ok"}]}
    modern = await ModernCommunicator(application).call_tool("echo", {"message": "ok"})
    assert modern.result["content"] == [{"type": "text", "text": "ok"}]
