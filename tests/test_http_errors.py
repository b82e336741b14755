"""Status codes, guards and JSON-RPC error bodies, through real HTTP against daphne.

Every client here records the statuses it sees (`mcp` fixture) and the shared daphne's log
is checked after each test: no request may ever be answered 500 or log a traceback.
"""
import json

import pytest

from .http_support import (  # noqa: F401  (fixtures)
    db, mcp, module_daphne, no_server_errors, rpc, server, session_count, statuses,
)
from .live import ACCEPT_BOTH, VERSION

SESSION_NOT_FOUND = -32001
ALLOW = "GET, POST, DELETE"
APP = "https://app.example"

origins_server = module_daphne({"ALLOWED_ORIGINS": [APP]})


def raw(client, method="POST", body=None, *, session=True, version=True, headers=None, accept=ACCEPT_BOTH,
        content_type="application/json"):
    """One request with exactly the headers asked for (httpx adds Host, Content-Length)."""
    hdrs = {}
    if accept is not None:
        hdrs["Accept"] = accept
    if content_type is not None and method in ("POST", "PUT", "PATCH"):
        hdrs["Content-Type"] = content_type
    if session and client.session_id:
        hdrs["Mcp-Session-Id"] = client.session_id
    if version and client.session_id:
        hdrs["MCP-Protocol-Version"] = client.version
    hdrs.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    req = client.http.build_request(method, client.url, content=body, headers=hdrs)
    if accept is None:
        del req.headers["Accept"]  # httpx would send its default */*
    return client.http.send(req)


def request(method="tools/list", request_id=1, params=None):
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def init_message(version=VERSION, request_id=1, capabilities=None):
    return request("initialize", request_id, {
        "protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"},
    })


def assert_error(response, status, code, request_id=None):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == request_id
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "result" not in body
    return body


@pytest.fixture
def c(mcp):
    """An initialized client on the shared daphne."""
    client = mcp()
    client.initialize()
    return client


# 202 for what is not a request


def test_notification_gets_202_and_empty_body(c):
    response = raw(c, body={"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    assert response.status_code == 202
    assert response.content == b""


def test_unknown_notification_is_accepted_with_202(c):
    response = raw(c, body={"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": 1}})
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": "srv-nobody-asked", "result": {}},
    {"jsonrpc": "2.0", "id": 42, "error": {"code": -32601, "message": "nope"}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "client could not parse"}},
], ids=["result", "error", "error-null-id"])
def test_client_response_gets_202_and_empty_body(c, message):
    response = raw(c, body=message)
    assert response.status_code == 202
    assert response.content == b""


# Mcp-Session-Id


def test_missing_session_id_is_400_echoing_the_request_id(mcp):
    client = mcp()
    response = raw(client, body=request("tools/list", 7), headers={"MCP-Protocol-Version": VERSION})
    assert_error(response, 400, -32600, 7)


