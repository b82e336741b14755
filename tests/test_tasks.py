"""Durable tasks, the 2026-07-28 tasks extension (io.modelcontextprotocol/tasks), in-process."""
import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone

from example_project.asgi import application
from mcp_transport.auth import create_token
from mcp_transport.execution.worker import worker
from mcp_transport.models import Task
from mcp_transport.testing import ModernCommunicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_database_settled")]

EXTENSION = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def tasks_client(**capabilities):
    return ModernCommunicator(application, capabilities={**EXTENSION, **capabilities})


async def poll(client, task_id, until=("completed", "failed", "cancelled"), timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = (await client.request("tasks/get", {"taskId": task_id})).result
        if result["status"] in until or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.05)


async def test_a_call_that_outlasts_the_grace_becomes_a_task_the_client_polls():
    client = tasks_client()
    created = (await client.call_tool("slow_compute", {"seconds": 1, "label": "x"})).result
    assert created["resultType"] == "task" and created["status"] == "working"
    assert set(created) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
    assert not {"result", "error", "inputRequests", "requestState", "ttl", "pollInterval", "task"} & set(created)
    assert created["ttlMs"] == 86_400_000 and created["pollIntervalMs"] == 1000
    at_once = (await client.request("tasks/get", {"taskId": created["taskId"]})).result
    assert at_once["resultType"] == "complete" and at_once["status"] == "working" and "result" not in at_once
    done = await poll(client, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"] == {"content": [{"type": "text", "text": "Computed x in 1s"}]}
    row = await sync_to_async(Task.objects.get)(pk=created["taskId"])
    assert row.tool == "slow_compute" and row.worker == worker.id and row.finished_at is not None


async def test_a_quick_call_of_a_task_tool_is_a_plain_result():
    result = (await tasks_client().call_tool("slow_compute", {"seconds": 0})).result
    assert result["resultType"] == "complete" and "taskId" not in result


async def test_without_the_extension_nothing_becomes_a_task_and_the_task_methods_are_refused():
    plain = ModernCommunicator(application)
    result = (await plain.call_tool("slow_compute", {"seconds": 0.6})).result
    assert result["resultType"] == "complete" and result["content"][0]["text"].startswith("Computed")
    required = await plain.call_tool("failing_job")
    assert required.status == 400 and required.json["error"]["code"] == -32021
    assert required.json["error"]["data"] == {"requiredCapabilities": EXTENSION}
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        refused = await plain.request(method, {"taskId": "x", "inputResponses": {}})
        assert refused.json["error"]["code"] == -32021, method


async def test_unknown_and_malformed_task_ids_are_invalid_params():
    client = tasks_client()
    for task_id in ("no-such-task", "", "x" * 65):
        response = await client.request("tasks/get", {"taskId": task_id})
        assert response.json["error"]["code"] == -32602, task_id
    # A number has no Mcp-Name that mirrors it: the headers are refused first.
    assert (await client.request("tasks/get", {"taskId": 42})).json["error"]["code"] == -32020
    for method in ("tasks/result", "tasks/list"):
        assert (await client.request(method, {"taskId": "x"})).json["error"]["code"] == -32601


async def test_a_tool_error_completes_the_task_a_protocol_error_fails_it():
    client = tasks_client()
    failing = (await client.call_tool("failing_job")).result
    done = await poll(client, failing["taskId"])
    assert done["status"] == "completed" and done["result"]["isError"] is True
    broken = (await client.call_tool("protocol_error_job")).result
    failed = await poll(client, broken["taskId"])
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["code"] == -32603 and "backend is unavailable" in failed["error"]["message"]


async def test_cancel_wins_over_the_work_and_is_acknowledged_again_once_terminal():
    client = tasks_client()
    created = (await client.call_tool("slow_compute", {"seconds": 5})).result
    ack = await client.request("tasks/cancel", {"taskId": created["taskId"]})
    assert ack.result == {"resultType": "complete", "_meta": ack.result["_meta"]}
    cancelled = await poll(client, created["taskId"])
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    for _ in range(100):
        if created["taskId"] not in worker.tasks.running:
            break
        await asyncio.sleep(0.01)
    assert created["taskId"] not in worker.tasks.running  # the work was stopped, not left running
    again = await client.request("tasks/cancel", {"taskId": created["taskId"]})
    assert again.result["resultType"] == "complete"
    assert (await poll(client, created["taskId"]))["status"] == "cancelled"


async def test_a_task_asks_the_client_through_tasks_get_and_tasks_update():
    client = tasks_client(elicitation={})
    created = (await client.call_tool("confirm_delete", {"path": "/srv/x"})).result
    assert created["resultType"] == "task" and created["statusMessage"] == "Waiting for confirmation"
    waiting = await poll(client, created["taskId"], until=("input_required",))
    assert waiting["status"] == "input_required"
    (key, ask), = waiting["inputRequests"].items()
    assert key == "confirm" and ask["method"] == "elicitation/create"
    bad = await client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {"confirm": 7}})
    assert bad.json["error"]["code"] == -32602
    ack = await client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "confirm": {"action": "accept", "content": {"ok": True}}, "never-asked": {"action": "accept"}}})
    assert ack.result["resultType"] == "complete"
    done = await poll(client, created["taskId"])
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted /srv/x"


