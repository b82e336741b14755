"""The official Python SDK 2.x client (`mcp==2.3.0`) against our server, in its default mode.

Run with the separate venv that tests/interop/install.sh makes (mcp 2.x cannot share a venv with
the project's mcp 1.x):  $MCP_INTEROP_HOME/mcp2-venv/bin/python mcp2_client.py URL

`mcp.client.Client(url)` defaults to mode="auto": it first POSTs a session-less `server/discover`
(protocol 2026-07-28), and on a 4xx / JSON-RPC error falls back to the `initialize` handshake.
The HTTP client is the SDK's own default one, with event hooks added that record every exchange,
so the test can see the probe and how it was answered. Prints one JSON object.
"""
from __future__ import annotations

import json
import sys
import traceback
from importlib.metadata import version

import anyio
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str) -> dict:
    out: dict = {"mcpVersion": version("mcp"), "exchanges": []}
    by_request: dict[int, dict] = {}  # id(request) -> its entry (requests run concurrently)

    async def on_request(request):
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            body = None
        by_request[id(request)] = entry = {
            "method": request.method,
            "rpcMethod": body.get("method") if isinstance(body, dict) else None,
            "rpcId": body.get("id") if isinstance(body, dict) else None,
            "protocolVersionHeader": request.headers.get("mcp-protocol-version"),
            "sessionHeader": request.headers.get("mcp-session-id") is not None,
        }
        out["exchanges"].append(entry)

    async def on_response(response):
        entry = by_request.get(id(response.request))
        if entry is None:
            return
        entry["status"] = response.status_code
        entry["contentType"] = response.headers.get("content-type")
        entry["sessionIdAssigned"] = response.headers.get("mcp-session-id") is not None
        # Only small error bodies are read here (reading an SSE body would consume the stream).
        if response.status_code >= 400 and (entry["contentType"] or "").startswith("application/json"):
            await response.aread()
            try:
                entry["body"] = response.json()
            except ValueError:
                entry["body"] = response.text

    http = create_mcp_http_client()
    http.event_hooks["request"].append(on_request)
    http.event_hooks["response"].append(on_response)
    try:
        async with http:
            with anyio.fail_after(60):
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    out["mode"] = client.mode
                    out["protocolVersion"] = client.session.protocol_version
                    tools = await client.list_tools()
                    out["tools"] = [tool.name for tool in tools.tools]
                    result = await client.call_tool("echo", {"message": "hello from mcp 2.x"})
                    out["echo"] = "".join(c.text for c in result.content if getattr(c, "type", None) == "text")
                    out["echoIsError"] = bool(result.is_error) if hasattr(result, "is_error") else bool(
                        getattr(result, "isError", False))
        out["ok"] = True
    except BaseException:  # noqa: BLE001 - report everything, including exception groups
        out["ok"] = False
        out["error"] = traceback.format_exc()
    return out


if __name__ == "__main__":
    result = anyio.run(main, sys.argv[1])
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)
