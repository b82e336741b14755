"""URL-mode elicitation in both revisions, in-process: the example's connect_account and
open_settings_page tools, the page they send the user to (example.views.connect), and
`complete_elicitation` telling the session that started one, and no other."""
import asyncio
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from example_project.asgi import application
from mcp_transport.execution.worker import worker
from mcp_transport.models import Elicitation, Event, Session, Stream, elicitation_key
from mcp_transport.operations import acomplete_elicitation, complete_elicitation
from mcp_transport.storage import store
from mcp_transport.storage.executor import executor
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_database_settled")]

URL_MODE = {"elicitation": {"form": {}, "url": {}}}


async def _session(capabilities=URL_MODE) -> MCPCommunicator:
    client = MCPCommunicator(application)
    await client.initialize(capabilities)
    return client


async def _asked(client, tool: str):
    """Call `tool` until it asks; -> (the response so far, the elicitation/create request)."""
    response = await client.call_tool(tool, until=lambda e: e.data and "elicitation/create" in e.data)
    return response, next(m for m in response.messages if m.get("method") == "elicitation/create")


async def _answer(client, response, ask, result: dict):
    await client.post({"jsonrpc": "2.0", "id": ask["id"], "result": result})
    return await client.resume(response.events[0].id)


async def test_a_url_elicitation_goes_to_a_client_that_declared_url_mode():
    client = await _session()
    response, ask = await _asked(client, "open_settings_page")
    params = ask["params"]
    assert set(params) == {"mode", "message", "url", "elicitationId"}
    assert params["mode"] == "url" and params["message"] == "Set your API key on this page."
    assert params["elicitationId"].startswith("settings-")
    assert urlsplit(params["url"]).path == f"/connect/{params['elicitationId']}/"
    rest = await _answer(client, response, ask, {"action": "accept"})
    assert rest.result["content"][0]["text"] == (
        f"action=accept elicitationId={params['elicitationId']} completed=False")


@pytest.mark.parametrize("capabilities, tool, missing", [
    ({"elicitation": {}}, "open_settings_page", "elicitation.url"),
    ({"elicitation": {"form": {}}}, "connect_account", "elicitation.url"),
    ({}, "open_settings_page", "elicitation.url"),
    ({"elicitation": {"url": {}}}, "test_elicitation", "elicitation.form"),
])
async def test_a_mode_the_client_did_not_declare_is_never_sent(capabilities, tool, missing):
    """An empty elicitation capability is form mode only; a client of URL mode alone gets no forms."""
    client = await _session(capabilities)
    response = await client.call_tool(tool, {"message": "m"} if tool == "test_elicitation" else {})
    assert not [m for m in response.messages if m.get("method") == "elicitation/create"]
    assert response.result["isError"] is True
    assert f"did not declare the '{missing}' capability" in response.result["content"][0]["text"]