async def test_partial_answers_keep_the_task_waiting_for_the_rest():
    client = tasks_client(elicitation={})
    created = (await client.call_tool("multi_input")).result
    waiting = await poll(client, created["taskId"], until=("input_required",))
    assert set(waiting["inputRequests"]) == {"first_name", "last_name"}
    await client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "first_name": {"action": "accept", "content": {"name": "Ada"}}}})
    still = (await client.request("tasks/get", {"taskId": created["taskId"]})).result
    assert still["status"] == "input_required" and set(still["inputRequests"]) == {"last_name"}
    await client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "last_name": {"action": "accept", "content": {"name": "Lovelace"}}}})
    done = await poll(client, created["taskId"])
    assert done["result"]["content"][0]["text"] == "Hello, Ada Lovelace!"


async def test_questions_before_the_task_are_input_required_results_then_the_task_has_the_answer():
    client = tasks_client(elicitation={})
    first = await client.call_tool("test_tool_with_task")
    assert first.result["resultType"] == "input_required" and "taskId" not in first.result
    second = await client.retry(first, {"user_name": {"action": "accept", "content": {"name": "Alice"}}})
    assert second.result["resultType"] == "task" and "requestState" not in second.result
    done = await poll(client, second.result["taskId"])
    assert done["result"]["content"][0]["text"] == "Hello, Alice, from a task!"


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]})
async def test_a_task_is_its_principals_alone():
    tokens = await sync_to_async(lambda: [create_token(User.objects.create_user(n))[1] for n in ("ann", "ben")])()
    ann, ben = ({"authorization": f"Bearer {t}"} for t in tokens)
    client = tasks_client()
    created = (await client.call_tool("slow_compute", {"seconds": 1}, headers=ann)).result
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        response = await client.request(method, {"taskId": created["taskId"], "inputResponses": {}}, headers=ben)
        assert response.json["error"]["code"] == -32602, method
    assert (await client.request("tasks/get", {"taskId": created["taskId"]})).json["error"]["code"] == -32602
    mine = (await client.request("tasks/get", {"taskId": created["taskId"]}, headers=ann)).result
    assert mine["status"] in ("working", "completed")


async def test_a_task_whose_worker_is_gone_fails_at_the_next_heartbeat():
    now = timezone.now()
    await sync_to_async(Task.objects.create)(
        id="orphan", tool="slow_compute", request="{}", worker="dead-worker", status="working",
        lease_expires_at=now - timedelta(seconds=1), created_at=now, updated_at=now, ttl_ms=60_000)
    await worker.heartbeat.beat()
    client = tasks_client()
    failed = (await client.request("tasks/get", {"taskId": "orphan"})).result
    assert failed["status"] == "failed" and failed["error"]["data"] == {"reason": "worker_lost"}


async def test_the_inlined_result_keeps_the_tools_own_meta_only():
    from mcp_transport.protocol.tasks import inlined_result

    kept = inlined_result({"resultType": "complete", "content": [], "_meta": {
        "io.modelcontextprotocol/serverInfo": {"name": "s"}, "com.example/trace": "t"}})
    assert kept == {"content": [], "_meta": {"com.example/trace": "t"}}
    assert json.loads(json.dumps(kept)) == kept


