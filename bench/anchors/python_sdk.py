"""Anchor: the official Python MCP SDK (`mcp` 1.x, pinned in requirements.txt), the way its own
documentation serves Streamable HTTP: a FastMCP server run with `transport="streamable-http"`
(uvicorn, one process, stateful sessions), with an event store so that SSE streams can be resumed.

    python python_sdk.py --port 8123 [--json]

`--json` is `json_response=True` (tools/call answered with JSON, no SSE stream). Bound to
127.0.0.1. Runs in the anchors' venv (install.sh), never in the project's.

Tools, the same as the example project's: echo(message) returns the message; progress(count=10,
delay=0.01) sends `count` notifications/progress to the call's _meta.progressToken, sleeping
`delay` s before each, then returns "done <count>".
"""
from __future__ import annotations

import argparse
import asyncio
import itertools

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage


class MemoryEventStore(EventStore):
    """The SDK defines the interface and ships no implementation; this one keeps every event in
    memory, in order per stream. Event ids are "<stream number>-<position>", the form the bench's
    resume check reads (ids must grow along a stream)."""

    def __init__(self) -> None:
        self.streams: dict[StreamId, tuple[int, list[tuple[EventId, JSONRPCMessage | None]]]] = {}
        self.where: dict[EventId, tuple[StreamId, int]] = {}
        self.numbers = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        if stream_id not in self.streams:
            self.streams[stream_id] = (next(self.numbers), [])
        number, events = self.streams[stream_id]
        event_id = f"{number}-{len(events)}"
        self.where[event_id] = (stream_id, len(events))
        events.append((event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = self.where.get(last_event_id)
        if found is None:
            return None
        stream_id, position = found
        for event_id, message in self.streams[stream_id][1][position + 1:]:
            if message is not None:  # a priming event has no message
                await send_callback(EventMessage(message, event_id))
        return stream_id


def server(port: int, json_response: bool) -> FastMCP:
    mcp = FastMCP("bench-anchor-python-sdk", host="127.0.0.1", port=port, log_level="WARNING",
                  json_response=json_response, event_store=MemoryEventStore())

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
    parser.add_argument("--json", action="store_true", help="json_response=True")
    args = parser.parse_args()
    server(args.port, args.json).run(transport="streamable-http")


if __name__ == "__main__":
    main()
