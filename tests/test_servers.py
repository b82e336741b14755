"""Several servers on several paths; sync tools with the ORM and a blocking context; per-tool policies."""
import asyncio

import pytest
from django.core.asgi import get_asgi_application

from mcp_transport import Context, MCPServer, SyncContext
from mcp_transport.models import Session
from mcp_transport.routing import mcp_application
from mcp_transport.testing import MCPCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

extra = MCPServer("tests-extra", version="2.0", instructions="Only for tests.")


@extra.tool
def count_sessions() -> int:
    """A sync tool that uses the ORM from its worker thread."""
    return Session.objects.filter(server="tests-extra").count()


@extra.tool
def sync_progress(ctx: SyncContext, steps: int = 3) -> str:
    """A sync tool reporting progress through the blocking context."""
    for i in range(steps):
        ctx.report_progress(i + 1, steps)
        ctx.info(f"step {i + 1}")
    return "ok"


@extra.tool(disconnect_policy="after_priming", retry_ms=50)
async def polled(count: int = 3) -> str:
    """Its connections close right after priming, whatever the settings say (a response ready by
    then goes out with the priming event: nothing is left to poll for)."""
    await asyncio.sleep(0.2)
    return f"polled {count}"


application = mcp_application(get_asgi_application(), {"/mcp": "default", "/extra/mcp": extra})


async def test_two_servers_keep_their_sessions_apart():
    default = MCPCommunicator(application, "/mcp")
    other = MCPCommunicator(application, "/extra/mcp")
    init = await other.initialize()
    assert init["serverInfo"] == {"name": "tests-extra", "version": "2.0"}
    assert init["instructions"] == "Only for tests."
    await default.initialize()
    tools = (await other.request("tools/list")).result["tools"]
    assert {t["name"] for t in tools} == {"count_sessions", "sync_progress", "polled", "whoami"}
    other.session_id, default.session_id = default.session_id, other.session_id
    assert (await other.request("tools/list")).status == 404
    assert (await default.request("tools/list")).status == 404


async def test_sync_tool_uses_the_orm():
    client = MCPCommunicator(application, "/extra/mcp")
    await client.initialize()
    response = await client.call_tool("count_sessions")
    assert response.result["content"][0]["text"] == "1"


async def test_sync_tool_reports_progress_through_a_blocking_context():
    client = MCPCommunicator(application, "/extra/mcp")
    await client.initialize()
    response = await client.request("tools/call", {"name": "sync_progress", "arguments": {"steps": 2},
                                                   "_meta": {"progressToken": "t"}})
    methods = [m.get("method") for m in response.messages]
    assert methods == ["notifications/progress", "notifications/message"] * 2 + [None]
    assert response.result["content"][0]["text"] == "ok"


async def test_per_tool_disconnect_policy_and_retry():
    client = MCPCommunicator(application, "/extra/mcp")
    await client.initialize()
    first = await client.call_tool("polled")
    assert first.complete and first.events[0].data == "" and first.events[0].retry == 50
    assert first.body.endswith(b"retry: 50\n\n") and first.result is None
    collected = list(first.messages)
    last_id = [e.id for e in first.events if e.id][-1]
    for _ in range(50):
        if any("result" in m for m in collected):
            break
        await asyncio.sleep(0.05)
        again = await client.resume(last_id)
        collected += again.messages
        last_id = [e.id for e in again.events if e.id][-1]
    assert [m["result"] for m in collected if "result" in m] == [{"content": [{"type": "text", "text": "polled 3"}]}]


@extra.tool
async def whoami(ctx: Context) -> str:
    """The Django user of the request, as an auth middleware put it in the scope."""
    return ctx.user.username if ctx.user else "anonymous"


def with_user(app, user):
    async def middleware(scope, receive, send):
        return await app({**scope, "user": user}, receive, send)

    return middleware


async def test_context_sees_the_django_user():
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import AnonymousUser, User

    alice = await sync_to_async(User.objects.create_user)("alice")
    for user, expected in ((alice, "alice"), (AnonymousUser(), "anonymous")):
        app = mcp_application(get_asgi_application(), {"/extra/mcp": extra},
                              middleware=lambda inner, u=user: with_user(inner, u))
        client = MCPCommunicator(app, "/extra/mcp")
        await client.initialize()
        assert (await client.call_tool("whoami")).result["content"][0]["text"] == expected
