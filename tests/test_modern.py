"""MCP 2026-07-28 on the same endpoint as the sessions, driven in-process (mcp_transport.testing)."""
import asyncio
import base64
import json

import pytest
from asgiref.sync import sync_to_async
from django.core import signing
from django.test import override_settings

from example_project.asgi import application
from mcp_transport.execution.worker import worker
from mcp_transport.protocol import mrtr
from mcp_transport.testing import MCPCommunicator, ModernCommunicator, parse_events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_database_settled")]

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def envelope(version="2026-07-28", capabilities=None, **extra):
    meta = {VERSION_KEY: version, "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
    meta.update(extra)
    return meta


async def raw(body: dict, headers: dict | None = None, method="POST"):
    client = MCPCommunicator(application)
    return await client.send(method, json.dumps(body).encode(), headers)


async def test_discover_lists_the_modern_version_and_the_capabilities():
    result = await ModernCommunicator(application).discover()
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert result["_meta"][SERVER_INFO]["name"] == "default"
    assert result["ttlMs"] == 60_000 and result["cacheScope"] == "public"


async def test_a_quick_call_is_one_json_body_with_result_type_and_server_info():
    client = ModernCommunicator(application)
    response = await client.call_tool("echo", {"message": "hi"})
    assert response.status == 200 and response.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in response.headers
    result = response.result
    assert result["resultType"] == "complete" and result["content"] == [{"type": "text", "text": "hi"}]
    assert SERVER_INFO in result["_meta"] and "ttlMs" not in result


async def test_lists_carry_caching_hints():
    client = ModernCommunicator(application)
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        result = (await client.request(method)).result
        assert result["resultType"] == "complete" and result["cacheScope"] == "public", method
        assert result["ttlMs"] == 60_000
    read = (await client.request("resources/read", {"uri": "test://static-text"})).result
    assert read["contents"][0]["text"].startswith("This is the content") and read["ttlMs"] == 0


async def test_progress_turns_the_answer_into_sse_without_event_ids():
    client = ModernCommunicator(application)
    response = await client.call_tool("progress", {"count": 3, "delay": 0}, )
    assert response.headers["content-type"] == "application/json"  # no progressToken: nothing to stream
    response = await client.request("tools/call", {"name": "progress", "arguments": {"count": 3, "delay": 0.01},
                                                   "_meta": {"progressToken": "p"}})
    assert response.headers["content-type"] == "text/event-stream"
    assert all(e.id is None and e.retry is None for e in response.events)
    progress = [m["params"]["progress"] for m in response.messages if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
    assert response.result["content"][0]["text"] == "done 3" and response.result["resultType"] == "complete"


async def test_log_messages_only_at_or_above_the_requests_own_level():
    silent = await ModernCommunicator(application).call_tool("test_tool_with_logging")
    assert silent.headers["content-type"] == "application/json"
    loud = await ModernCommunicator(application, log_level="info").call_tool("test_tool_with_logging")
    logs = [m for m in loud.messages if m.get("method") == "notifications/message"]
    assert len(logs) == 3 and loud.result["resultType"] == "complete"
    quiet = await ModernCommunicator(application, log_level="error").call_tool("test_tool_with_logging")
    assert not [m for m in quiet.messages if m.get("method") == "notifications/message"]
    bad = await ModernCommunicator(application, log_level="loud").call_tool("echo", {"message": "x"})
    assert bad.status == 400 and bad.json["error"]["code"] == -32602


@pytest.mark.parametrize("meta, code, status", [
    (None, -32602, 400),
    ({"io.modelcontextprotocol/clientCapabilities": {}}, -32602, 400),
    ({VERSION_KEY: "2026-07-28"}, -32602, 400),
    ({VERSION_KEY: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": []}, -32602, 400),
])
async def test_a_malformed_envelope_is_invalid_params(meta, code, status):
    params = {"name": "echo", "arguments": {"message": "x"}}
    if meta is not None:
        params["_meta"] = meta
    response = await raw({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params},
                         {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"})
    assert (response.status, response.json["error"]["code"], response.json["id"]) == (status, code, 5)


async def test_an_unsupported_version_lists_what_is_supported():
    response = await raw({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                          "params": {"_meta": envelope("2099-01-01")}},
                         {"mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"})
    assert response.status == 400
    error = response.json["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "2099-01-01"
    # Only what a request with this envelope may name: the session-era versions need initialize.
    assert error["data"]["supported"] == ["2026-07-28"]


@pytest.mark.parametrize("headers, fragment", [
    ({"mcp-method": "tools/call", "mcp-name": "echo"}, "MCP-Protocol-Version"),
    ({"mcp-protocol-version": "2025-11-25", "mcp-method": "tools/call", "mcp-name": "echo"}, "does not match"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-name": "echo"}, "Mcp-Method"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", "mcp-name": "echo"}, "Mcp-Method"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}, "Mcp-Name"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "progress"}, "Mcp-Name"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "=?base64?!!?="}, "base64"),
])
async def test_headers_that_do_not_mirror_the_body_are_a_header_mismatch(headers, fragment):
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "x"}, "_meta": envelope()}}
    response = await raw(body, headers)
    assert response.status == 400 and response.json["error"]["code"] == -32020
    assert fragment in response.json["error"]["message"]