async def test_operators_see_tasks_cancel_them_and_count_them():
    from channels.layers import get_channel_layer
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from mcp_transport import operations
    from mcp_transport.management.commands.mcp_status import collect
    from mcp_transport.wakeups import messages

    client = tasks_client()
    working = (await client.call_tool("slow_compute", {"seconds": 5, "label": "admin"})).result["taskId"]
    finished = (await client.call_tool("failing_job")).result["taskId"]
    await poll(client, finished)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(messages.worker_group(worker.id), channel)

    def operate():
        user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
        web = Client()
        web.force_login(user)
        listing = web.get(reverse("admin:mcp_transport_task_changelist")).content.decode()
        page = web.get(reverse("admin:mcp_transport_task_change", args=[working])).content.decode()
        before = collect()["tasks"]
        outcome = operations.cancel_task(Task.objects.get(pk=working))
        again = operations.cancel_task(Task.objects.get(pk=working))
        return listing, page, before, outcome, again, collect()["tasks"]

    listing, page, before, outcome, again, after = await sync_to_async(operate)()
    message = await asyncio.wait_for(layer.receive(channel), 2)
    await layer.group_discard(messages.worker_group(worker.id), channel)
    assert "slow_compute" in listing and "failing_job" in listing and "working" in listing
    assert "mcp-cancel-task" in page and "admin" in page
    assert before["working"] == 1 and before["completed"] == 1
    assert outcome.done and not again.done
    assert message == {**message, "type": messages.TASK, "task": working, "action": "cancel"}
    worker.relay.handle(message)
    assert after["cancelled"] == 1 and after["working"] == 0
    assert (await poll(client, working))["status"] == "cancelled"


async def test_a_task_still_running_when_its_worker_shuts_down_ends_failed():
    client = tasks_client()
    created = (await client.call_tool("slow_compute", {"seconds": 30})).result
    await worker.shutdown.graceful(0.2)
    failed = (await client.request("tasks/get", {"taskId": created["taskId"]})).result
    assert failed["status"] == "failed" and failed["error"]["data"] == {"reason": "worker_shutdown"}
    assert not worker.tasks.running


async def test_a_cancel_whose_message_was_lost_still_stops_the_work_at_the_next_heartbeat():
    from mcp_transport.storage import store

    client = tasks_client()
    created = (await client.call_tool("slow_compute", {"seconds": 30})).result
    # Cancelled in the table only, as another worker does when its message to this one is lost.
    await store.acancel_task(created["taskId"], None, None, "cancelled elsewhere")
    assert created["taskId"] in worker.tasks.running
    await worker.heartbeat.beat()
    for _ in range(100):
        if created["taskId"] not in worker.tasks.running:
            break
        await asyncio.sleep(0.01)
    assert created["taskId"] not in worker.tasks.running
    assert (await poll(client, created["taskId"]))["status"] == "cancelled"


# 2025-11-25 (SEP-1686): tasks on a session, the client asking for them


async def session_client(capabilities=None):
    from mcp_transport.testing import MCPCommunicator

    client = MCPCommunicator(application)
    result = await client.initialize(capabilities)
    assert result["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return client


async def session_poll(client, task_id, until=("completed", "failed", "cancelled")):
    for _ in range(400):
        task = (await client.request("tasks/get", {"taskId": task_id})).json["result"]
        if task["status"] in until:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {until}")


async def test_a_session_asks_for_a_task_polls_it_and_reads_its_result():
    client = await session_client()
    tools = {t["name"]: t for t in (await client.request("tools/list")).json["result"]["tools"]}
    assert tools["progress"]["execution"] == {"taskSupport": "optional"}
    assert tools["failing_job"]["execution"] == {"taskSupport": "required"} and "execution" not in tools["echo"]
    created = await client.request("tools/call", {"name": "progress", "arguments": {"count": 3, "delay": 0.05},
                                                  "task": {"ttl": 60_000}})
    assert created.headers["content-type"] == "application/json"
    task = created.json["result"]["task"]
    assert task["status"] == "working" and task["ttl"] == 60_000 and task["pollInterval"] == 1000
    assert "ttlMs" not in task and "resultType" not in created.json["result"]
    result = await client.request("tasks/result", {"taskId": task["taskId"]})
    assert result.result["content"] == [{"type": "text", "text": "done 3"}]
    assert result.result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    done = (await client.request("tasks/get", {"taskId": task["taskId"]})).json["result"]
    assert done["status"] == "completed" and "result" not in done
    listed = (await client.request("tasks/list")).json["result"]
    assert [t["taskId"] for t in listed["tasks"]] == [task["taskId"]] and "nextCursor" not in listed
    assert (await client.request("tasks/list", {"cursor": "nope"})).json["error"]["code"] == -32602
    again = await client.request("tasks/cancel", {"taskId": task["taskId"]})
    assert again.json["error"]["code"] == -32602 and "already completed" in again.json["error"]["message"]


async def test_a_session_tasks_tool_errors_fail_and_cancel_answers_the_cancelled_task():
    client = await session_client()
    failing = (await client.request("tools/call", {"name": "failing_job", "arguments": {}, "task": {}})
               ).json["result"]["task"]
    failed = await session_poll(client, failing["taskId"])
    assert failed["status"] == "failed"
    result = await client.request("tasks/result", {"taskId": failing["taskId"]})
    assert result.result["isError"] is True  # exactly what the call would have answered
    slow = (await client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30},
                                                "task": {}})).json["result"]["task"]
    cancelled = (await client.request("tasks/cancel", {"taskId": slow["taskId"]})).json["result"]
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == slow["taskId"]
    after = await client.request("tasks/result", {"taskId": slow["taskId"]})
    assert after.messages[-1]["error"]["code"] == -32800


