"""Limits: each a setting, each answered with a clear error, each logged."""
import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import override_settings

from example_project.asgi import application
from mcp_transport.auth import create_token
from mcp_transport.execution.worker import worker
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

pytestmark = pytest.mark.django_db(transaction=True)


async def started(client, name="progress", count=200):
    """A call left running: read its first event, then drop the connection."""
    return await client.request("tools/call", {"name": name, "arguments": {"count": count, "delay": 0.02},
                                               "_meta": {"progressToken": 1}},
                                until=lambda e: bool(e.data))


@override_settings(MCP_TRANSPORT={"MAX_STREAMS_PER_SESSION": 1})
async def test_requests_in_flight_per_session(caplog):
    client = MCPCommunicator(application)
    await client.initialize()
    await started(client)
    with caplog.at_level(logging.WARNING, "mcp_transport.limits"):
        refused = await client.call_tool("echo", {"message": "x"})
    assert refused.status == 429
    assert refused.json["id"] == client._id and refused.json["error"]["code"] == -32003
    assert "MAX_STREAMS_PER_SESSION" in refused.json["error"]["message"]
    assert "Limit hit" in caplog.text
    assert (await client.request("ping")).status == 200


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"],
                                  "MAX_SESSIONS_PER_PRINCIPAL": 1})
async def test_sessions_per_principal():
    token = (await sync_to_async(lambda: create_token(User.objects.create_user("erin")))())[1]

    def client():
        c = MCPCommunicator(application)
        original = c._headers
        c._headers = lambda method, extra: original(method, {**(extra or {}), "authorization": f"Bearer {token}"})
        return c

    await client().initialize()
    second = client()
    refused = await second.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "1"}}})
    assert refused.status == 429 and "MAX_SESSIONS_PER_PRINCIPAL" in refused.json["error"]["message"]
    assert "mcp-session-id" not in refused.headers


@override_settings(MCP_TRANSPORT={"MAX_EVENTS_PER_STREAM": 5})
async def test_events_per_stream_end_the_stream_with_an_error():
    client = MCPCommunicator(application)
    await client.initialize()
    response = await client.request("tools/call", {"name": "progress", "arguments": {"count": 50, "delay": 0},
                                                   "_meta": {"progressToken": 1}})
    progress = [m for m in response.messages if m.get("method") == "notifications/progress"]
    assert len(progress) == 5
    assert response.messages[-1]["error"]["code"] == -32003
    assert "MAX_EVENTS_PER_STREAM" in response.messages[-1]["error"]["message"]


@override_settings(MCP_TRANSPORT={"MAX_BYTES_PER_STREAM": 400})
async def test_bytes_per_stream():
    client = MCPCommunicator(application)
    await client.initialize()
    response = await client.request("tools/call", {"name": "progress", "arguments": {"count": 50, "delay": 0},
                                                   "_meta": {"progressToken": 1}})
    assert 1 <= len([m for m in response.messages if m.get("method")]) < 5
    assert "MAX_BYTES_PER_STREAM" in response.messages[-1]["error"]["message"]


@override_settings(MCP_TRANSPORT={"DISCONNECT_POLICY": "after_priming", "RETRY_MS": 5000,
                                  "MAX_EARLY_RECONNECTS": 1})
async def test_reconnects_that_ignore_retry_get_429_with_retry_after():
    client = MCPCommunicator(application)
    await client.initialize()
    first = await client.call_tool("progress", {"count": 5, "delay": 0.5})
    assert first.events[-1].retry == 5000
    last_id = [e.id for e in first.events if e.id][-1]
    early = await client.resume(last_id)
    assert early.status == 200
    again = await client.resume(last_id)
    assert again.status == 429
    assert 1 <= int(again.headers["retry-after"]) <= 5
    assert again.json["error"]["code"] == -32003