async def test_completion_reaches_the_session_that_started_it_on_its_get_stream_once():
    client, bystander = await _session(), await _session()
    response, ask = await _asked(client, "open_settings_page")
    elicitation_id = ask["params"]["elicitationId"]
    await _answer(client, response, ask, {"action": "accept"})

    get_stream, _, _ = await executor.run(store.standalone_stream, client.session_id)

    async def complete_while_listening():
        while get_stream not in worker.bus.held_streams():
            await asyncio.sleep(0.01)
        return await acomplete_elicitation(elicitation_id)

    completing = asyncio.ensure_future(complete_while_listening())
    listened = await client.send("GET", until=lambda e: "elicitation/complete" in e.data, timeout=5)
    assert await completing is True
    assert listened.messages == [{"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                  "params": {"elicitationId": elicitation_id}}]
    assert await acomplete_elicitation(elicitation_id) is False

    def payloads(session_id):
        return list(Event.objects.filter(stream__session_id=session_id, stream__kind=Stream.Kind.STANDALONE)
                    .values_list("payload", flat=True))
    mine, theirs = await executor.run(payloads, client.session_id), await executor.run(payloads, bystander.session_id)
    assert sum("elicitation/complete" in p for p in mine) == 1
    assert not any(elicitation_id in p for p in theirs)
    again, ask = await _asked(client, "open_settings_page")
    rest = await _answer(client, again, ask, {"action": "accept"})
    assert rest.result["content"][0]["text"].endswith("completed=True")


async def test_a_tool_waits_for_the_page_to_complete_its_elicitation():
    client = await _session()
    response, ask = await _asked(client, "set_api_key")
    await client.post({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
    await asyncio.sleep(0.2)
    assert await acomplete_elicitation(ask["params"]["elicitationId"]) is True
    rest = await client.resume(response.events[0].id)
    assert rest.result["content"] == [{"type": "text", "text": "The API key is set."}]

    impatient = await _session()
    response = await impatient.call_tool("set_api_key", {"wait_seconds": 0.3},
                                         until=lambda e: e.data and "elicitation/create" in e.data)
    ask = next(m for m in response.messages if m.get("method") == "elicitation/create")
    await impatient.post({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
    rest = await impatient.resume(response.events[0].id)
    assert rest.result["content"] == [{"type": "text", "text": "The page was not completed in time."}]


async def test_url_elicitation_required_is_32042_until_the_page_completes_it():
    client = await _session()
    refused = await client.call_tool("connect_account")
    error = refused.messages[-1]["error"]
    assert error["code"] == -32042 and error["message"] == "This request requires more information."
    (elicitation,) = error["data"]["elicitations"]
    assert elicitation["mode"] == "url" and elicitation["message"] == "Connect your account to continue."
    assert elicitation["elicitationId"].startswith("connect-")
    assert (await client.call_tool("connect_account")).messages[-1]["error"]["code"] == -32042

    page = Client()
    path = urlsplit(elicitation["url"]).path
    assert (await sync_to_async(page.get)(path)).status_code == 200
    assert (await sync_to_async(page.post)(path)).status_code == 200
    assert (await sync_to_async(page.post)(path)).status_code == 404  # once
    assert (await sync_to_async(page.post)("/connect/unknown/")).status_code == 404
    done = await client.call_tool("connect_account")
    assert done.result == {"content": [{"type": "text", "text": "Your account is connected."}]}


async def test_an_elicitation_id_stays_with_the_client_that_used_it_first():
    client = await _session()
    response, ask = await _asked(client, "open_settings_page")
    elicitation_id = ask["params"]["elicitationId"]
    other = await _session()
    taken = await executor.run(store.record_elicitation, "default", elicitation_id, other.session_id, "", "http://x/")
    assert taken is False
    assert await executor.run(store.record_elicitation, "default", elicitation_id, client.session_id, "",
                              "http://x/") is True
    row = await executor.run(lambda: Elicitation.objects.get(elicitation_id=elicitation_id))
    assert row.session_id == client.session_id and row.completed_at is None


@pytest.mark.parametrize("elicitation_id", ["", "x" * 201, "a\x00b", "line\nbreak", 7, None])
def test_complete_elicitation_of_a_malformed_id_is_false(elicitation_id):
    assert complete_elicitation(elicitation_id) is False


# 2026-07-28: no elicitationId, no notification, no -32042: input requests and retries


async def test_modern_url_elicitation_is_an_input_request_asked_until_the_page_completes_it():
    client = ModernCommunicator(application, capabilities={"elicitation": {"url": {}}})
    first = await client.call_tool("connect_account")
    assert first.result["resultType"] == "input_required"
    (key, ask), = first.result["inputRequests"].items()
    assert key == "connect" and ask["method"] == "elicitation/create"
    assert set(ask["params"]) == {"mode", "message", "url"} and ask["params"]["mode"] == "url"
    consented = await client.retry(first, {key: {"action": "accept"}})
    assert consented.result["resultType"] == "input_required"
    assert consented.result["inputRequests"] == first.result["inputRequests"]

    elicitation_id = urlsplit(ask["params"]["url"]).path.split("/")[2]
    assert await acomplete_elicitation(elicitation_id) is True
    done = await client.retry(consented, {key: {"action": "accept"}})
    assert done.result["resultType"] == "complete"
    assert done.result["content"] == [{"type": "text", "text": "Your account is connected."}]
    row = await executor.run(lambda: Elicitation.objects.get(elicitation_id=elicitation_id))
    assert row.session_id is None and row.completed_at is not None


async def test_modern_elicit_url_returns_the_answer_on_the_retry():
    client = ModernCommunicator(application, capabilities={"elicitation": {"form": {}, "url": {}}})
    first = await client.call_tool("open_settings_page")
    (key, ask), = first.result["inputRequests"].items()
    assert key == "settings" and "elicitationId" not in ask["params"]
    done = await client.retry(first, {key: {"action": "decline"}})
    assert done.result["content"][0]["text"].startswith("action=decline elicitationId=settings-")


@pytest.mark.parametrize("capabilities, required", [
    ({}, {"elicitation": {}}),
    ({"elicitation": {}}, {"elicitation": {"url": {}}}),
])
async def test_modern_without_url_mode_is_32021_naming_it(capabilities, required):
    response = await ModernCommunicator(application, capabilities=capabilities).call_tool("connect_account")
    assert response.status == 400 and response.json["error"]["code"] == -32021
    assert response.json["error"]["data"] == {"requiredCapabilities": required}


def test_prune_deletes_the_elicitations_of_2026_07_28_requests_as_old_as_an_idle_session(capsys):
    from datetime import timedelta

    old = timezone.now() - timedelta(days=2)
    session = Session.objects.create(id="kept", protocol_version="2025-11-25")
    for name, session_id, created in (("old", None, old), ("new", None, timezone.now()), ("session", "kept", old)):
        Elicitation.objects.create(key=elicitation_key("default", name), elicitation_id=name, session_id=session_id,
                                   url="https://example.com/", created_at=created)
    call_command("mcp_prune")
    assert "1 URL elicitations of 2026-07-28 requests" in capsys.readouterr().out
    assert sorted(Elicitation.objects.values_list("elicitation_id", flat=True)) == ["new", "session"]
    assert session.elicitations.count() == 1


def test_the_admin_lists_elicitations_read_only(admin_client):
    for name, done in (("waiting-one", False), ("done-one", True)):
        Elicitation.objects.create(key=elicitation_key("default", name), elicitation_id=name, principal="user:1",
                                   url=f"https://example.com/<{name}>", completed_at=timezone.now() if done else None)
    changelist = reverse("admin:mcp_transport_elicitation_changelist")
    page = admin_client.get(changelist).content.decode()
    assert "waiting-one" in page and "done-one" in page and "https://example.com/&lt;done-one&gt;" in page
    waiting = admin_client.get(changelist + "?state=waiting").content.decode()
    assert "waiting-one" in waiting and "done-one" not in waiting
    row = Elicitation.objects.get(elicitation_id="done-one")
    detail = admin_client.get(reverse("admin:mcp_transport_elicitation_change", args=[row.pk]))
    assert detail.status_code == 200 and 'name="_save"' not in detail.content.decode()
    assert admin_client.get(reverse("admin:mcp_transport_elicitation_add")).status_code == 403
    assert admin_client.post(reverse("admin:mcp_transport_elicitation_delete", args=[row.pk]),
                             {"post": "yes"}).status_code == 403