async def test_a_session_refuses_what_a_tool_does_not_allow():
    client = await session_client()
    required = await client.request("tools/call", {"name": "failing_job", "arguments": {}})
    assert required.json["error"]["code"] == -32601
    forbidden = await client.request("tools/call", {"name": "echo", "arguments": {"message": "x"}, "task": {}})
    assert forbidden.json["error"]["code"] == -32601
    bad_ttl = await client.request("tools/call", {"name": "progress", "arguments": {}, "task": {"ttl": "soon"}})
    assert bad_ttl.json["error"]["code"] == -32602
    assert (await client.request("tasks/get", {"taskId": "nope"})).json["error"]["code"] == -32602


async def test_a_session_tasks_question_goes_out_on_its_tasks_result_stream():
    client = await session_client({"elicitation": {}})
    task = (await client.request("tools/call", {"name": "confirm_delete", "arguments": {"path": "/a"},
                                                "task": {}})).json["result"]["task"]
    await session_poll(client, task["taskId"], until=("input_required",))
    asked = await client.request("tasks/result", {"taskId": task["taskId"]},
                                 until=lambda e: e.data and "elicitation/create" in e.data)
    question = next(m for m in asked.messages if m.get("method") == "elicitation/create")
    assert question["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    await client.post({"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"ok": True}}})
    done = await session_poll(client, task["taskId"])
    assert done["status"] == "completed"
    result = await client.request("tasks/result", {"taskId": task["taskId"]})
    assert result.result["content"][0]["text"] == "Deleted /a"


async def test_a_session_tasks_url_elicitation_goes_out_on_its_tasks_result_stream():
    client = await session_client({"elicitation": {"url": {}}})
    task = (await client.request("tools/call", {"name": "open_settings_page", "arguments": {},
                                                "task": {}})).json["result"]["task"]
    await session_poll(client, task["taskId"], until=("input_required",))
    asked = await client.request("tasks/result", {"taskId": task["taskId"]},
                                 until=lambda e: e.data and "elicitation/create" in e.data)
    question = next(m for m in asked.messages if m.get("method") == "elicitation/create")
    params = question["params"]
    assert params["mode"] == "url" and params["elicitationId"].startswith("settings-") and "/connect/" in params["url"]
    await client.post({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}})
    assert (await session_poll(client, task["taskId"]))["status"] == "completed"
    result = await client.request("tasks/result", {"taskId": task["taskId"]})
    assert result.result["content"][0]["text"] == (
        f"action=accept elicitationId={params['elicitationId']} completed=False")


async def test_a_forged_list_cursor_is_invalid_params_on_every_database():
    import base64

    client = await session_client()
    for payload in (["2026-01-01T00:00:00+00:00", "a\x00b"], ["not a date", "x"], "junk", ["2026-01-01T00:00:00", 5]):
        cursor = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        refused = await client.request("tasks/list", {"cursor": cursor})
        assert refused.json["error"]["code"] == -32602, payload
    for task_id in ("a\x00b", "é", "x\ny"):
        assert (await client.request("tasks/get", {"taskId": task_id})).json["error"]["code"] == -32602


