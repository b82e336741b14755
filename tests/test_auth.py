"""Authentication backends, 401 + resource metadata, sessions owned by their principal, hidden tools."""
import asyncio
from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission, User
from django.core.asgi import get_asgi_application
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_transport import MCPServer
from mcp_transport.auth import create_token
from mcp_transport.models import AccessToken, Task
from mcp_transport.routing import mcp_application
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

secured = MCPServer("tests-auth")


@secured.tool
def public() -> str:
    """Anyone authenticated may call this."""
    return "public"


@secured.tool(permissions=["mcp_transport.view_session"])
def operators_only() -> str:
    """Needs a Django permission."""
    return "secret"


@secured.tool(allow=lambda user: user.username == "alice")
def alice_only() -> str:
    """Needs a predicate on the user."""
    return "alice"


@secured.prompt(permissions=["mcp_transport.view_session"])
def hidden_prompt() -> str:
    """A prompt for operators."""
    return "hi"


@secured.resource("test://operators", permissions=["mcp_transport.view_session"])
def hidden_resource() -> str:
    return "operators"


@secured.tool(scopes=["notes:write"])
def write_note(text: str) -> str:
    """Needs a token with the notes:write scope."""
    return f"noted: {text}"


@secured.tool(scopes=["notes:write"], task_support="required")
async def archive_notes() -> str:
    """A long job on the notes, always a task: for tokens with notes:write."""
    await asyncio.sleep(30)
    return "archived"


@secured.prompt(scopes=["notes:read"])
def summarize() -> str:
    """A prompt for tokens with notes:read."""
    return "summarize the notes"


@secured.resource("test://notes", scopes=["notes:read"])
def notes() -> str:
    return "the notes"


@secured.resource("test://notes/{id}", scopes=["notes:read"])
def note(id: str) -> str:
    return f"note {id}"


application = mcp_application(get_asgi_application(), {"/auth/mcp": secured})
BEARER = {"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"], "REQUIRE_AUTH": True,
          "AUTHORIZATION_SERVERS": ["https://login.example"], "SCOPES_SUPPORTED": ["mcp"]}


@pytest.fixture
def users():
    def make():
        alice = User.objects.create_user("alice")
        alice.user_permissions.add(Permission.objects.get(codename="view_session", content_type__app_label="mcp_transport"))
        bob = User.objects.create_user("bob")
        return {"alice": create_token(alice)[1], "bob": create_token(bob)[1]}

    return sync_to_async(make)


def client_for(token=None, communicator=MCPCommunicator):
    client = communicator(application, "/auth/mcp")
    original = client._headers

    def headers(method, extra):
        extra = dict(extra or {})
        if token:
            extra.setdefault("authorization", f"Bearer {token}")
        return original(method, extra)

    client._headers = headers
    return client


@override_settings(MCP_TRANSPORT=BEARER)
async def test_anonymous_requests_get_401_with_the_resource_metadata(users):
    await users()
    response = await client_for().send("POST", b"{}")
    assert response.status == 401 and response.json["error"]["code"] == -32600
    challenge = response.headers["www-authenticate"]
    # The scopes to ask for (SCOPES_SUPPORTED), and where the resource metadata is (RFC 9728).
    assert challenge == ('Bearer scope="mcp", '
                         'resource_metadata="http://localhost/.well-known/oauth-protected-resource/auth/mcp"')
    wrong = await client_for("mcp_nope").send("POST", b"{}")
    assert wrong.status == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]


@override_settings(MCP_TRANSPORT=BEARER)
async def test_protected_resource_metadata_document():
    metadata = MCPCommunicator(application, "/.well-known/oauth-protected-resource/auth/mcp")
    response = await metadata.send("GET")
    assert response.status == 200
    assert response.json == {"resource": "http://localhost/auth/mcp", "authorization_servers": ["https://login.example"],
                             "bearer_methods_supported": ["header"], "scopes_supported": ["mcp"]}


@override_settings(MCP_TRANSPORT=BEARER)
async def test_expired_and_revoked_tokens_are_refused(users):
    tokens = await users()

    def age(prefix, **fields):
        AccessToken.objects.filter(prefix=prefix).update(**fields)

    client = client_for(tokens["bob"])
    await client.initialize()
    await sync_to_async(age)(tokens["bob"][:12], expires_at=timezone.now() - timedelta(seconds=1))
    assert (await client.request("ping")).status == 401
    await sync_to_async(age)(tokens["bob"][:12], expires_at=None, revoked_at=timezone.now())
    assert (await client.request("ping")).status == 401


