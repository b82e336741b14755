"""Is this worker fit to serve? Its database answers, and its channel layer carries a message."""
from __future__ import annotations

import asyncio
import time

from channels.layers import InMemoryChannelLayer, get_channel_layer

from ..storage import store
from .worker import worker

TIMEOUT_SECONDS = 2.0


def _database() -> None:
    store.current().db.cursor().execute("SELECT 1")


async def check() -> dict:
    """-> {"ok": bool, "database": {...}, "channel_layer": {...}, "worker": id}, each with its time."""
    report = {"worker": worker.id, "database": await _timed(worker.executor.run(_database)),
              "channel_layer": await _timed(_layer_round_trip())}
    report["ok"] = all(part["ok"] for part in (report["database"], report["channel_layer"]))
    return report


async def _layer_round_trip():
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    channel = await layer.new_channel(prefix="mcp-health")
    await layer.send(channel, {"type": "mcp.health"})
    await layer.receive(channel)
    return "in-memory (one process)" if isinstance(layer, InMemoryChannelLayer) else type(layer).__name__


async def _timed(operation) -> dict:
    started = time.monotonic()
    try:
        detail = await asyncio.wait_for(operation, TIMEOUT_SECONDS)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300],
                "ms": round((time.monotonic() - started) * 1000, 1)}
    result = {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}
    if detail:
        result["detail"] = detail
    return result