# notifications/tasks on subscriptions/listen


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]})
async def test_a_listen_stream_gets_the_tasks_it_asked_about_that_are_its_principals():
    tokens = await sync_to_async(lambda: [create_token(User.objects.create_user(n))[1] for n in ("ann", "ben")])()
    ann, ben = ({"authorization": f"Bearer {t}"} for t in tokens)
    client = tasks_client()
    mine = (await client.call_tool("slow_compute", {"seconds": 3, "label": "n"}, headers=ann)).result["taskId"]
    theirs = (await client.call_tool("slow_compute", {"seconds": 1, "label": "b"}, headers=ben)).result["taskId"]
    response = await tasks_client().request(
        "subscriptions/listen", {"notifications": {"taskIds": [mine, theirs, "no-such-task", "x\x00", mine]}},
        headers=ann, until=lambda e: e.data and '"notifications/tasks"' in e.data, timeout=10)
    ack, *rest = response.messages
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [mine]}
    (pushed,) = [m for m in rest if m.get("method") == "notifications/tasks"]
    listen_id = response.request["id"]
    assert pushed["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": listen_id}
    polled = (await client.request("tasks/get", {"taskId": mine}, headers=ann)).result
    assert pushed["params"]["status"] == "completed" and pushed["params"]["taskId"] == mine
    assert {k: v for k, v in pushed["params"].items() if k != "_meta"} == {
        k: v for k, v in polled.items() if k not in ("_meta", "resultType")}
    assert pushed["params"]["result"] == {"content": [{"type": "text", "text": "Computed n in 3s"}]}


async def test_a_listen_stream_hears_a_cancel_and_a_question_waiting():
    client = tasks_client(elicitation={})
    asking = (await client.call_tool("confirm_delete", {"path": "/tmp/x"})).result["taskId"]
    slow = (await client.call_tool("slow_compute", {"seconds": 30})).result["taskId"]

    async def cancel_soon():
        while not worker.modern.listens:
            await asyncio.sleep(0.01)
        await client.request("tasks/cancel", {"taskId": slow})

    canceller = asyncio.ensure_future(cancel_soon())
    response = await tasks_client().request(
        "subscriptions/listen", {"notifications": {"taskIds": [slow]}},
        until=lambda e: e.data and '"notifications/tasks"' in e.data, timeout=10)
    await canceller
    (pushed,) = [m for m in response.messages if m.get("method") == "notifications/tasks"]
    assert pushed["params"]["taskId"] == slow and pushed["params"]["status"] == "cancelled"
    await poll(client, asking, until=("input_required",))

    async def answer_soon():
        while not worker.modern.listens:
            await asyncio.sleep(0.01)
        await client.request("tasks/update", {"taskId": asking, "inputResponses": {
            "confirm": {"action": "accept", "content": {"ok": True}}}})

    answerer = asyncio.ensure_future(answer_soon())
    response = await tasks_client().request(
        "subscriptions/listen", {"notifications": {"taskIds": [asking]}},
        until=lambda e: e.data and '"status":"completed"' in e.data.replace(" ", ""), timeout=10)
    await answerer
    pushed = [m["params"] for m in response.messages if m.get("method") == "notifications/tasks"]
    assert [p["status"] for p in pushed] == ["working", "completed"], pushed
    assert pushed[-1]["result"]["content"][0]["text"] == "Deleted /tmp/x"


async def test_task_ids_on_a_listen_need_the_extension_and_a_list():
    plain = await ModernCommunicator(application).request("subscriptions/listen",
                                                          {"notifications": {"taskIds": ["x"]}})
    assert plain.status == 400 and plain.json["error"]["code"] == -32021
    assert plain.json["error"]["data"] == {"requiredCapabilities": EXTENSION}
    for odd in ("x", [1], [["x"]], {"x": True}, ["x"] * 101):
        refused = await tasks_client().request("subscriptions/listen", {"notifications": {"taskIds": odd}})
        assert refused.status == 400 and refused.json["error"]["code"] == -32602, odd


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]})
async def test_a_finished_task_is_answered_from_memory_for_its_principal_until_a_prune():
    from mcp_transport import operations

    token = await sync_to_async(lambda: create_token(User.objects.create_user("ann"))[1])()
    ann = {"authorization": f"Bearer {token}"}
    client = tasks_client()
    task_id = (await client.call_tool("slow_compute", {"seconds": 0.6}, headers=ann)).result["taskId"]
    while (await client.request("tasks/get", {"taskId": task_id}, headers=ann)).result["status"] != "completed":
        await asyncio.sleep(0.05)
    await sync_to_async(Task.objects.filter(pk=task_id).delete)()
    remembered = (await client.request("tasks/get", {"taskId": task_id}, headers=ann)).result
    assert remembered["status"] == "completed" and remembered["result"]["content"][0]["text"].startswith("Computed")
    assert (await client.request("tasks/get", {"taskId": task_id})).json["error"]["code"] == -32602
    await sync_to_async(operations.prune)()
    gone = await client.request("tasks/get", {"taskId": task_id}, headers=ann)
    assert gone.json["error"]["code"] == -32602


