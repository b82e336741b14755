"""The endpoint driven in-process through mcp_transport.testing (what users get for their own tests)."""
import asyncio

import pytest
from django.core.management import call_command

from example_project.asgi import application
from mcp_transport.models import Session, Stream
from mcp_transport.storage.executor import executor
from mcp_transport.execution.worker import worker
from mcp_transport.testing import MCPCommunicator, parse_events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_database_settled")]


async def test_initialize_call_and_delete():
    client = MCPCommunicator(application)
    result = await client.initialize()
    assert result["protocolVersion"] == "2025-11-25"
    echo = await client.call_tool("echo", {"message": "hi"})
    assert echo.status == 200 and echo.headers["content-type"] == "text/event-stream"
    assert echo.events[0].data == "" and echo.events[0].retry == 1000
    assert echo.result == {"content": [{"type": "text", "text": "hi"}]}
    listed = await client.request("tools/list")
    assert listed.headers["content-type"] == "application/json"
    assert "echo" in {t["name"] for t in listed.result["tools"]}
    assert (await client.delete()).status == 200
    assert (await client.call_tool("echo", {"message": "again"})).status == 404


async def test_resume_after_disconnect_replays_the_rest():
    client = MCPCommunicator(application)
    await client.initialize()
    first = await client.request("tools/call", {"name": "progress", "arguments": {"count": 5, "delay": 0.02},
                                                "_meta": {"progressToken": 7}},
                                 until=lambda e: e.data and '"progress":2' in e.data)
    assert not first.complete
    last_id = first.events[-1].id
    rest = await client.resume(last_id)
    assert rest.complete
    progress = [m["params"]["progress"] for m in first.messages + rest.messages if m.get("method")]
    assert progress == [1, 2, 3, 4, 5]
    assert rest.result == {"content": [{"type": "text", "text": "done 5"}]}

    await worker.heartbeat.flush()
    stream_id = int(last_id.split("-")[0])
    stream, log = await executor.run(
        lambda: (Stream.objects.get(pk=stream_id), [(c.resumed_from, c.close_reason) for c in
                                                    Stream.objects.get(pk=stream_id).connections.all()])
    )
    assert stream.reconnects == 1 and stream.connected_worker == "" and stream.status == "completed"
    assert log == [(None, "client"), (int(last_id.split("-")[1]), "completed")]


async def test_the_pytest_plugins_clients(mcp_client, modern_mcp_client):
    """`pytest_plugins = ["mcp_transport.pytest_plugin"]`: clients of ASGI_APPLICATION, one per revision."""
    await mcp_client.initialize()
    echo = await mcp_client.call_tool("echo", {"message": "hi"})
    assert echo.result == {"content": [{"type": "text", "text": "hi"}]}
    assert "2026-07-28" in (await modern_mcp_client.discover())["supportedVersions"]
    echo = await modern_mcp_client.call_tool("echo", {"message": "hi"})
    assert echo.result["content"] == [{"type": "text", "text": "hi"}]


async def test_the_communicator_sends_a_host_the_project_allows(settings):
    """Django's test runners (manage.py test, pytest-django) turn DEBUG off and add `testserver` to
    ALLOWED_HOSTS, a new project's only allowed host then; outside them DEBUG allows localhost."""
    settings.DEBUG, settings.ALLOWED_HOSTS = False, ["testserver"]
    await MCPCommunicator(application).initialize()
    settings.DEBUG, settings.ALLOWED_HOSTS = True, []
    await MCPCommunicator(application).initialize()
    settings.ALLOWED_HOSTS = ["api.example", "testserver"]
    await MCPCommunicator(application).initialize()
    client = MCPCommunicator(application, host="elsewhere.example")
    with pytest.raises(AssertionError, match="403"):
        await client.initialize()


def test_parse_events_handles_multiline_and_comments():
    events = parse_events(": ping\n\nid: 1-0\nretry: 5\ndata: \n\nid: 1-1\ndata: a\ndata: b\n\n")
    assert [(e.id, e.data, e.retry) for e in events] == [("1-0", "", 5), ("1-1", "a\nb", None)]