def test_limits_over_real_http(daphne):
    """The same limits through daphne: 429 with a JSON-RPC error, and a stream that ends with one."""
    import threading

    from .live import MCPClient

    server = daphne({"MAX_STREAMS_PER_SESSION": 1, "MAX_EVENTS_PER_STREAM": 3})
    client = MCPClient(server.url)
    client.initialize()
    started = threading.Event()
    holder = threading.Thread(target=lambda: client.call_tool(
        "progress", {"count": 3, "delay": 0.4}, progress_token=1, stop=lambda e: started.set() or False))
    holder.start()
    assert started.wait(10)
    second = MCPClient(server.url)
    second.session_id, second.version = client.session_id, client.version
    refused = second.post({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"message": "x"}}})
    assert refused.status_code == 429
    assert refused.json()["id"] == 77 and refused.json()["error"]["code"] == -32003
    holder.join(20)
    _, capped = second.call_tool("progress", {"count": 10, "delay": 0}, progress_token=2)
    assert len([m for m in capped.messages if m.get("method")]) == 3
    assert "MAX_EVENTS_PER_STREAM" in capped.messages[-1]["error"]["message"]
    assert "Limit hit" in server.logs()


async def test_oversized_bodies_are_refused_and_logged(caplog):
    with override_settings(MCP_TRANSPORT={"MAX_REQUEST_BYTES": 100}):
        client = MCPCommunicator(application)
        with caplog.at_level(logging.WARNING, "mcp_transport.limits"):
            response = await client.send("POST", b"{" + b" " * 200 + b"}")
    assert response.status == 413 and response.json["error"]["code"] == -32600
    assert "Limit hit: MAX_REQUEST_BYTES" in caplog.text


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"],
                                  "MAX_REQUESTS_PER_PRINCIPAL": 1})
async def test_modern_requests_in_flight_per_principal():
    """2026-07-28 has no sessions: its calls and listen streams are counted per principal."""
    token = (await sync_to_async(lambda: create_token(User.objects.create_user("kim")))())[1]
    auth = {"authorization": f"Bearer {token}"}
    holder, other = ModernCommunicator(application), ModernCommunicator(application)
    started = asyncio.Event()

    async def hold():
        return await holder.request("tools/call", {"name": "progress", "arguments": {"count": 5, "delay": 0.2},
                                                   "_meta": {"progressToken": 1}}, headers=auth, timeout=5)

    task = asyncio.ensure_future(hold())
    while not worker.modern.per_principal:
        await asyncio.sleep(0.01)
    refused = await other.call_tool("echo", {"message": "x"}, headers=auth)
    assert refused.status == 429 and refused.json["error"]["code"] == -32003
    assert "MAX_REQUESTS_PER_PRINCIPAL" in refused.json["error"]["message"]
    anonymous = await other.call_tool("echo", {"message": "x"})
    assert anonymous.status in (200, 401)
    assert (await task).result["content"][0]["text"] == "done 5"
    assert (await other.call_tool("echo", {"message": "after"}, headers=auth)).result["content"][0]["text"] == "after"


async def test_a_modern_request_dropped_before_it_ran_gives_its_place_back():
    """The admitted count is released even when the connection goes before the request ever ran
    (no finally of the request runs then): the body and the disconnect arrive together."""
    import json as jsonlib

    from asgiref.testing import ApplicationCommunicator

    client = ModernCommunicator(application)
    for method, params in (("tools/call", {"name": "progress", "arguments": {"count": 5, "delay": 0.1}}),
                           ("subscriptions/listen", {"notifications": {"toolsListChanged": True}})):
        params = client.envelope(params)
        body = {"jsonrpc": "2.0", "id": client.next_id(), "method": method, "params": params}
        headers = client._headers("POST", client.request_headers(method, params))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
        comm = ApplicationCommunicator(application, scope)
        await comm.send_input({"type": "http.request", "body": jsonlib.dumps(body).encode(), "more_body": False})
        await comm.send_input({"type": "http.disconnect"})
        await comm.wait(5)
        for _ in range(100):
            if not worker.modern.per_principal and not worker.modern.listens:
                break
            await asyncio.sleep(0.01)
        assert not worker.modern.per_principal and not worker.modern.listens, method