async def test_the_process_running_a_task_answers_its_polls_from_memory_and_never_after_a_change():
    """Polls of a working task read no row on the process running it: an out-of-band write to the
    row is not seen at once, but within WORKING_TASK_SECONDS (the heartbeat checks the rows); every
    change through the store (a client's answer, its cancel) is seen by the very next poll."""
    from mcp_transport.storage.recent import WORKING_TASK_SECONDS

    client = tasks_client(elicitation={})
    task_id = (await client.call_tool("multi_input")).result["taskId"]
    await poll(client, task_id, until=("input_required",))
    for attempt in range(10):
        marker = f"out of band {attempt}"
        await client.request("tasks/get", {"taskId": task_id})
        await sync_to_async(Task.objects.filter(pk=task_id).update)(status_message=marker)
        if (await client.request("tasks/get", {"taskId": task_id})).result.get("statusMessage") != marker:
            break
    else:
        pytest.fail("no poll was answered from memory")
    deadline = asyncio.get_running_loop().time() + WORKING_TASK_SECONDS + 1.0
    while (await client.request("tasks/get", {"taskId": task_id})).result.get("statusMessage") != marker:
        assert asyncio.get_running_loop().time() < deadline, "the out-of-band change was never seen"
        await asyncio.sleep(0.05)
    await client.request("tasks/get", {"taskId": task_id})
    await client.request("tasks/update", {"taskId": task_id, "inputResponses": {
        "first_name": {"action": "accept", "content": {"name": "Ada"}}}})
    assert set((await client.request("tasks/get", {"taskId": task_id})).result["inputRequests"]) == {"last_name"}
    await client.request("tasks/cancel", {"taskId": task_id})
    assert (await client.request("tasks/get", {"taskId": task_id})).result["status"] == "cancelled"


async def test_a_change_waits_to_be_heard_only_by_a_worker_that_may_still_remember_the_task(monkeypatch):
    """A cancel of a task another worker runs returns once that worker heard it; once the task's lease
    ran out that worker remembers nothing of it, and nothing is waited for."""
    heard = []

    async def task_heard(worker_id, task_id, action, timeout):
        heard.append((worker_id, task_id, action))
        return True

    monkeypatch.setattr(worker.relay, "task_heard", task_heard)
    now = timezone.now()
    for task_id, lease in (("held", 30), ("lapsed", -1)):
        await sync_to_async(Task.objects.create)(
            id=task_id, tool="slow_compute", request="{}", worker="other-worker", status="working",
            lease_expires_at=now + timedelta(seconds=lease), created_at=now, updated_at=now, ttl_ms=60_000)
    client = tasks_client()
    for task_id in ("held", "lapsed"):
        assert (await client.request("tasks/cancel", {"taskId": task_id})).result["resultType"] == "complete"
    assert heard == [("other-worker", "held", "cancel")]


# A task's own events (TaskEvent): its progress and log messages, questions and status changes


async def task_events(task_id: str) -> list[tuple[str, dict]]:
    from mcp_transport.models import TaskEvent

    rows = await sync_to_async(list)(TaskEvent.objects.filter(task_id=task_id).order_by("id")
                                     .values_list("kind", "payload"))
    return [(kind, json.loads(payload)) for kind, payload in rows]


