"""The official Python SDK 2.x client (`mcp==2.3.0`) against our server, in one of its modes.

Run with the separate venv that tests/interop/install.sh makes (mcp 2.x cannot share a venv with
the project's mcp 1.x):  $MCP_INTEROP_HOME/mcp2-venv/bin/python mcp2_client.py URL [MODE]

MODE is the SDK's own `mode`: "auto" (the default: one session-less `server/discover`, then the
2026-07-28 era if the server offers it, else the `initialize` handshake), "2026-07-28" (pinned,
no probe) or "legacy". In both modern modes it drives what a 2026-07-28 client does: tools,
progress, an elicitation answered through an input_required result, a resource, a prompt, and a
`subscriptions/listen` stream that receives a tools list change made by another request.
The HTTP client is the SDK's own, with event hooks that record every exchange. Prints one JSON object.
"""
from __future__ import annotations

import json
import sys
import traceback
from importlib.metadata import version

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, mode: str) -> dict:
    out: dict = {"mcpVersion": version("mcp"), "exchanges": [], "elicited": [], "progress": [], "logs": []}
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
        if response.status_code >= 400 and (entry["contentType"] or "").startswith("application/json"):
            await response.aread()
            try:
                entry["body"] = response.json()
            except ValueError:
                entry["body"] = response.text

    async def on_elicit(ctx, params):
        out["elicited"].append(params.message)
        props = (getattr(params, "requested_schema", None) or {}).get("properties", {})
        return types.ElicitResult(action="accept", content={k: f"{k}-value" for k in props})

    async def on_log(params):
        out["logs"].append(params.data)

    async def on_progress(progress, total, message):
        out["progress"].append([progress, total, message])

    http = create_mcp_http_client()
    http.event_hooks["request"].append(on_request)
    http.event_hooks["response"].append(on_response)
    try:
        async with http:
            with anyio.fail_after(60):
                async with Client(streamable_http_client(url, http_client=http), mode=mode,
                                  elicitation_callback=on_elicit, logging_callback=on_log, log_level="info",
                                  read_timeout_seconds=30, cache=None) as client:
                    out["mode"] = client.mode
                    out["protocolVersion"] = client.protocol_version
                    out["serverInfo"] = client.server_info.model_dump() if client.server_info else None
                    tools = await client.list_tools()
                    out["tools"] = [tool.name for tool in tools.tools]
                    result = await client.call_tool("echo", {"message": "hello from mcp 2.x"})
                    out["echo"] = "".join(c.text for c in result.content if getattr(c, "type", None) == "text")
                    out["echoIsError"] = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
                    result = await client.call_tool("progress", {"count": 3, "delay": 0.01},
                                                    progress_callback=on_progress)
                    out["progressResult"] = result.content[0].text
                    result = await client.call_tool("test_tool_with_logging", {})
                    result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
                    out["elicitResult"] = result.content[0].text
                    result = await client.read_resource("test://static-text")
                    out["resource"] = result.contents[0].text
                    result = await client.get_prompt("test_simple_prompt")
                    out["prompt"] = result.messages[0].content.text
                    if client.protocol_version != "2025-11-25" and mode != "legacy":
                        async with client.listen(tools_list_changed=True) as sub:
                            out["honored"] = sub.honored.model_dump(by_alias=True, exclude_none=True)
                            await client.call_tool("test_trigger_tool_change", {})
                            async for event in sub:
                                out["event"] = type(event).__name__
                                if isinstance(event, ToolsListChanged):
                                    break
        out["ok"] = True
    except BaseException:  # noqa: BLE001 - report everything, including exception groups
        out["ok"] = False
        out["error"] = traceback.format_exc()
    return out


if __name__ == "__main__":
    result = anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "auto")
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)
