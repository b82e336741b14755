"""OAuth end to end: the official Python client's OAuthClientProvider against the example project
as its own authorization server (django-oauth-toolkit: MCP_EXAMPLE_OAUTH=1), served by daphne.

Discovery from a 401, dynamic client registration, authorization code with PKCE approved by a
logged-in user on the real consent form, a token bound to the MCP endpoint (RFC 8707), scope
step-up on 403 insufficient_scope, and revocation in the toolkit's admin; the same flow by the
SDK 2.x client on 2026-07-28 (tests/interop/mcp2_oauth_client.py, in the mcp 2.x venv); and a
second project introspecting the first one's tokens.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import subprocess
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from .interop.oauth_parts import HiddenFields as Form, MemoryStorage
from .live import ROOT, DaphneServer, manage_oauth_server as manage, start_oauth_server
from .test_interop import mcp2_python  # noqa: F401  (fixture: the mcp 2.x venv)

# Each test migrates the toolkit's tables for its servers and walks through several consents.
pytestmark = pytest.mark.timeout(600)

USER, PASSWORD = "olga", "consent-pw-1"
REDIRECT_URI = "http://127.0.0.1:9/callback"


@pytest.fixture
def oauth_server():
    server = start_oauth_server(superuser=(USER, PASSWORD))
    yield server
    server.stop()


class Browser:
    """A user of the authorization server: signs in on its login page, then answers consent forms."""

    def __init__(self, origin: str):
        self.origin = origin
        self.http = httpx.AsyncClient(base_url=origin, follow_redirects=False, timeout=30)
        self.consents: list[dict] = []

    async def sign_in(self, username: str, password: str):
        page = await self.http.get("/accounts/login/")
        form = Form(page.text).fields
        signed_in = await self.http.post("/accounts/login/", data={
            **form, "username": username, "password": password, "next": "/admin/"})
        assert signed_in.status_code == 302 and signed_in.headers["location"] == "/admin/", signed_in.text[:500]

    async def approve(self, authorization_url: str) -> dict:
        """Open the consent page and press Authorize: the redirect's query (code, state, iss)."""
        page = await self.http.get(authorization_url)
        assert page.status_code == 200 and 'id="authorizationForm"' in page.text, page.text[:2000]
        fields = Form(page.text).fields
        self.consents.append(fields)
        answer = await self.http.post(authorization_url, data={**fields, "allow": "Authorize"})
        assert answer.status_code == 302, answer.text[:2000]
        location = answer.headers["location"]
        assert location.startswith(REDIRECT_URI), location
        return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def oauth_provider(server, browser: Browser, storage: MemoryStorage):
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    answers: list[dict] = []

    async def redirect_handler(authorization_url: str):
        answers.append(await browser.approve(authorization_url))

    async def callback_handler():
        answer = answers.pop()
        return answer["code"], answer.get("state")

    metadata = OAuthClientMetadata(client_name="mcp-transport tests", redirect_uris=[REDIRECT_URI],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none")
    return OAuthClientProvider(server.url, metadata, storage, redirect_handler, callback_handler)


async def call(server, provider, *calls):
    """Open a session through the OAuth provider, run `calls` (name, arguments), list the tools:
    (the tool names, the calls' results)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    results = []
    async with httpx.AsyncClient(auth=provider, timeout=30, follow_redirects=True) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for name, arguments in calls:
                    results.append(await session.call_tool(name, arguments))
                tools = {tool.name for tool in (await session.list_tools()).tools}
    return tools, results


def text(result) -> str:
    return result.content[0].text


async def test_the_official_client_completes_the_oauth_flow(oauth_server):
    server = oauth_server
    origin = f"http://127.0.0.1:{server.port}"
    browser = Browser(origin)
    await browser.sign_in(USER, PASSWORD)
    storage = MemoryStorage()
    provider = oauth_provider(server, browser, storage)

    # Discovery from the 401, registration, consent for the baseline scope: echo works, whoami
    # (scope profile) is not listed for this token.
    tools, (echoed,) = await call(server, provider, ("echo", {"message": "through oauth"}))
    assert text(echoed) == "through oauth"
    assert "echo" in tools and "whoami" not in tools
    assert len(browser.consents) == 1 and browser.consents[0]["scope"] == "mcp"
    assert browser.consents[0]["resource"] == server.url
    first_token = storage.tokens.access_token
    assert storage.client_info.client_id

    # whoami: 403 insufficient_scope, the client asks the user again for mcp + profile, and the call succeeds.
    tools, (me,) = await call(server, provider, ("whoami", {}))
    assert text(me) == USER and not me.isError
    assert len(browser.consents) == 2 and browser.consents[1]["scope"] == "mcp profile"
    assert storage.tokens.access_token != first_token
    assert "whoami" in tools

    async with httpx.AsyncClient(timeout=30) as http:
        async def ping(token):
            return await http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={
                "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25"})

        bound = await ping(storage.tokens.access_token)
        # Authenticated: what is wrong with this request is only that it names no session.
        assert bound.status_code == 400 and "Mcp-Session-Id" in bound.json()["error"]["message"], bound.text

        # A token of the same authorization server for another resource is refused.
        other = await authorization_code_token(browser, storage.client_info.client_id, f"{origin}/other-mcp")
        refused = await ping(other)
        assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert "not issued for this resource" in refused.json()["error"]["message"]

        # Revoked in the toolkit's admin (its revoke action): the next request is refused.
        await revoke_in_admin(server, browser, storage.tokens.access_token)
        revoked = await ping(storage.tokens.access_token)
        assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["www-authenticate"]

    # The client, holding the revoked token, is sent back through authorization by its next request.
    consents = len(browser.consents)
    _, (again,) = await call(server, provider, ("echo", {"message": "again"}))
    assert text(again) == "again"
    assert len(browser.consents) == consents + 1 and browser.consents[-1]["scope"] == "mcp"


async def authorization_code_token(browser: Browser, client_id: str, resource: str, scope="mcp profile") -> str:
    """A token by hand (authorization code with PKCE) for `resource`."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = httpx.QueryParams({"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
                               "state": "s", "code_challenge": challenge, "code_challenge_method": "S256",
                               "scope": scope, "resource": resource})
    answer = await browser.approve(f"{browser.origin}/o/authorize/?{query}")
    token = await browser.http.post("/o/token/", data={
        "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": REDIRECT_URI,
        "client_id": client_id, "code_verifier": verifier, "resource": resource})
    assert token.status_code == 200, token.text
    return token.json()["access_token"]