async def test_a_modern_tasks_progress_is_stored_against_it_and_shows_as_its_status_message():
    client = tasks_client()
    created = (await client.request("tools/call", {"name": "progress", "arguments": {"count": 8, "delay": 0.15},
                                                   "_meta": {"progressToken": "p"}})).result
    assert created["resultType"] == "task"
    seen = set()
    while True:
        task = (await client.request("tasks/get", {"taskId": created["taskId"]})).result
        if task["status"] != "working":
            break
        seen.add(task.get("statusMessage"))
        await asyncio.sleep(0.05)
    assert task["status"] == "completed" and "statusMessage" not in task
    assert seen & {f"step {i}" for i in range(5, 9)}, seen  # the tool's progress, while it worked
    events = await task_events(created["taskId"])
    progress = [body["params"] for kind, body in events if kind == "message"]
    # The notifications sent after the call became a task (those before went on its connection).
    assert progress and [p["message"] for p in progress] == [f"step {i}" for i in range(9 - len(progress), 9)]
    assert all(p["progressToken"] == "p" and "_meta" not in p for p in progress)
    assert events[-1] == ("status", {"status": "completed"})


async def test_a_session_tasks_progress_is_stored_against_it_and_on_its_sessions_get_stream():
    from mcp_transport.models import Event, Stream

    client = await session_client()
    task = (await client.request("tools/call", {"name": "progress", "arguments": {"count": 3, "delay": 0.02},
                                                "task": {}, "_meta": {"progressToken": 7}})).json["result"]["task"]
    await client.request("tasks/result", {"taskId": task["taskId"]})
    events = await task_events(task["taskId"])
    messages = [body for kind, body in events if kind == "message"]
    assert [m["params"]["message"] for m in messages] == ["step 1", "step 2", "step 3"]
    related = {"io.modelcontextprotocol/related-task": {"taskId": task["taskId"]}}
    assert all(m["params"]["_meta"] == related for m in messages)
    assert events[-1] == ("status", {"status": "completed"})
    on_stream = await sync_to_async(list)(Event.objects.filter(
        stream__session_id=client.session_id, stream__kind=Stream.Kind.STANDALONE,
        payload__contains="notifications/progress").order_by("seq").values_list("payload", flat=True))
    assert [json.loads(p) for p in on_stream] == messages


async def test_a_tasks_questions_answers_and_cancel_are_its_events():
    client = tasks_client(elicitation={})
    created = (await client.call_tool("confirm_delete", {"path": "/e"})).result
    await poll(client, created["taskId"], until=("input_required",))
    await client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "confirm": {"action": "accept", "content": {"ok": True}}}})
    await poll(client, created["taskId"])
    kinds = [(kind, body.get("status")) for kind, body in await task_events(created["taskId"])]
    assert kinds == [("question", None), ("status", "working"), ("status", "completed")]
    (_, asked), = [e for e in await task_events(created["taskId"]) if e[0] == "question"]
    assert asked["confirm"]["method"] == "elicitation/create"

    slow = (await client.call_tool("slow_compute", {"seconds": 30})).result
    await client.request("tasks/cancel", {"taskId": slow["taskId"]})
    assert await task_events(slow["taskId"]) == [
        ("status", {"status": "cancelled", "statusMessage": "Cancelled by the client"})]


async def test_prune_removes_an_expired_task_with_its_events():
    from mcp_transport.models import TaskEvent
    from mcp_transport.storage import store

    client = tasks_client()
    created = (await client.call_tool("failing_job")).result
    await poll(client, created["taskId"])
    kept = (await client.call_tool("failing_job")).result
    await poll(client, kept["taskId"])
    assert await task_events(created["taskId"])
    await sync_to_async(Task.objects.filter(pk=created["taskId"]).update)(expires_at=timezone.now())
    pruned = await sync_to_async(store.prune)()
    assert pruned["tasks"] == 1 and pruned["task_events"] >= 1
    assert not await sync_to_async(TaskEvent.objects.filter(task_id=created["taskId"]).exists)()
    assert await task_events(kept["taskId"])


async def test_a_session_task_whose_session_is_deleted_keeps_its_progress_against_itself():
    from mcp_transport.models import Session

    client = await session_client()
    task = (await client.request("tools/call", {"name": "progress", "arguments": {"count": 3, "delay": 0.3},
                                                "task": {}, "_meta": {"progressToken": 1}})).json["result"]["task"]
    await sync_to_async(Session.objects.filter(pk=client.session_id).delete)()  # pruned while the task runs
    for _ in range(100):
        row = await sync_to_async(Task.objects.get)(pk=task["taskId"])
        if row.terminal:
            break
        await asyncio.sleep(0.05)
    assert row.status == "completed" and json.loads(row.result)["content"] == [{"type": "text", "text": "done 3"}]
    events = await task_events(task["taskId"])
    assert [body["params"]["message"] for kind, body in events if kind == "message"] == ["step 1", "step 2", "step 3"]