def test_prune_command(capsys):
    from datetime import timedelta

    from django.utils import timezone

    Session.objects.create(id="live", protocol_version="2025-11-25")
    Session.objects.create(id="idle", protocol_version="2025-11-25", last_seen_at=timezone.now() - timedelta(days=2))
    call_command("mcp_prune")
    assert "Pruned 1 session rows" in capsys.readouterr().out
    assert list(Session.objects.values_list("id", flat=True)) == ["live"]


async def test_cors_for_allowed_origins():
    from django.test import override_settings

    client = MCPCommunicator(application)
    with override_settings(MCP_TRANSPORT={"ALLOWED_ORIGINS": ["https://app.example"]}):
        preflight = await client.send("OPTIONS", headers={"origin": "https://app.example",
                                                          "access-control-request-method": "POST"})
        assert preflight.status == 204
        assert "mcp-session-id" in preflight.headers["access-control-allow-headers"]
        await client.initialize()
        response = await client.request("ping", headers={"origin": "https://app.example"})
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        assert response.headers["access-control-expose-headers"] == "mcp-session-id"
        denied = await client.send("OPTIONS", headers={"origin": "https://evil.example",
                                                       "access-control-request-method": "POST"})
        assert denied.status == 403


async def test_initialize_ignores_a_newer_version_header_but_later_requests_do_not():
    client = MCPCommunicator(application)
    response = await client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "n", "version": "1"}}},
        headers={"mcp-protocol-version": "2026-07-28"},
    )
    assert response.status == 200 and response.json["result"]["protocolVersion"] == "2025-11-25"
    client.session_id = response.headers["mcp-session-id"]
    refused = await client.request("ping", headers={"mcp-protocol-version": "2026-07-28"})
    assert refused.status == 400 and "MCP-Protocol-Version" in refused.json["error"]["message"]


async def test_a_client_that_does_not_answer_in_time_gets_its_own_error_code():
    """CLIENT_REQUEST_TIMEOUT passed without the client's answer: CLIENT_ANSWER_TIMEOUT, not the 404 body's
    SESSION_NOT_FOUND (-32001)."""
    from django.test import override_settings

    from mcp_transport.protocol import jsonrpc

    client = MCPCommunicator(application)
    with override_settings(MCP_TRANSPORT={"CLIENT_REQUEST_TIMEOUT": 0.2}):
        await client.initialize(capabilities={"elicitation": {}})
        response = await client.call_tool("test_elicitation", {"message": "Who are you?"}, timeout=30)
    asked, final = response.messages[0], response.messages[-1]
    assert asked["method"] == "elicitation/create"
    assert final["error"]["code"] == jsonrpc.CLIENT_ANSWER_TIMEOUT == -32004
    assert "did not answer elicitation/create in time" in final["error"]["message"]
    assert jsonrpc.CLIENT_ANSWER_TIMEOUT != jsonrpc.SESSION_NOT_FOUND == -32001


# What the session keeps is storable on every database (PostgreSQL's text holds no NUL): anything
# else is refused at the edge with a spec-shaped error, never a 500.


def _error(response, status: int, code: int):
    assert response.status == status, (response.status, response.body[:300])
    assert response.json["error"]["code"] == code, response.json
    return response.json["error"]["message"]


async def test_long_request_ids_are_kept_and_echoed_on_every_database():
    """JSON-RPC sets no length on an id: one of 300 characters, or a 250-digit integer, is stored
    with its stream and echoed exactly (PostgreSQL once refused it with a 500)."""
    client = MCPCommunicator(application)
    await client.initialize()
    for request_id in ("x" * 300, 10 ** 250):
        response = await client.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                      "params": {"name": "echo", "arguments": {"message": "hi"}}})
        assert response.status == 200 and response.messages[-1]["id"] == request_id