def test_missing_session_id_on_notification_get_and_delete_is_400(mcp):
    client = mcp()
    response = raw(client, body={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert_error(response, 400, -32600)
    assert_error(raw(client, "GET", accept="text/event-stream"), 400, -32600)
    assert_error(raw(client, "DELETE"), 400, -32600)


@pytest.mark.parametrize("session_id", ["0" * 32, "no-such-session", "x" * 100],
                         ids=["hex-like", "word", "overlong"])
def test_unknown_session_is_404(mcp, session_id):
    client = mcp()
    hdrs = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": VERSION}
    assert_error(raw(client, body=request("tools/list", 3), headers=hdrs), 404, SESSION_NOT_FOUND, 3)
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert_error(raw(client, body=notification, headers=hdrs), 404, SESSION_NOT_FOUND)
    assert_error(raw(client, "GET", headers=hdrs, accept="text/event-stream"), 404, SESSION_NOT_FOUND)
    assert_error(raw(client, "DELETE", headers=hdrs), 404, SESSION_NOT_FOUND)


def test_non_ascii_session_id_is_404_not_500(mcp):
    client = mcp()
    hdrs = {"Mcp-Session-Id": "caf\u00e9".encode("latin-1"), "MCP-Protocol-Version": VERSION}
    assert_error(raw(client, body=request("ping", 1), headers=hdrs), 404, SESSION_NOT_FOUND, 1)


def test_session_ids_are_visible_ascii_and_unique(mcp, example_server):
    ids = set()
    for _ in range(3):
        client = mcp()
        client.initialize()
        assert client.session_id and all(0x21 <= ord(ch) <= 0x7E for ch in client.session_id)
        assert len(client.session_id) >= 16
        ids.add(client.session_id)
    assert len(ids) == 3


def test_delete_ends_the_session_and_later_requests_get_404(c, example_server):
    response = c.delete()
    assert response.status_code == 200
    assert db(example_server, "SELECT terminated_at IS NOT NULL FROM mcp_transport_session WHERE id = ?",
              (c.session_id,)) == [(1,)]
    assert_error(raw(c, body=request("tools/list", 9)), 404, SESSION_NOT_FOUND, 9)
    assert_error(raw(c, body={"jsonrpc": "2.0", "method": "notifications/initialized"}), 404, SESSION_NOT_FOUND)
    response = raw(c, body={"jsonrpc": "2.0", "id": "srv-1", "result": {}})
    assert response.status_code == 404 and response.json()["error"]["code"] == SESSION_NOT_FOUND
    assert_error(raw(c, "GET", accept="text/event-stream"), 404, SESSION_NOT_FOUND)
    assert_error(raw(c, "GET", accept="text/event-stream", headers={"Last-Event-ID": "1-0"}), 404, SESSION_NOT_FOUND)
    assert_error(raw(c, "DELETE"), 404, SESSION_NOT_FOUND)


def test_refused_client_response_error_body_has_no_id(mcp):
    client = mcp()
    hdrs = {"Mcp-Session-Id": "no-such-session", "MCP-Protocol-Version": VERSION}
    response = raw(client, body={"jsonrpc": "2.0", "id": "srv-1", "result": {}}, headers=hdrs)
    assert_error(response, 404, SESSION_NOT_FOUND, None)


def test_a_session_deleted_on_one_server_is_not_another_servers(mcp):
    """Deleting one session leaves the others alone."""
    a, b = mcp(), mcp()
    a.initialize()
    b.initialize()
    assert a.delete().status_code == 200
    assert b.request("ping")["result"] == {}


# MCP-Protocol-Version


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "latest", ""])
def test_unsupported_protocol_version_header_is_400(c, version):
    hdrs = {"MCP-Protocol-Version": version}
    body = assert_error(raw(c, body=request("tools/list", 11), headers=hdrs), 400, -32600, 11)
    assert "MCP-Protocol-Version" in body["error"]["message"]
    assert_error(raw(c, "GET", headers=hdrs, accept="text/event-stream"), 400, -32600)
    assert_error(raw(c, "DELETE", headers=hdrs), 400, -32600)
    # The session survived the refused requests.
    assert c.request("ping")["result"] == {}


def test_missing_protocol_version_header_is_accepted(c):
    response = raw(c, body=request("tools/list", 5), version=False)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == 5
    assert any(t["name"] == "echo" for t in response.json()["result"]["tools"])
    response = raw(c, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, version=False)
    assert response.status_code == 202


@pytest.mark.parametrize("header", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_every_supported_protocol_version_header_is_accepted(c, header):
    response = raw(c, body=request("ping", 6), headers={"MCP-Protocol-Version": header})
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 6, "result": {}}


def test_2026_discover_probe_is_answered_and_opens_no_session(mcp, example_server):
    """A 2026-07-28 server/discover (the Python SDK 2.x probe) is answered; it opens no session."""
    client = mcp()
    before = session_count(example_server)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    probe = request("server/discover", "probe-1", {"_meta": meta})
    response = raw(client, body=probe, headers={"MCP-Protocol-Version": "2026-07-28",
                                                "Mcp-Method": "server/discover"})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["supportedVersions"] == ["2026-07-28"]
    assert "mcp-session-id" not in response.headers
    assert session_count(example_server) == before


def test_a_malformed_2026_probe_gets_a_400_that_is_not_32022_and_initialize_still_works(mcp, example_server):
    """Without the namespaced version key the probe is malformed: -32602, on which clients fall back."""
    client = mcp()
    before = session_count(example_server)
    probe = request("server/discover", "probe-1", {"_meta": {"protocolVersion": "2026-07-28"}})
    response = raw(client, body=probe, headers={"MCP-Protocol-Version": "2026-07-28"})
    assert_error(response, 400, -32602, "probe-1")
    assert "mcp-session-id" not in response.headers
    assert session_count(example_server) == before
    client.initialize()
    assert client.version == VERSION