async def revoke_in_admin(server, browser: Browser, token: str):
    """What the toolkit's admin offers: select the token on its change list, run "Revoke selected
    access tokens". (The row is found by the token's checksum, as the toolkit looks tokens up.)"""
    checksum = hashlib.sha256(token.encode()).hexdigest()
    (pk,), = server.query("SELECT id FROM oauth2_provider_accesstoken WHERE token_checksum = ?", (checksum,))
    listing = await browser.http.get("/admin/oauth2_provider/accesstoken/")
    assert listing.status_code == 200 and f'value="{pk}"' in listing.text
    done = await browser.http.post("/admin/oauth2_provider/accesstoken/", data={
        "csrfmiddlewaretoken": Form(listing.text).fields["csrfmiddlewaretoken"], "action": "revoke_tokens",
        "_selected_action": str(pk), "index": "0"})
    assert done.status_code == 302, done.text[:1000]
    assert server.query("SELECT id FROM oauth2_provider_accesstoken WHERE id = ?", (pk,)) == []


RESOURCE_SERVER_CLIENT = ("resource-server", "resource-server-secret")


async def test_a_resource_server_introspects_the_toolkits_tokens(oauth_server):
    """A second project (daphne) with OAuthIntrospectionBackend asks the first one's introspection
    endpoint (RFC 7662) about each token, as a confidential client: tokens bound to it work as
    their user with their scopes; one bound to the first project is refused; revoked at the
    authorization server, the token is refused at the next request."""
    issuer = oauth_server
    origin = f"http://127.0.0.1:{issuer.port}"
    client_id, secret = RESOURCE_SERVER_CLIENT
    await asyncio.to_thread(manage, issuer, "shell", "-c", (
        "from oauth2_provider.models import Application; Application.objects.create(name='resource server', "
        f"client_id={client_id!r}, client_secret={secret!r}, client_type='confidential', "
        "authorization_grant_type='client-credentials')"))
    resource = await asyncio.to_thread(
        start_oauth_server, {"AUTH_BACKENDS": ["mcp_transport.oauth.OAuthIntrospectionBackend"]}, None,
        {"RESOURCE_SERVER_INTROSPECTION_URL": f"{origin}/o/introspect/",
         "RESOURCE_SERVER_INTROSPECTION_CREDENTIALS": [client_id, secret],
         "OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS": [origin]})
    try:
        browser = Browser(origin)
        await browser.sign_in(USER, PASSWORD)
        public_client = await register(browser)
        for_resource = await authorization_code_token(browser, public_client, resource.url, scope="mcp")
        for_issuer = await authorization_code_token(browser, public_client, issuer.url, scope="mcp profile")
        async with httpx.AsyncClient(timeout=30) as http:
            metadata = (await http.get(f"http://127.0.0.1:{resource.port}/.well-known/oauth-protected-resource/mcp")).json()
            assert metadata["authorization_servers"] == [origin]
            client = ModernClient(http, resource.url)
            assert "whoami" not in await client.tool_names(for_resource)
            step_up = await client.call(for_resource, "whoami")
            assert step_up.status_code == 403 and 'scope="mcp profile"' in step_up.headers["www-authenticate"]
            assert (await client.call(for_resource, "echo", {"message": "remote"})).json()["result"]["content"][0][
                "text"] == "remote"
            other = await client.call(for_issuer, "echo", {"message": "x"})
            assert other.status_code == 401 and "not issued for this resource" in other.json()["error"]["message"]

            revoke = await http.post(f"{origin}/o/revoke_token/", data={"token": for_resource,
                                                                        "client_id": public_client})
            assert revoke.status_code == 200, revoke.text
            revoked = await client.call(for_resource, "echo", {"message": "again"})
            assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["www-authenticate"]
    finally:
        resource.stop()