async def test_nul_characters_in_what_the_session_keeps_are_invalid_params():
    client = MCPCommunicator(application)
    for params in ({"clientInfo": {"name": "c\x00", "version": "1"}, "capabilities": {}},
                   {"clientInfo": {"name": "c", "version": "1"}, "capabilities": {"x\x00": {"y": "\x00"}}}):
        response = await client.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": "2025-11-25", **params}})
        assert "NUL" in _error(response, 400, -32602)
        assert "mcp-session-id" not in response.headers
    await client.initialize()
    for method in ("resources/subscribe", "resources/unsubscribe"):
        response = await client.request(method, {"uri": "test://a\x00b"})
        assert "NUL" in _error(response, 200, -32602)
    long_uri = await client.request("resources/subscribe", {"uri": "test://" + "a" * 5000})
    assert long_uri.status == 200 and long_uri.json["result"] == {}


async def test_a_tool_name_with_nul_is_an_unknown_tool():
    client = MCPCommunicator(application)
    await client.initialize()
    response = await client.call_tool("ech\x00o", {"message": "hi"})
    assert response.status == 200
    assert response.messages[-1]["error"]["code"] == -32602
    assert "Unknown tool" in response.messages[-1]["error"]["message"]
    assert (await client.call_tool("echo", {"message": "after"})).result["content"][0]["text"] == "after"


async def test_a_session_that_only_holds_its_get_stream_stays_alive():
    """The heartbeat touches the sessions whose connections this worker holds: a client that only
    listens sends no request, yet its session must not expire under it."""
    from datetime import timedelta

    from django.utils import timezone

    client = MCPCommunicator(application)
    await client.initialize()
    old = timezone.now() - timedelta(hours=5)
    await executor.run(lambda: Session.objects.filter(pk=client.session_id).update(last_seen_at=old))
    seen = {}

    async def beat_while_listening():
        while not worker.bus.held_streams():
            await asyncio.sleep(0.01)
        await worker.heartbeat.beat()
        seen["last_seen"] = await executor.run(lambda: Session.objects.get(pk=client.session_id).last_seen_at)
        await worker.requests.send_to_session(client.session_id, {"jsonrpc": "2.0", "method": "notifications/x"})

    task = asyncio.ensure_future(beat_while_listening())
    await client.send("GET", until=lambda e: "notifications/x" in e.data, timeout=3)
    await task
    assert seen["last_seen"] > timezone.now() - timedelta(minutes=1)


async def test_a_request_id_still_in_flight_cannot_be_reused():
    client = MCPCommunicator(application)
    await client.initialize()
    first = asyncio.ensure_future(client.post(
        {"jsonrpc": "2.0", "id": "same", "method": "tools/call",
         "params": {"name": "progress", "arguments": {"count": 3, "delay": 0.2}}}, timeout=5))
    for _ in range(200):
        if worker.requests.in_flight(client.session_id, "same"):
            break
        await asyncio.sleep(0.01)
    again = await client.post({"jsonrpc": "2.0", "id": "same", "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"message": "x"}}})
    assert again.status == 400 and again.json["id"] == "same" and again.json["error"]["code"] == -32600
    assert (await first).result["content"][0]["text"] == "done 3"
    reused = await client.post({"jsonrpc": "2.0", "id": "same", "method": "tools/call",
                                "params": {"name": "echo", "arguments": {"message": "after"}}})
    assert reused.result["content"][0]["text"] == "after"


async def test_the_health_check_answers_for_the_database_and_the_channel_layer():
    import json as jsonlib

    from django.test import override_settings

    client = MCPCommunicator(application, path="/mcp/health")
    healthy = await client.send("GET")
    report = jsonlib.loads(healthy.body)
    assert healthy.status == 200 and report["ok"] is True
    assert report["database"]["ok"] and report["channel_layer"]["detail"] == "in-memory (one process)"
    broken = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                          "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:1/0", "socket_timeout": 1}]}}}
    with override_settings(CHANNEL_LAYERS=broken):
        sick = await client.send("GET")
    report = jsonlib.loads(sick.body)
    assert sick.status == 503 and report["ok"] is False and report["database"]["ok"] is True
    assert report["channel_layer"]["ok"] is False and report["channel_layer"]["error"]
    assert (await client.send("POST", b"{}")).status == 405