def test_discover_probe_without_the_version_header_is_a_4xx_echoing_the_id(mcp, example_server):
    client = mcp()
    before = session_count(example_server)
    probe = request("server/discover", 77, {"_meta": {"protocolVersion": "2026-07-28"}})
    response = raw(client, body=probe)
    assert_error(response, 400, -32600, 77)
    assert session_count(example_server) == before


# Version negotiation


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_initialize_answers_a_supported_version_unchanged(mcp, example_server, version):
    client = mcp()
    result = client.initialize(version=version)
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "default"
    assert "tools" in result["capabilities"]
    rows = db(example_server, "SELECT protocol_version FROM mcp_transport_session WHERE id = ?", (client.session_id,))
    assert rows == [(version,)]


@pytest.mark.parametrize("version", ["2024-11-05", "2099-01-01", "not-a-version"])
def test_initialize_answers_the_latest_for_an_unknown_version(mcp, version):
    client = mcp()
    assert client.initialize(version=version)["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("params", [
    {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    {"protocolVersion": 20251125, "capabilities": {}},
    {"protocolVersion": VERSION, "capabilities": []},
    {"protocolVersion": VERSION, "clientInfo": "t"},
], ids=["no-version", "int-version", "list-capabilities", "string-clientinfo"])
def test_initialize_with_bad_params_is_400_invalid_params_and_opens_no_session(mcp, example_server, params):
    client = mcp()
    before = session_count(example_server)
    response = raw(client, body=request("initialize", 4, params))
    assert_error(response, 400, -32602, 4)
    assert "mcp-session-id" not in response.headers
    assert session_count(example_server) == before


# Origin and Host (DNS rebinding)


@pytest.mark.parametrize("origin", ["http://evil.example", "http://localhost:1", "null", "https://127.0.0.1"])
def test_bad_origin_is_403_on_every_method(c, example_server, origin):
    hdrs = {"Origin": origin}
    before = session_count(example_server)
    body = assert_error(raw(c, body=init_message(), session=False, version=False, headers=hdrs), 403, -32600)
    assert "Origin" in body["error"]["message"]
    assert session_count(example_server) == before
    assert_error(raw(c, body=request("tools/list", 2), headers=hdrs), 403, -32600)
    assert_error(raw(c, "GET", headers=hdrs, accept="text/event-stream"), 403, -32600)
    assert_error(raw(c, "DELETE", headers=hdrs), 403, -32600)
    assert c.request("ping")["result"] == {}  # the refused DELETE did not end the session


def test_same_origin_and_no_origin_are_allowed(c, example_server):
    same = f"http://127.0.0.1:{example_server.port}"
    response = raw(c, body=request("ping", 1), headers={"Origin": same})
    assert response.status_code == 200, response.text
    response = raw(c, body=request("ping", 2))
    assert response.status_code == 200, response.text
    fresh = raw(c, body=init_message(), session=False, version=False, headers={"Origin": same})
    assert fresh.status_code == 200 and fresh.headers.get("mcp-session-id")


def test_allowed_origins_setting(origins_server, mcp):
    s = origins_server
    client = mcp(s)
    response = raw(client, body=init_message(), headers={"Origin": APP})
    assert response.status_code == 200, response.text
    client.session_id = response.headers["mcp-session-id"]
    ok = raw(client, body=request("ping", 2), headers={"Origin": APP})
    assert ok.status_code == 200
    assert_error(raw(client, body=request("ping", 3), headers={"Origin": "https://other.example"}), 403, -32600)
    assert_error(raw(client, body=request("ping", 4), headers={"Origin": APP + ".evil"}), 403, -32600)
    assert_error(raw(client, body=request("ping", 5), headers={"Origin": "http://app.example"}), 403, -32600)
    # Same-origin and no Origin stay allowed besides the list.
    same = raw(client, body=request("ping", 6), headers={"Origin": f"http://127.0.0.1:{s.port}"})
    assert same.status_code == 200
    assert raw(client, body=request("ping", 7)).status_code == 200


def test_cors_preflight_for_an_allowed_origin(origins_server, mcp):
    client = mcp(origins_server)
    response = client.http.options(client.url, headers={
        "Origin": APP, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, mcp-session-id, mcp-protocol-version",
    })
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == APP
    assert {m.strip() for m in response.headers["access-control-allow-methods"].split(",")} >= {"GET", "POST", "DELETE"}
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert allowed >= {"content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id", "accept"}