async def test_a_base64_name_header_is_decoded_before_comparing():
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "x"}, "_meta": envelope()}}
    encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    response = await raw(body, {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                "mcp-name": encoded})
    assert response.status == 200 and response.json["result"]["content"][0]["text"] == "x"


async def test_unknown_and_session_era_methods_are_404():
    client = ModernCommunicator(application)
    for method in ("nope/nothing", "ping", "logging/setLevel", "resources/subscribe"):
        response = await client.request(method, {"uri": "test://x", "level": "info"})
        assert response.status == 404 and response.json["error"]["code"] == -32601, method


async def test_get_and_delete_from_a_modern_client_are_405():
    client = ModernCommunicator(application)
    for method in ("GET", "DELETE"):
        response = await client.send(method, headers={"mcp-protocol-version": "2026-07-28"})
        assert response.status == 405 and response.headers["allow"] == "POST", method


async def test_resource_not_found_is_invalid_params_not_32002():
    response = await ModernCommunicator(application).request("resources/read", {"uri": "test://missing"})
    assert response.json["error"]["code"] == -32602


async def test_the_legacy_era_is_unchanged_beside_it():
    legacy = MCPCommunicator(application)
    # A client falling back from 2026-07-28 may keep its header on initialize.
    result = await legacy.initialize()
    assert result["protocolVersion"] == "2025-11-25"
    echo = await legacy.call_tool("echo", {"message": "old"})
    assert echo.events[0].data == "" and echo.result == {"content": [{"type": "text", "text": "old"}]}
    assert "resultType" not in echo.result


