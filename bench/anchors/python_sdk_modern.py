"""Anchor for MCP 2026-07-28: the official Python MCP SDK (`mcp` 2.x, pinned in
requirements-modern.txt), served as the SDK serves Streamable HTTP itself: `MCPServer.run(
transport="streamable-http")`, i.e. its `streamable_http_app()` (Starlette) on uvicorn, one process,
SDK defaults. That one endpoint serves both eras, sorting each request by its MCP-Protocol-Version
header: 2026-07-28 to the stateless modern handler, anything else to the 2025 session transport.

    python python_sdk_modern.py --port 8123

Bound to 127.0.0.1. Runs in the modern anchor's own venv (install.sh: mcp 2.x cannot share one
with the legacy anchor's mcp 1.x), never in the project's.

Tools, the same as the example project's: echo(message) returns the message; progress(count=10,
delay=0.01) sends `count` notifications/progress to the call's _meta.progressToken, sleeping
`delay` s before each, then returns "done <count>". The modern handler answers JSON unless the tool
sends a notification first; then it answers on an SSE stream.
"""
from __future__ import annotations

import argparse
import asyncio

from mcp.server.mcpserver import Context, MCPServer


def server() -> MCPServer:
    mcp = MCPServer("bench-anchor-python-sdk-2", version="1", log_level="WARNING")

    @mcp.tool()
    async def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    @mcp.tool()
    async def progress(ctx: Context, count: int = 10, delay: float = 0.01) -> str:
        """Send `count` progress notifications `delay` seconds apart, then return "done <count>"."""
        for i in range(1, count + 1):
            if delay:
                await asyncio.sleep(delay)
            await ctx.report_progress(i, count, f"step {i}")
        return f"done {count}"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server().run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