class ModernClient:
    """2026-07-28 requests with a bearer token (no session: each request stands alone)."""

    def __init__(self, http: httpx.AsyncClient, url: str):
        self.http, self.url = http, url

    async def post(self, token: str, method: str, params: dict, name: str | None = None) -> httpx.Response:
        params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {}}}
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        return await self.http.post(self.url, headers=headers,
                                    json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})

    async def tool_names(self, token: str) -> set[str]:
        answer = await self.post(token, "tools/list", {})
        assert answer.status_code == 200, answer.text
        return {tool["name"] for tool in answer.json()["result"]["tools"]}

    async def call(self, token: str, name: str, arguments: dict | None = None) -> httpx.Response:
        return await self.post(token, "tools/call", {"name": name, "arguments": arguments or {}}, name)


async def register(browser: Browser) -> str:
    """A public client, registered as an MCP client does (RFC 7591): its client_id."""
    answer = await browser.http.post("/o/register/", json={
        "client_name": "by hand", "redirect_uris": [REDIRECT_URI], "grant_types": ["authorization_code"],
        "response_types": ["code"], "token_endpoint_auth_method": "none"})
    assert answer.status_code == 201, answer.text
    return answer.json()["client_id"]


def test_the_sdk_2x_client_completes_the_oauth_flow_on_2026_07_28(oauth_server, mcp2_python):
    """mcp 2.x, pinned to 2026-07-28 (no sessions: every request carries the token): discovery from
    the 401, registration, consent for mcp, then a step-up to profile for whoami."""
    proc = subprocess.run([mcp2_python, str(ROOT / "tests" / "interop" / "mcp2_oauth_client.py"), oauth_server.url,
                           USER, PASSWORD], capture_output=True, text=True, timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    assert out.get("ok"), out.get("error") or proc.stderr[-3000:]
    assert out["protocolVersion"] == "2026-07-28" and out["echo"] == "oauth on 2026-07-28"
    assert "whoami" not in out["toolsBefore"] and "whoami" in out["toolsAfter"] and out["whoami"] == USER
    assert out["consents"] == ["mcp", "mcp profile"]
    assert 401 in out["statuses"] and 403 in out["statuses"]