async def test_a_probe_without_the_meta_key_but_a_modern_header_gets_the_modern_error():
    response = await raw({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {}},
                         {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"})
    assert response.status == 400 and response.json["error"]["code"] == -32602


# MRTR: a tool's questions as input_required results


async def test_elicitation_through_an_input_required_result_and_a_retry():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    first = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    result = first.result
    assert result["resultType"] == "input_required" and "ttlMs" not in result
    (key, ask), = result["inputRequests"].items()
    assert ask["method"] == "elicitation/create" and ask["params"]["message"] == "Who are you?"
    assert ask["params"]["mode"] == "form"
    answer = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
    second = await client.retry(first, {key: answer})
    assert second.result["resultType"] == "complete"
    assert "ada@example.com" in second.result["content"][0]["text"]


async def test_an_ask_without_the_capability_is_32021():
    response = await ModernCommunicator(application).call_tool("test_elicitation", {"message": "x"})
    assert response.status == 400
    assert response.json["error"]["code"] == -32021
    assert response.json["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}


async def test_a_retry_without_the_answer_asks_again():
    client = ModernCommunicator(application, capabilities={"sampling": {}})
    first = await client.call_tool("test_sampling", {"prompt": "2+2?"})
    again = await client.retry(first, {})
    assert again.result["resultType"] == "input_required"
    assert again.result["inputRequests"] == first.result["inputRequests"]


async def test_request_state_that_is_forged_foreign_or_expired_is_refused():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    first = await client.call_tool("test_elicitation", {"message": "m"})
    key = next(iter(first.result["inputRequests"]))
    answer = {key: {"action": "accept", "content": {"username": "u", "email": "e"}}}
    state = first.result["requestState"]

    forged = await client.request("tools/call", {"name": "test_elicitation", "arguments": {"message": "m"},
                                                 "inputResponses": answer, "requestState": state[:-2] + "xx"})
    assert forged.status == 400 and forged.json["error"]["code"] == -32602

    other_args = await client.request("tools/call", {"name": "test_elicitation", "arguments": {"message": "other"},
                                                     "inputResponses": answer, "requestState": state})
    assert other_args.json["error"]["code"] == -32602 and "another request" in other_args.json["error"]["message"]

    payload = signing.loads(state, key=mrtr._key(), salt=mrtr.SALT)
    payload["b"][0] = "someone-else"
    foreign = signing.dumps(payload, key=mrtr._key(), salt=mrtr.SALT, compress=True)
    stolen = await client.request("tools/call", {"name": "test_elicitation", "arguments": {"message": "m"},
                                                 "inputResponses": answer, "requestState": foreign})
    assert stolen.json["error"]["code"] == -32602

    with override_settings(MCP_TRANSPORT={"REQUEST_STATE_SECONDS": -1}):
        expired = await client.retry(first, answer)
    assert expired.json["error"]["code"] == -32602 and "expired" in expired.json["error"]["message"]


# subscriptions/listen


async def test_listen_acknowledges_first_then_delivers_only_what_was_asked():
    listener = ModernCommunicator(application)
    other = ModernCommunicator(application)

    async def change():
        await asyncio.sleep(0.2)
        await other.call_tool("update_resource", {"uri": "test://other"})
        await other.call_tool("update_resource", {"uri": "test://watched-resource"})

    changer = asyncio.ensure_future(change())
    response = await listener.request(
        "subscriptions/listen",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["test://watched-resource"]}},
        until=lambda e: e.data and "resources/updated" in e.data, timeout=5)
    await changer
    messages = response.messages
    listen_id = response.request["id"]
    assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
    assert messages[0]["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": listen_id}
    assert messages[0]["params"]["notifications"] == {"toolsListChanged": True,
                                                      "resourceSubscriptions": ["test://watched-resource"]}
    updates = [m for m in messages if m.get("method") == "notifications/resources/updated"]
    assert [u["params"]["uri"] for u in updates] == ["test://watched-resource"]
    assert updates[0]["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": listen_id}
    await asyncio.sleep(0.05)
    assert not worker.modern.listens


async def test_listen_ends_with_a_result_when_the_server_ends_it():
    listener = ModernCommunicator(application)

    async def end_soon():
        while not worker.modern.listens:
            await asyncio.sleep(0.01)
        worker.modern.end_listens()

    ender = asyncio.ensure_future(end_soon())
    response = await listener.request("subscriptions/listen", {"notifications": {"promptsListChanged": True}},
                                      timeout=5)
    await ender
    assert response.complete
    last = response.messages[-1]
    assert last["id"] == response.request["id"] and last["result"]["resultType"] == "complete"


async def test_a_listen_with_a_bad_filter_is_invalid_params():
    response = await ModernCommunicator(application).request(
        "subscriptions/listen", {"notifications": {"resourceSubscriptions": "test://x"}})
    assert response.status == 400 and response.json["error"]["code"] == -32602


def test_parse_events_without_ids():
    events = parse_events('data: {"a":1}\n\n: keepalive\n\ndata: {"b":2}\n\n')
    assert [(e.id, e.message) for e in events] == [(None, {"a": 1}), (None, {"b": 2})]


async def test_closing_the_connection_cancels_the_request():
    client = ModernCommunicator(application)
    response = await client.request("tools/call", {"name": "progress", "arguments": {"count": 50, "delay": 0.05},
                                                   "_meta": {"progressToken": 1}},
                                    until=lambda e: e.data and '"progress":1' in e.data)
    assert not response.complete
    for _ in range(50):
        if not worker.modern.calls:
            break
        await asyncio.sleep(0.01)
    assert not worker.modern.calls


async def test_several_questions_in_one_round_and_keys_the_tool_chose():
    client = ModernCommunicator(application, capabilities={"elicitation": {}, "sampling": {}, "roots": {}})
    first = await client.call_tool("test_input_required_result_multiple_inputs")
    asks = first.result["inputRequests"]
    assert {k: v["method"] for k, v in asks.items()} == {
        "user_name": "elicitation/create", "greeting": "sampling/createMessage", "client_roots": "roots/list"}
    answers = {"user_name": {"action": "accept", "content": {"name": "Ada"}},
               "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"},
               "client_roots": {"roots": [{"uri": "file:///a"}]}}
    done = await client.retry(first, answers)
    assert done.result["content"][0]["text"] == "Hello Ada, with 1 root(s)"