def test_cors_preflight_for_a_bad_origin_is_403(origins_server, mcp):
    client = mcp(origins_server)
    response = client.http.options(client.url, headers={
        "Origin": "https://other.example", "Access-Control-Request-Method": "POST"})
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


def test_cors_headers_on_cross_origin_responses_only(origins_server, mcp):
    client = mcp(origins_server)
    response = raw(client, body=init_message(), headers={"Origin": APP})
    assert response.headers["access-control-allow-origin"] == APP
    assert "mcp-session-id" in response.headers["access-control-expose-headers"].lower()
    assert "origin" in response.headers["vary"].lower()
    client.session_id = response.headers["mcp-session-id"]
    # An SSE response and an error response carry them too (a browser must be able to read both).
    with client.http.stream("POST", client.url, headers=client.headers({"Origin": APP}), content=json.dumps(
            request("tools/call", 2, {"name": "echo", "arguments": {"message": "x"}}))) as sse:
        assert sse.headers["content-type"].startswith("text/event-stream")
        assert sse.headers["access-control-allow-origin"] == APP
        sse.read()
    missing = raw(client, body=request("ping", 3), headers={"Origin": APP, "Mcp-Session-Id": "nope"})
    assert missing.status_code == 404 and missing.headers["access-control-allow-origin"] == APP
    # Same-origin and Origin-less requests get none.
    same = raw(client, body=request("ping", 4), headers={"Origin": f"http://127.0.0.1:{origins_server.port}"})
    assert "access-control-allow-origin" not in same.headers
    assert "access-control-allow-origin" not in raw(client, body=request("ping", 5)).headers


def test_allowed_origins_wildcard(server, mcp):
    s = server({"ALLOWED_ORIGINS": ["*"]})
    client = mcp(s)
    response = raw(client, body=init_message(), headers={"Origin": "https://anything.example"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.2"])
def test_bad_host_is_403(c, host):
    body = assert_error(raw(c, body=request("ping", 1), headers={"Host": host}), 403, -32600)
    assert "Host" in body["error"]["message"]
    assert_error(raw(c, "GET", headers={"Host": host}, accept="text/event-stream"), 403, -32600)
    fresh = raw(c, body=init_message(), session=False, version=False, headers={"Host": host})
    assert_error(fresh, 403, -32600)


def test_allowed_hosts_are_accepted(c, example_server):
    for host in (f"localhost:{example_server.port}", f"127.0.0.1:{example_server.port}"):
        assert raw(c, body=request("ping", 1), headers={"Host": host}).status_code == 200


# Accept, Content-Type, methods, size


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html", None],
                         ids=["json-only", "sse-only", "html", "missing"])
def test_post_without_both_accept_types_is_406(c, accept):
    response = raw(c, body=request("ping", 1), accept=accept)
    assert_error(response, 406, -32600, None)
    response = raw(c, body=init_message(), session=False, version=False, accept=accept)
    assert_error(response, 406, -32600, None)


@pytest.mark.parametrize("accept", ["*/*", "application/*, text/*", "application/json;q=0.9, text/event-stream;q=1"])
def test_post_accept_wildcards_and_parameters_are_fine(c, accept):
    assert raw(c, body=request("ping", 1), accept=accept).status_code == 200


@pytest.mark.parametrize("accept", ["application/json", "text/html", None], ids=["json", "html", "missing"])
def test_get_without_event_stream_accept_is_406(c, accept):
    assert_error(raw(c, "GET", accept=accept), 406, -32600)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "", None],
                         ids=["text", "form", "empty", "missing"])
def test_post_with_bad_content_type_is_415(c, content_type):
    assert_error(raw(c, body=request("ping", 1), content_type=content_type), 415, -32600)


def test_content_type_with_charset_is_fine(c):
    response = raw(c, body=request("ping", 1), content_type="application/json; charset=utf-8")
    assert response.status_code == 200


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS"])
def test_other_methods_are_405_with_allow(c, method):
    response = raw(c, method, body=request("ping", 1))
    assert response.status_code == 405
    assert response.headers["allow"] == ALLOW
    assert response.json()["error"]["code"] == -32600


