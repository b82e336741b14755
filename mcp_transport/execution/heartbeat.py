"""This process's periodic duties: its heartbeat and leases, failing orphaned requests and tasks,
stopping the work of tasks the table says ended, checking what it remembers of the tasks it runs,
and recording connections that ended before their stream (batched: one write per interval, not
per call).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket

from django.utils import timezone

from ..conf import mcp_settings
from ..storage import store
from ..wakeups.relay import Relay
from .tasks import Tasks
from . import errors

logger = logging.getLogger("mcp_transport")
FLUSH_SECONDS = 0.5


async def _row_id(log_id):
    if not isinstance(log_id, asyncio.Future):
        return log_id
    try:
        return await log_id
    except Exception:
        return None  # never written: the close gets a row of its own


class Heartbeat:
    """One per process, owned by the worker."""

    def __init__(self, relay: Relay, tasks_here: Tasks):
        self.relay = relay
        self.tasks = tasks_here
        self._task: asyncio.Task | None = None
        self._ended: list[tuple[int, int | None, str, object]] = []
        self.warned_alone = False

    def start(self):
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def disconnected(self, stream_id: int, log_id: int | asyncio.Future | None, reason: str):
        """`log_id`: the connection's log row, or the future of a write still under way."""
        self._ended.append((stream_id, log_id, reason, timezone.now()))

    async def flush(self):
        records, self._ended = self._ended, []
        if records:
            await store.adisconnected([(stream_id, await _row_id(log_id), reason, when)
                                       for stream_id, log_id, reason, when in records])

    async def beat(self):
        """One batch of the database thread (queued together, run in this order in one transaction):
        this worker's lease, its held sessions, then what dead workers left."""
        ask_peers = not self.relay.remote and not self.warned_alone
        _, peers, _, _, orphaned_tasks = await asyncio.gather(
            store.aheartbeat(socket.gethostname(), os.getpid()),
            store.apeers() if ask_peers else _nothing(),
            store.atouch_sessions_holding(list(self.relay.bus.held_streams())),
            store.aforget_orphaned_modern(),
            store.afail_orphaned_tasks(errors.TASK_LOST, "Its worker stopped before it finished"))
        if ask_peers:
            self.warn_if_not_alone(peers)
        for task_id in orphaned_tasks:
            logger.warning("Task %s failed: its worker's lease expired", task_id)
            await self.tasks.changed(task_id)
        await self.tasks.sweep()
        failed = await store.afail_orphans(errors.worker_lost)
        for stream_id in {e.stream_id for e in failed}:
            logger.warning("Stream %s failed: its worker's lease expired", stream_id)
            self.relay.publish(stream_id, [e for e in failed if e.stream_id == stream_id])

    def warn_if_not_alone(self, peers: list[tuple[str, int]]):
        """Several processes on one database (gunicorn or uvicorn `--workers`, several daphnes)
        with a channel layer that reaches this process only: what one worker tells another never
        arrives. No system check can see how many workers a server will fork; their heartbeats can."""
        if peers:
            self.warned_alone = True
            logger.warning(
                "Other MCP workers serve this database (%s) but the channel layer is in-memory, this process's "
                "alone: cancellations, answers and notifications sent through another worker, and the admin's "
                "operations, do not reach this one. Configure channels_redis in CHANNEL_LAYERS (README: "
                "Several workers, no sticky sessions).",
                ", ".join(f"{host} pid {pid}" for host, pid in peers[:5]))

    async def _run(self):
        next_beat = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self.flush()
                await store.acheck_working_tasks()
                if loop.time() >= next_beat:
                    next_beat = loop.time() + float(mcp_settings.LEASE_SECONDS) / 3
                    await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("Heartbeat failed; retrying", exc_info=True)
            await asyncio.sleep(FLUSH_SECONDS)


async def _nothing():
    return None