async def test_multi_round_state_changes_each_round():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    r1 = await client.call_tool("test_input_required_result_multi_round")
    assert list(r1.result["inputRequests"]) == ["step1"]
    r2 = await client.retry(r1, {"step1": {"action": "accept", "content": {"name": "Ada"}}})
    assert list(r2.result["inputRequests"]) == ["step2"]
    assert r2.result["requestState"] != r1.result["requestState"]
    r3 = await client.retry(r2, {"step2": {"action": "accept", "content": {"color": "blue"}}})
    assert r3.result["content"][0]["text"] == "Ada likes blue"


async def test_answers_without_state_are_taken_and_unknown_keys_ignored():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    response = await client.call_tool("test_input_required_result_elicitation")
    assert list(response.result["inputRequests"]) == ["user_name"]
    direct = await client.request("tools/call", {
        "name": "test_input_required_result_elicitation", "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}},
                           "unexpected": {"action": "accept", "content": {}}}})
    assert direct.result["content"][0]["text"] == "Hello, Alice!"
    wrong_key = await client.request("tools/call", {
        "name": "test_input_required_result_elicitation", "arguments": {},
        "inputResponses": {"wrong_key": {"action": "accept", "content": {"data": "x"}}}})
    assert list(wrong_key.result["inputRequests"]) == ["user_name"]


@pytest.mark.parametrize("responses", [{"user_name": 12345}, {"user_name": {"action": "maybe"}}, None, []])
async def test_malformed_answers_are_invalid_params(responses):
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    response = await client.request("tools/call", {"name": "test_input_required_result_elicitation",
                                                   "arguments": {}, "inputResponses": responses})
    assert response.json["error"]["code"] == -32602


async def test_a_tool_asks_only_through_declared_capabilities():
    client = ModernCommunicator(application, capabilities={"sampling": {}})
    response = await client.call_tool("test_input_required_result_capabilities")
    assert [a["method"] for a in response.result["inputRequests"].values()] == ["sampling/createMessage"]


async def test_a_prompt_asks_too():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    first = await client.request("prompts/get", {"name": "test_input_required_result_prompt"})
    assert list(first.result["inputRequests"]) == ["user_context"]
    done = await client.retry(first, {"user_context": {"action": "accept", "content": {"context": "tests"}}})
    assert done.result["resultType"] == "complete" and "tests" in json.dumps(done.result["messages"])