def test_request_over_max_request_bytes_is_413(server, mcp):
    s = server({"MAX_REQUEST_BYTES": 2048})
    client = mcp(s)
    client.initialize()
    small = request("tools/call", 1, {"name": "echo", "arguments": {"message": "x" * 1500}})
    response = raw(client, body=small)
    assert response.status_code == 200 and "x" * 1500 in response.text
    big = request("tools/call", 2, {"name": "echo", "arguments": {"message": "x" * 5000}})
    body = assert_error(raw(client, body=big), 413, -32600)
    assert "2048" in body["error"]["message"]

    def chunks():  # no Content-Length: the size is counted as the body arrives
        data = json.dumps(big).encode()
        for i in range(0, len(data), 1000):
            yield data[i:i + 1000]

    response = client.http.post(client.url, content=chunks(), headers=client.headers())
    assert "content-length" not in response.request.headers
    assert_error(response, 413, -32600)
    assert client.request("ping")["result"] == {}  # the server is fine afterwards


def test_initialize_over_the_limit_is_413_too(server, mcp):
    s = server({"MAX_REQUEST_BYTES": 512})
    client = mcp(s)
    message = init_message()
    message["params"]["clientInfo"]["name"] = "n" * 1000
    assert_error(raw(client, body=message), 413, -32600)
    assert session_count(s) == 0


# JSON-RPC errors


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe\x00", b'{"jsonrpc": "2.0", "id": 1,', b"[" * 100000],
                         ids=["garbage", "empty", "not-utf8", "truncated", "deep-nesting"])
def test_parse_error_is_400_with_32700(c, body):
    assert_error(raw(c, body=body), 400, -32700, None)


def test_parse_error_without_session_is_still_32700(mcp):
    assert_error(raw(mcp(), body=b"{oops"), 400, -32700, None)


@pytest.mark.parametrize("message", [
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    [],
    "just a string",
    42,
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": True, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
    {"jsonrpc": "2.0", "id": [1], "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": ""},
    {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}},
    {"jsonrpc": "2.0", "id": True, "result": {}},
    {"jsonrpc": "2.0", "id": 1, "error": "boom"},
], ids=["batch", "empty-batch", "string", "number", "jsonrpc-1.0", "no-jsonrpc", "id-null", "id-bool",
        "id-float", "id-object", "id-array", "method-int", "method-empty", "params-array", "neither",
        "result-and-error", "response-id-bool", "error-not-object"])
def test_invalid_request_is_400_with_32600(c, message):
    body = assert_error(raw(c, body=json.dumps(message)), 400, -32600, None)
    if isinstance(message, list):
        assert "batch" in body["error"]["message"].lower()


def test_batch_is_refused_for_a_2025_03_26_session_too(mcp):
    """Documented choice: batches are refused whatever the negotiated version."""
    client = mcp()
    client.initialize(version="2025-03-26")
    batch = [request("ping", 1), request("tools/list", 2)]
    assert_error(raw(client, body=batch), 400, -32600, None)


def test_invalid_request_on_initialize_opens_no_session(mcp, example_server):
    before = session_count(example_server)
    message = init_message()
    message["id"] = None
    assert_error(raw(mcp(), body=message), 400, -32600, None)
    assert session_count(example_server) == before


@pytest.mark.parametrize("request_id", [7, "abc", 0, -3, "", 2 ** 53])
def test_unknown_method_is_200_with_32601_echoing_the_id(c, request_id):
    response = raw(c, body=request("no/such/method", request_id))
    assert response.status_code == 200
    body = assert_error(response, 200, -32601, request_id)
    assert "no/such/method" in body["error"]["message"]


def _final(client, method, params):
    reader, message = rpc(client, method, params)
    assert reader.status == 200
    return message


@pytest.mark.parametrize("params", [
    {"name": "no_such_tool", "arguments": {}},
    {"name": "echo", "arguments": [1, 2]},
    {"name": "echo", "arguments": "message"},
    {"arguments": {}},
    {"name": 5},
    {"name": ""},
], ids=["unknown-tool", "arguments-array", "arguments-string", "no-name", "name-int", "name-empty"])
def test_tools_call_with_bad_params_is_32602(c, params):
    message = _final(c, "tools/call", params)
    assert message["error"]["code"] == -32602
    assert "result" not in message


@pytest.mark.parametrize("params", [
    {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}},
    {"name": "test_prompt_with_arguments"},
    {"name": "test_prompt_with_arguments", "arguments": ["a", "b"]},
    {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": {"x": 1}}},
    {"name": "no_such_prompt", "arguments": {}},
    {},
], ids=["missing-arg", "no-arguments", "arguments-array", "arg-wrong-type", "unknown-prompt", "no-name"])
def test_prompts_get_with_bad_params_is_32602(c, params):
    message = _final(c, "prompts/get", params)
    assert message["error"]["code"] == -32602
    assert "result" not in message