@override_settings(MCP_TRANSPORT=BEARER)
async def test_a_session_belongs_to_its_principal(users):
    tokens = await users()
    alice = client_for(tokens["alice"])
    await alice.initialize()
    call = await alice.call_tool("public")
    assert call.result["content"][0]["text"] == "public"
    stream_event = call.events[0].id
    bob = client_for(tokens["bob"])
    bob.session_id = alice.session_id
    assert (await bob.request("tools/list")).status == 404
    assert (await bob.resume(stream_event)).status == 404
    assert (await bob.delete()).status == 404
    assert (await alice.request("ping")).status == 200


@override_settings(MCP_TRANSPORT=BEARER)
async def test_tools_prompts_and_resources_are_filtered_by_permission(users):
    tokens = await users()
    alice, bob = client_for(tokens["alice"]), client_for(tokens["bob"])
    await alice.initialize()
    await bob.initialize()
    names = lambda r: {t["name"] for t in r.result["tools"]}  # noqa: E731
    assert names(await alice.request("tools/list")) == {"public", "operators_only", "alice_only"}
    assert names(await bob.request("tools/list")) == {"public"}
    hidden = await bob.call_tool("operators_only")
    assert hidden.messages[-1]["error"] == {"code": -32602, "message": "Unknown tool: operators_only"}
    assert (await alice.call_tool("operators_only")).result["content"][0]["text"] == "secret"
    assert (await bob.request("prompts/list")).result["prompts"] == []
    assert [p["name"] for p in (await alice.request("prompts/list")).result["prompts"]] == ["hidden_prompt"]
    assert (await bob.request("resources/list")).result["resources"] == []
    read = await bob.request("resources/read", {"uri": "test://operators"})
    assert read.messages[-1]["error"]["code"] == -32002


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.SessionCookieBackend"],
                                  "REQUIRE_AUTH": True})
async def test_django_login_cookie_authenticates():
    from django.test import Client

    def login():
        User.objects.create_user("carol", password="pw")
        browser = Client()
        assert browser.login(username="carol", password="pw")
        return browser.cookies["sessionid"].value

    cookie = await sync_to_async(login)()
    client = MCPCommunicator(application, "/auth/mcp")
    original = client._headers
    client._headers = lambda method, extra: original(method, {**(extra or {}), "cookie": f"sessionid={cookie}"})
    await client.initialize()
    assert (await client.call_tool("public")).result["content"][0]["text"] == "public"
    anonymous = MCPCommunicator(application, "/auth/mcp")
    assert (await anonymous.send("POST", b"{}")).status == 401


def test_token_command_creates_lists_and_revokes():
    User.objects.create_user("dave")
    out = StringIO()
    call_command("mcp_token", "create", "dave", "--name", "laptop", "--scopes", "mcp read", "--expires-days", "7",
                 stdout=out, stderr=StringIO())
    token = out.getvalue().strip()
    row = AccessToken.objects.get()
    assert token.startswith("mcp_") and row.prefix == token[:12] and row.token_hash != token
    assert row.scopes == ["mcp", "read"] and row.usable
    listing = StringIO()
    call_command("mcp_token", "list", stdout=listing)
    assert row.prefix in listing.getvalue() and token not in listing.getvalue()
    call_command("mcp_token", "revoke", row.prefix, stdout=StringIO())
    row.refresh_from_db()
    assert not row.usable


def modern_client_for(token=None):
    return client_for(token, ModernCommunicator)


@override_settings(MCP_TRANSPORT=BEARER)
async def test_2026_requests_are_authenticated_and_filtered_per_request(users):
    """No session to own: each 2026-07-28 request carries its principal; the lists it gets are
    filtered for it and marked private (another principal gets another answer)."""
    tokens = await users()
    anonymous = await modern_client_for().request("tools/list")
    assert anonymous.status == 401 and "resource_metadata=" in anonymous.headers["www-authenticate"]
    alice, bob = modern_client_for(tokens["alice"]), modern_client_for(tokens["bob"])
    names = lambda r: {t["name"] for t in r.result["tools"]}  # noqa: E731
    alice_tools, bob_tools = await alice.request("tools/list"), await bob.request("tools/list")
    assert names(alice_tools) == {"public", "operators_only", "alice_only"} and names(bob_tools) == {"public"}
    assert alice_tools.result["cacheScope"] == bob_tools.result["cacheScope"] == "private"
    assert (await bob.call_tool("operators_only")).json["error"]["code"] == -32602
    assert (await alice.call_tool("operators_only")).result["content"][0]["text"] == "secret"
    read = await bob.request("resources/read", {"uri": "test://operators"})
    assert read.json["error"]["code"] == -32602 and read.json["error"]["data"] == {"uri": "test://operators"}
    alice_read = await alice.request("resources/read", {"uri": "test://operators"})
    assert alice_read.result["cacheScope"] == "private"
    assert (await alice.discover())["cacheScope"] == "public"