async def test_signals_for_sessions_and_tasks():
    from mcp_transport import signals
    from mcp_transport.testing import ModernCommunicator

    seen = []

    def record(signal_name):
        def receiver(sender, **kwargs):
            seen.append((signal_name, kwargs))
        return receiver

    receivers = {name: record(name) for name in ("session_created", "session_ended", "task_created",
                                                 "task_finished")}
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    try:
        client = MCPCommunicator(application)
        await client.initialize()
        await client.delete()
        tasks = ModernCommunicator(application, capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
        created = (await tasks.call_tool("slow_compute", {"seconds": 0.6})).result
        for _ in range(300):
            if any(name == "task_finished" for name, _ in seen):
                break
            await asyncio.sleep(0.01)
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    names = [name for name, _ in seen]
    assert names == ["session_created", "session_ended", "task_created", "task_finished"]
    assert seen[0][1]["session_id"] == client.session_id and seen[0][1]["client_info"]["name"]
    assert seen[2][1]["task_id"] == created["taskId"] and seen[2][1]["tool"] == "slow_compute"
    assert seen[3][1]["status"] == "completed"


async def test_signals_for_requests_and_streams():
    from mcp_transport import signals
    from mcp_transport.testing import ModernCommunicator

    seen = []

    def record(signal_name):
        async def receiver(sender, signal, **kwargs):
            seen.append((signal_name, kwargs))
        return receiver

    names = ("request_started", "request_finished", "stream_disconnected", "stream_resumed")
    receivers = {name: record(name) for name in names}
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    try:
        client = MCPCommunicator(application)
        await client.initialize()
        await client.call_tool("echo", {"message": "a"})
        await client.call_tool("test_error_handling")
        await client.call_tool("no_such_tool")
        dropped = await client.call_tool("test_reconnection")
        assert dropped.complete and not any("result" in m for m in dropped.messages)
        stream_id = int(dropped.events[0].id.split("-")[0])
        while await Stream.objects.filter(pk=stream_id, status=Stream.Status.OPEN).aexists():
            await asyncio.sleep(0.02)  # the result is stored: the resumption replays it
        resumed = await client.resume(dropped.events[0].id)
        assert resumed.messages[-1]["result"]["content"][0]["text"].startswith("Reconnection")
        modern = ModernCommunicator(application)
        await modern.call_tool("echo", {"message": "b"})
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    finished = [(kw["method"], kw["tool"], kw["outcome"], kw["protocol_version"]) for name, kw in seen
                if name == "request_finished"]
    legacy = client.version
    assert finished == [
        ("tools/call", "echo", "ok", legacy), ("tools/call", "test_error_handling", "tool_error", legacy),
        ("tools/call", None, "error", legacy), ("tools/call", "test_reconnection", "ok", legacy),
        ("tools/call", "echo", "ok", "2026-07-28"),
    ]
    started = [kw for name, kw in seen if name == "request_started"]
    assert [kw["tool"] for kw in started] == [tool for _, tool, _, _ in finished]
    assert all(kw["session_id"] == client.session_id for kw in started[:4]) and started[4]["session_id"] is None
    assert all(kw["duration"] >= 0 and kw["server"] == "default" for name, kw in seen if name == "request_finished")
    disconnected = [kw for name, kw in seen if name == "stream_disconnected"]
    assert disconnected == [{"server": "default", "session_id": client.session_id, "stream_id": stream_id,
                             "reason": "tool"}]
    [resume] = [kw for name, kw in seen if name == "stream_resumed"]
    assert resume == {"server": "default", "session_id": client.session_id, "stream_id": stream_id,
                      "replayed": 1}


async def test_a_failing_request_started_receiver_fails_the_request_not_the_server():
    from mcp_transport import signals

    async def broken(sender, **kwargs):
        raise RuntimeError("a project's receiver failed")

    signals.request_started.connect(broken)
    try:
        client = MCPCommunicator(application)
        await client.initialize()
        failed = await client.call_tool("echo", {"message": "a"})
    finally:
        signals.request_started.disconnect(broken)
    assert failed.messages[-1]["error"]["code"] == -32603
    assert (await client.call_tool("echo", {"message": "b"})).messages[-1]["result"]["content"][0]["text"] == "b"