def test_prompts_get_with_good_arguments_works(c):
    message = _final(c, "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}})
    assert "arg1='a'" in message["result"]["messages"][0]["content"]["text"]


def test_bad_tool_arguments_are_a_tool_error_not_a_protocol_error(c):
    message = _final(c, "tools/call", {"name": "echo", "arguments": {"message": ["not", "a", "string"]}})
    assert message["result"]["isError"] is True
    assert "message" in message["result"]["content"][0]["text"]


@pytest.mark.parametrize("method,params,code", [
    ("logging/setLevel", {"level": "loud"}, -32602),
    ("resources/read", {"uri": "test://nothing-here"}, -32002),
    ("resources/read", {}, -32602),
    ("completion/complete", {"ref": "x", "argument": {}}, -32602),
    ("tools/list", {"cursor": "bogus"}, -32602),
    ("resources/subscribe", {"uri": 5}, -32602),
])
def test_other_bad_params(c, method, params, code):
    message = _final(c, method, params)
    assert message["error"]["code"] == code


def test_error_responses_keep_the_session_usable(c):
    for body in (b"{", [1], request("nope", 1)):
        raw(c, body=body)
    assert c.request("ping")["result"] == {}


# Robustness: odd params on every method give JSON-RPC errors, never a 500 or an internal error

METHODS = ["ping", "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
           "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
           "logging/setLevel"]
ODD_PARAMS = [
    {}, {"cursor": 5}, {"cursor": []}, {"name": ["x"]}, {"name": "echo", "arguments": {"message": None}},
    {"uri": ["x"]}, {"uri": "test://template/%%/data"}, {"uri": "test://template//data"},
    {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
     "argument": {"name": "arg1", "value": "pa"}, "context": {"arguments": []}},
    {"ref": {"type": ["ref/prompt"], "name": "x"}, "argument": {"name": "arg1", "value": "p"}},
    {"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"}, "argument": {"name": "id", "value": 5}},
    {"level": ["debug"]}, {"level": None}, {"_meta": []},
    {"_meta": {"progressToken": {"a": 1}}, "name": "progress", "arguments": {"count": 1, "delay": 0}},
    {"name": "progress", "arguments": {"count": -1, "delay": -1}},
    {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": 5}},
    {"name": "json_schema_2020_12_tool", "arguments": {"address": "x"}},
]


@pytest.mark.parametrize("method", METHODS)
def test_odd_params_never_cause_a_500_or_an_internal_error(c, method):
    for params in ODD_PARAMS:
        reader, message = rpc(c, method, params)
        assert reader.status == 200, (params, reader.status)
        assert message is not None and message["jsonrpc"] == "2.0", params
        assert "result" in message or message["error"]["code"] != -32603, (params, message)


@pytest.mark.parametrize("params", [
    {"ref": {"type": "ref/prompt", "name": ["x"]}, "argument": {"name": "arg1", "value": "p"}},
    {"ref": {"type": "ref/resource", "uri": {}}, "argument": {"name": "id", "value": "p"}},
    {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
     "argument": {"name": "arg1", "value": "p"}, "context": "x"},
], ids=["ref-name-list", "ref-uri-object", "context-string"])
def test_completion_complete_with_malformed_ref_or_context_is_32602(mcp, params):
    client = mcp()
    client.initialize()
    reader, message = rpc(client, "completion/complete", params)
    assert message["error"]["code"] == -32602, message


def test_completion_complete_works(c):
    params = {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
              "argument": {"name": "arg1", "value": "par"}}
    _, message = rpc(c, "completion/complete", params)
    assert message["result"]["completion"] == {"values": ["paris", "park", "party"], "total": 3, "hasMore": False}


def test_json_response_mode_answers_calls_with_one_json_body(server, mcp):
    s = server({"JSON_RESPONSE": True})
    client = mcp(s)
    client.initialize()
    response = raw(client, body=request("tools/call", 3, {"name": "echo", "arguments": {"message": "plain"}}),
                   accept="application/json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["content"][0]["text"] == "plain"
    # With no stream, the server cannot ask the client anything: an error, not a hang.
    client2 = mcp(s)
    client2.initialize(capabilities={"elicitation": {}})
    response = raw(client2, body=request("tools/call", 4, {"name": "test_elicitation", "arguments": {"message": "?"}}))
    assert response.status_code == 200 and response.json()["error"]["code"] == -32603