async def test_list_methods_never_ask():
    client = ModernCommunicator(application, capabilities={"elicitation": {}})
    for method in ("tools/list", "prompts/list"):
        assert (await client.request(method)).result["resultType"] == "complete"


async def test_the_same_tools_ask_over_a_session_as_server_requests():
    """One tool API for both eras: on a 2025-11-25 session ctx.ask sends requests on the stream."""
    client = MCPCommunicator(application)
    await client.initialize({"elicitation": {}})
    response = await client.call_tool("test_input_required_result_elicitation",
                                      until=lambda e: e.data and "elicitation/create" in e.data)
    ask = next(m for m in response.messages if m.get("method") == "elicitation/create")
    assert ask["params"]["message"] == "What is your name?" and "id" in ask
    await client.post({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Bo"}}})
    stream = response.events[0].id
    rest = await client.resume(stream)
    assert rest.result["content"][0]["text"] == "Hello, Bo!"


# What an operator sees and does: ModernRequest rows, the admin page, mcp_status


async def _rows(**filters):
    from mcp_transport.models import ModernRequest
    return await sync_to_async(lambda: list(ModernRequest.objects.filter(**filters)))()


async def _end_through_the_relay(row, reason=None):
    """What the admin does (operations.end_modern_request), down to the control message on the
    channel layer, then this worker's relay handling that message (a real daphne: test_deploy)."""
    from channels.layers import get_channel_layer
    from mcp_transport import operations
    from mcp_transport.wakeups import messages

    from mcp_transport.storage import store

    await store.aheartbeat("test-host", 1)  # this worker's row (the test database is emptied between tests)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(messages.worker_group(row.worker), channel)
    try:
        args = (row,) if reason is None else (row, reason)
        outcome = await sync_to_async(operations.end_modern_request)(*args)
        message = await asyncio.wait_for(layer.receive(channel), 2)
    finally:
        await layer.group_discard(messages.worker_group(row.worker), channel)
    assert message["type"] == messages.END_MODERN and message["row"] == row.pk
    worker.relay.handle(message)
    return outcome


async def _wait_rows(count, **filters):
    for _ in range(300):
        rows = await _rows(**filters)
        if len(rows) == count:
            return rows
        await asyncio.sleep(0.01)
    raise AssertionError(f"expected {count} rows for {filters}, have {await _rows(**filters)}")


async def test_a_listen_stream_has_a_row_while_it_lasts_and_an_operator_can_end_it():
    listener = ModernCommunicator(application, client_info={"name": "ended-listener", "version": "1"})
    seen = {}

    async def operator():
        (row,) = await _wait_rows(1, kind="listen", client_name="ended-listener")
        seen["row"] = row
        seen["outcome"] = await _end_through_the_relay(row)

    task = asyncio.ensure_future(operator())
    response = await listener.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                                      timeout=5)
    await task
    row = seen["row"]
    assert row.method == "subscriptions/listen" and row.notifications == {"toolsListChanged": True}
    assert row.request_id == json.dumps(response.request["id"])
    assert seen["outcome"].done
    assert response.complete and response.messages[-1]["result"]["resultType"] == "complete"
    await _wait_rows(0, kind="listen", client_name="ended-listener")


async def test_a_long_call_gets_a_row_a_quick_one_never_and_an_operator_cancel_answers_an_error():
    client = ModernCommunicator(application, client_info={"name": "long-caller", "version": "1"})
    await client.call_tool("echo", {"message": "quick"})
    assert await _rows(kind="call", client_name="long-caller") == []
    seen = {}

    async def operator():
        (row,) = await _wait_rows(1, kind="call", client_name="long-caller")
        seen["row"] = row
        seen["outcome"] = await _end_through_the_relay(row, "too slow")

    task = asyncio.ensure_future(operator())
    response = await client.call_tool("progress", {"count": 40, "delay": 0.1}, timeout=10)
    await task
    assert seen["row"].name == "progress" and seen["row"].method == "tools/call"
    assert response.json["error"]["code"] == -32800 and response.json["error"]["data"] == {"reason": "too slow"}
    await _wait_rows(0, kind="call", client_name="long-caller")


async def test_admin_page_and_status_count_what_is_open():
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse
    from mcp_transport.management.commands.mcp_status import collect
    from mcp_transport.models import ModernRequest

    listener = ModernCommunicator(application, client_info={"name": "counted", "version": "1"})
    seen = {}

    async def look():
        await _wait_rows(1, kind="listen", client_name="counted")
        await _wait_rows(1, kind="listen")

        def render():
            user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
            web = Client()
            web.force_login(user)
            page = web.get(reverse("admin:mcp_transport_modernrequest_changelist"))
            row = seen["row"] = ModernRequest.objects.get(client_name="counted")
            detail = web.get(reverse("admin:mcp_transport_modernrequest_change", args=[row.pk]))
            return page.status_code, page.content.decode(), detail.content.decode(), collect()

        seen["page"] = await sync_to_async(render)()
        worker.modern.end_listens()

    task = asyncio.ensure_future(look())
    await listener.request("subscriptions/listen", {"notifications": {"promptsListChanged": True}}, timeout=5)
    await task
    status, page, detail, state = seen["page"]
    assert status == 200 and "subscriptions/listen" in page and "promptsListChanged" in page
    assert "mcp-end-modern" in detail
    assert state["modern"] == {"listen_streams": 1, "long_calls": 0}
    (mine,) = [w for w in state["workers"] if w["id"] == worker.id]
    assert mine["modern"] == {"listen_streams": 1, "long_calls": 0}


async def test_one_change_reaches_session_get_streams_and_listen_streams_alike():
    legacy = MCPCommunicator(application)
    await legacy.initialize()
    assert (await legacy.request("resources/subscribe", {"uri": "test://watched-resource"})).status == 200
    listener = ModernCommunicator(application)
    changer = ModernCommunicator(application)
    updated = lambda e: e.data and "notifications/resources/updated" in e.data  # noqa: E731

    async def change():
        while not worker.modern.listens:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the GET stream is open by now
        await changer.call_tool("update_resource", {"uri": "test://watched-resource"})

    task = asyncio.ensure_future(change())
    get_stream, listen = await asyncio.gather(
        legacy.send("GET", until=updated, timeout=5),
        listener.request("subscriptions/listen", {"notifications": {"resourceSubscriptions": ["test://watched-resource"]}},
                         until=updated, timeout=5))
    await task
    assert any(m.get("method") == "notifications/resources/updated" for m in get_stream.messages)
    assert any(m.get("method") == "notifications/resources/updated" for m in listen.messages)


async def test_on_a_session_a_missing_capability_is_a_tool_error_result():
    """The client's request was valid: a session's tool that needs an undeclared capability gets an
    exception it may catch, else the call ends with isError (2026-07-28 answers -32021 instead)."""
    client = MCPCommunicator(application)
    await client.initialize()
    response = await client.call_tool("test_elicitation", {"message": "x"})
    assert response.result["isError"] is True
    assert "did not declare the 'elicitation' capability" in response.result["content"][0]["text"]


async def test_a_listen_stream_whose_client_does_not_read_is_ended_not_grown():
    from mcp_transport.execution import modern as modern_execution

    listen = worker.modern.open_listen("default", "slow-reader", {"toolsListChanged": True})
    try:
        for _ in range(modern_execution.MAX_LISTEN_BACKLOG + 50):
            worker.modern.deliver("default", "notifications/tools/list_changed", None)
        assert listen.queue.qsize() == modern_execution.MAX_LISTEN_BACKLOG + 1  # the backlog, then the end
        assert listen.ending
    finally:
        worker.modern.close_listen(listen)
