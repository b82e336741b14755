"""Several servers on several paths; sync tools with the ORM and a blocking context; per-tool policies."""
import pytest
from django.core.asgi import get_asgi_application

from mcp_transport import MCPServer, SyncContext
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
    """Its connections close right after priming, whatever the settings say."""
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
    assert {t["name"] for t in tools} == {"count_sessions", "sync_progress", "polled"}
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
    for _ in range(5):
        if any("result" in m for m in collected):
            break
        again = await client.resume(last_id)
        collected += again.messages
        last_id = [e.id for e in again.events if e.id][-1]
    assert [m["result"] for m in collected if "result" in m] == [{"content": [{"type": "text", "text": "polled 3"}]}]
