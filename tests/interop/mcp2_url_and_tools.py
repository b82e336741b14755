"""The official Python SDK 2.x client (`mcp==2.3.0`): URL-mode elicitation and sampling with tools.

Run with the venv that tests/interop/install.sh makes:
    $MCP_INTEROP_HOME/mcp2-venv/bin/python mcp2_url_and_tools.py URL MODE

MODE is the SDK's `mode` ("2026-07-28" or "legacy"). The client declares URL elicitation (the
SDK does with an elicitation callback) and sampling tools. Its URL callback does what a user's
browser would on the example's page (open it, press Done) before it accepts, so `connect_account`
completes: on 2026-07-28 through input_required rounds the SDK drives itself, on a session after
the -32042 error it gets first. `weather_agent` runs the sampling tool loop. Prints one JSON object.
"""
from __future__ import annotations

import json
import re
import sys
import traceback

import anyio
import httpx2 as httpx
import mcp_types as types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def press_done(url: str) -> int:
    async with httpx.AsyncClient(timeout=30) as browser:
        page = await browser.get(url)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return (await browser.post(url, data={"csrfmiddlewaretoken": token})).status_code


async def main(url: str, mode: str) -> dict:
    out: dict = {"urls": [], "pages": [], "sampled": [], "completed": []}

    async def on_elicit(ctx, params):
        out["urls"].append({"mode": params.mode, "url": params.url,
                            "elicitationId": getattr(params, "elicitation_id", None)})
        out["pages"].append(await press_done(params.url))
        return types.ElicitResult(action="accept")

    async def on_sample(ctx, params):
        out["sampled"].append({"tools": [t.name for t in params.tools or []],
                               "roles": [m.role for m in params.messages]})
        if len(out["sampled"]) == 1:
            return types.CreateMessageResultWithTools(
                role="assistant", model="mcp2", stop_reason="toolUse",
                content=[types.ToolUseContent(id="call-1", name="get_weather", input={"city": "Oslo"})])
        blocks = params.messages[-1].content
        result = (blocks if isinstance(blocks, list) else [blocks])[0]
        out["toolResult"] = {"toolUseId": result.tool_use_id, "text": result.content[0].text}
        return types.CreateMessageResult(role="assistant", model="mcp2", stop_reason="endTurn",
                                         content=types.TextContent(text=f"Oslo: {result.content[0].text}"))

    async def on_message(message):
        if isinstance(message, types.ElicitCompleteNotification):
            out["completed"].append(message.params.elicitation_id)

    http = create_mcp_http_client()
    async with http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), mode=mode,
                              elicitation_callback=on_elicit, sampling_callback=on_sample,
                              sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()),
                              message_handler=on_message, read_timeout_seconds=30, cache=None) as client:
                out["protocolVersion"] = client.protocol_version
                result = await client.call_tool("weather_agent", {"question": "Weather in Oslo?"})
                out["weather"] = "".join(c.text for c in result.content if c.type == "text")
                try:
                    result = await client.call_tool("connect_account", {})
                except Exception as exc:  # a session answers -32042 first; the page is opened, then retried
                    out["firstConnect"] = {"type": type(exc).__name__, "code": getattr(getattr(exc, "error", None),
                                                                                       "code", None)}
                    data = exc.error.data["elicitations"][0]
                    out["urls"].append({"mode": data["mode"], "url": data["url"],
                                        "elicitationId": data["elicitationId"]})
                    out["pages"].append(await press_done(data["url"]))
                    with anyio.fail_after(20):
                        while data["elicitationId"] not in out["completed"]:
                            await anyio.sleep(0.05)
                    result = await client.call_tool("connect_account", {})
                out["connect"] = "".join(c.text for c in result.content if c.type == "text")
    return out


if __name__ == "__main__":
    target, pinned = sys.argv[1], sys.argv[2]
    try:
        report = {"ok": True, **anyio.run(main, target, pinned)}
    except BaseException as exc:  # noqa: BLE001  (the report says what failed)
        report = {"ok": False, "error": "".join(traceback.format_exception(exc))[-4000:]}
    print(json.dumps(report))
