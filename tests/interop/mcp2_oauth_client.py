"""The official Python SDK 2.x client's OAuth (`OAuthClientProvider`) on the 2026-07-28 era.

Run with the mcp 2.x venv (tests/interop/install.sh):
    mcp2-venv/bin/python mcp2_oauth_client.py URL USERNAME PASSWORD
The user signs in on the authorization server's login page (the MCP server's origin), and the
redirect handler approves each consent form as that user. Calls echo, lists the tools, then calls
whoami (which needs a scope the first consent did not grant). Prints one JSON object.
"""
from __future__ import annotations

import json
import sys
import traceback
from importlib.metadata import version
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2 as httpx
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from oauth_parts import HiddenFields, MemoryStorage  # beside this script

REDIRECT_URI = "http://127.0.0.1:9/callback"


async def main(url: str, username: str, password: str) -> dict:
    out: dict = {"mcpVersion": version("mcp"), "consents": [], "statuses": []}
    parts = urlsplit(url)
    browser = httpx.AsyncClient(base_url=f"{parts.scheme}://{parts.netloc}", follow_redirects=False, timeout=30)
    answers: list[dict] = []

    async def redirect_handler(authorization_url: str):
        page = await browser.get(authorization_url)
        fields = HiddenFields(page.text).fields
        out["consents"].append(fields.get("scope"))
        answer = await browser.post(authorization_url, data={**fields, "allow": "Authorize"})
        answers.append({k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()})

    async def callback_handler():
        answer = answers.pop()
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    async def on_response(response):
        out["statuses"].append(response.status_code)

    try:
        async with browser:
            login = await browser.get("/accounts/login/")
            signed_in = await browser.post("/accounts/login/", data={
                **HiddenFields(login.text).fields, "username": username, "password": password, "next": "/admin/"})
            assert signed_in.status_code == 302, signed_in.text[:500]
            metadata = OAuthClientMetadata(client_name="mcp 2.x tests", redirect_uris=[REDIRECT_URI],
                                           grant_types=["authorization_code", "refresh_token"],
                                           response_types=["code"], token_endpoint_auth_method="none")
            provider = OAuthClientProvider(url, metadata, MemoryStorage(), redirect_handler, callback_handler)
            http = httpx.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [on_response]})
            async with http:
                with anyio.fail_after(120):
                    async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28",
                                      read_timeout_seconds=30, cache=None) as client:
                        out["protocolVersion"] = client.protocol_version
                        result = await client.call_tool("echo", {"message": "oauth on 2026-07-28"})
                        out["echo"] = result.content[0].text
                        out["toolsBefore"] = [tool.name for tool in (await client.list_tools()).tools]
                        result = await client.call_tool("whoami", {})
                        out["whoami"] = result.content[0].text
                        out["toolsAfter"] = [tool.name for tool in (await client.list_tools()).tools]
        out["ok"] = True
    except BaseException:  # noqa: BLE001 - report everything, including exception groups
        out["ok"] = False
        out["error"] = traceback.format_exc()
    return out


if __name__ == "__main__":
    result = anyio.run(main, *sys.argv[1:4])
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)