SCOPED = {**BEARER, "SCOPES_SUPPORTED": ["mcp", "notes:read", "notes:write"], "CHALLENGE_SCOPES": ["mcp"]}


def scoped_tokens():
    erin = User.objects.create_user("erin")
    return {scopes: create_token(erin, scopes=scopes.split())[1]
            for scopes in ("mcp", "mcp notes:read", "mcp notes:read notes:write")}


def insufficient(response, wanted: str, method: str, missing: str):
    assert response.status == 403, response.json
    assert response.json["error"]["code"] == -32600
    assert "insufficient_scope" in response.json["error"]["message"]
    assert response.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="{wanted}", '
        'resource_metadata="http://localhost/.well-known/oauth-protected-resource/auth/mcp", '
        f'error_description="{method} needs scope {missing}"')


@pytest.mark.parametrize("communicator", [MCPCommunicator, ModernCommunicator], ids=["2025-11-25", "2026-07-28"])
@override_settings(MCP_TRANSPORT=SCOPED)
async def test_scopes_hide_and_refuse_tools_prompts_and_resources(communicator):
    """Lists show what the token's scopes reach; a use without them is 403 insufficient_scope naming
    the token's scopes and the missing ones (what to ask the user for), in both protocol eras."""
    tokens = await sync_to_async(scoped_tokens)()
    base, reader, writer = (client_for(tokens[k], communicator) for k in (
        "mcp", "mcp notes:read", "mcp notes:read notes:write"))
    for client in (base, reader, writer):
        if communicator is MCPCommunicator:
            await client.initialize()
    names = lambda r: {t["name"] for t in r.result["tools"]}  # noqa: E731
    assert "write_note" not in names(await base.request("tools/list"))
    assert "write_note" not in names(await reader.request("tools/list"))
    assert "write_note" in names(await writer.request("tools/list"))
    assert (await base.request("prompts/list")).result["prompts"] == []
    assert [p["name"] for p in (await reader.request("prompts/list")).result["prompts"]] == ["summarize"]
    assert (await base.request("resources/list")).result["resources"] == []
    assert [r["uri"] for r in (await reader.request("resources/list")).result["resources"]] == ["test://notes"]
    assert (await base.request("resources/templates/list")).result["resourceTemplates"] == []

    insufficient(await base.call_tool("write_note", {"text": "x"}), "mcp notes:write", "tools/call", "notes:write")
    insufficient(await reader.call_tool("write_note", {"text": "x"}), "mcp notes:read notes:write", "tools/call",
                 "notes:write")
    insufficient(await base.request("prompts/get", {"name": "summarize"}), "mcp notes:read", "prompts/get",
                 "notes:read")
    insufficient(await base.request("resources/read", {"uri": "test://notes/7"}), "mcp notes:read",
                 "resources/read", "notes:read")
    if communicator is MCPCommunicator:
        insufficient(await base.request("resources/subscribe", {"uri": "test://notes"}), "mcp notes:read",
                     "resources/subscribe", "notes:read")
        assert (await reader.request("resources/subscribe", {"uri": "test://notes"})).result == {}
    insufficient(await base.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "summarize"}, "argument": {"name": "x", "value": ""}}),
        "mcp notes:read", "completion/complete", "notes:read")

    assert (await writer.call_tool("write_note", {"text": "x"})).result["content"][0]["text"] == "noted: x"
    assert (await reader.request("resources/read", {"uri": "test://notes/7"})).result["contents"][0]["text"] == "note 7"
    assert (await reader.request("prompts/get", {"name": "summarize"})).result["messages"]
    # Unscoped tools need no scope at all, and a scoped token keeps reaching them.
    assert (await base.call_tool("public")).result["content"][0]["text"] == "public"


TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.mark.usefixtures("mcp_database_settled")
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@override_settings(MCP_TRANSPORT=SCOPED)
async def test_a_task_is_its_tools_a_token_without_its_scopes_does_not_see_it(era):
    """The same user's token with fewer scopes gets nothing of a task whose tool needs them: not
    its status, not its result, not in a list, no cancel (as unknown as another user's task); the
    token with them still does."""
    tokens = await sync_to_async(scoped_tokens)()
    modern = era == "2026-07-28"
    writer, reader = (client_for(tokens[k], ModernCommunicator if modern else MCPCommunicator)
                      for k in ("mcp notes:read notes:write", "mcp notes:read"))
    if modern:
        writer.capabilities = reader.capabilities = TASKS
        task_id = (await writer.call_tool("archive_notes")).result["taskId"]
    else:
        await writer.initialize()
        await reader.initialize()
        created = await writer.request("tools/call", {"name": "archive_notes", "arguments": {}, "task": {}})
        task_id = created.result["task"]["taskId"]
    methods = ["tasks/get", "tasks/cancel"] + (["tasks/update"] if modern else ["tasks/result"])
    for method in methods:
        refused = await reader.request(method, {"taskId": task_id, "inputResponses": {}})
        error = (refused.json if modern else refused.messages[-1])["error"]
        assert error == {"code": -32602, "message": f"Invalid params: unknown task {task_id!r}",
                         "data": {"taskId": task_id}}, method
    if modern:
        listen = await reader.request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}},
                                      until=lambda e: e.data and "acknowledged" in e.data, timeout=10)
        assert listen.messages[0]["params"]["notifications"] == {"taskIds": []}
    else:
        assert (await reader.request("tasks/list")).result["tasks"] == []
        assert [t["taskId"] for t in (await writer.request("tasks/list")).result["tasks"]] == [task_id]
    seen = await writer.request("tasks/get", {"taskId": task_id})
    assert seen.result["status"] == "working"
    assert (await sync_to_async(Task.objects.get)(pk=task_id)).status == "working"
    assert "error" not in (await writer.request("tasks/cancel", {"taskId": task_id})).json


@override_settings(MCP_TRANSPORT={**SCOPED, "AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend",
                                                               "mcp_transport.auth.SessionCookieBackend"],
                                  "REQUIRE_AUTH": False})
async def test_scopes_limit_tokens_not_django_logins_and_anonymous_callers_get_401():
    """A user logged in to the site (no scopes in their credentials) reaches scoped tools as on the
    rest of the site; an anonymous caller is asked to authenticate for the tool's scopes."""
    from django.test import Client

    def login():
        User.objects.create_user("frank", password="pw")
        browser = Client()
        assert browser.login(username="frank", password="pw")
        return browser.cookies["sessionid"].value

    cookie = await sync_to_async(login)()
    browser = MCPCommunicator(application, "/auth/mcp")
    original = browser._headers
    browser._headers = lambda method, extra: original(method, {**(extra or {}), "cookie": f"sessionid={cookie}"})
    await browser.initialize()
    assert "write_note" in {t["name"] for t in (await browser.request("tools/list")).result["tools"]}
    assert (await browser.call_tool("write_note", {"text": "y"})).result["content"][0]["text"] == "noted: y"

    anonymous = MCPCommunicator(application, "/auth/mcp")
    await anonymous.initialize()
    assert "write_note" not in {t["name"] for t in (await anonymous.request("tools/list")).result["tools"]}
    refused = await anonymous.call_tool("write_note", {"text": "z"})
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == (
        'Bearer scope="notes:write", '
        'resource_metadata="http://localhost/.well-known/oauth-protected-resource/auth/mcp"')


@override_settings(MCP_TRANSPORT={})
async def test_without_authentication_scopes_limit_no_one():
    client = MCPCommunicator(application, "/auth/mcp")
    await client.initialize()
    assert (await client.call_tool("write_note", {"text": "w"})).result["content"][0]["text"] == "noted: w"


def test_scope_names_are_checked_when_declared():
    for bad in ("two words", 'quo"te', "back\\slash", "", "caf\u00e9"):
        with pytest.raises(ValueError):
            secured.tool(scopes=[bad])(lambda: "x")


@override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend",
                                                     "mcp_transport.auth.SessionCookieBackend"],
                                  "REQUIRE_AUTH": True})
async def test_credentials_one_backend_refuses_are_offered_to_the_next():
    """Two backends may read the same request (this app's tokens and an OAuth server's): the first
    refusal is the answer only when no backend accepts the request."""
    from django.test import Client

    def login():
        User.objects.create_user("gina", password="pw")
        browser = Client()
        assert browser.login(username="gina", password="pw")
        return browser.cookies["sessionid"].value

    cookie = await sync_to_async(login)()
    both = client_for("mcp_not_a_token")
    original = both._headers
    both._headers = lambda method, extra: original(method, {**(extra or {}), "cookie": f"sessionid={cookie}"})
    await both.initialize()
    assert (await both.call_tool("public")).result["content"][0]["text"] == "public"
    refused = await client_for("mcp_not_a_token").send("POST", b"{}")
    assert refused.status == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert "unknown, expired or revoked token" in refused.json["error"]["message"]
