"""What a task's tool sends while it runs, stored against the task (`models.TaskEvent`).

Every task's progress and log messages are kept, whichever era and runner: the admin draws them
on the task's timeline. A 2025-11-25 task's messages also go to its session's GET stream (saying
which task they are about), in the same write. Writes are queued into the database thread's
batches, not awaited one by one: a burst of notifications is one write. A progress message is
also the task's status message while it works: what a 2026-07-28 client, which gets no
notifications about a task, sees of its progress in `tasks/get`.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Awaitable, Callable

from django.utils import timezone

from ..protocol import jsonrpc, tasks
from ..storage import store
from ..storage.executor import executor

logger = logging.getLogger("mcp_transport")

PROGRESS = "notifications/progress"
STATUS_TEXT_MAX = 1000


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def progress_text(message: dict) -> str | None:
    """A progress notification as a status message: its own message, else "3 of 10"; None for
    any other message."""
    if message.get("method") != PROGRESS:
        return None
    params = message.get("params") or {}
    text = params.get("message")
    if isinstance(text, str) and text:
        return text[:STATUS_TEXT_MAX].encode("utf-8", "replace").decode("utf-8")  # no lone surrogate
    total = params.get("total")
    progress = _number(params.get("progress"))
    return f"{progress} of {_number(total)}" if total is not None else progress


class TaskEventLog:
    """The messages one task's tool sends, queued for the database thread.

    session_stream: for a 2025-11-25 task, finds its session's GET stream (-> its id); the
    messages then carry the related-task `_meta` and are appended there too, and `stored` is
    called with (stream id, its new events) to wake the stream's readers.
    """

    # Writes (of up to 128 messages each) a tool may have queued before `send` waits for the oldest.
    MAX_QUEUED = 16

    def __init__(self, task_id: str, session_stream: Callable[[], Awaitable[int]] | None = None,
                 stored: Callable[[int, list], None] | None = None):
        self.task_id = task_id
        self.session_stream = session_stream
        self.stored = stored
        self.stream_id: int | None = None
        self.writes: deque[asyncio.Future] = deque()

    async def send(self, message: dict):
        if self.session_stream is not None:
            message = tasks.with_related(message, self.task_id)
            if self.stream_id is None:
                try:
                    self.stream_id = await self.session_stream()
                except Exception:
                    # Its session is gone (deleted, pruned): the task keeps its own record.
                    logger.warning("Task %s has no session stream to send to", self.task_id, exc_info=True)
                    self.session_stream = None
        item = (jsonrpc.dumps(message), timezone.now(), progress_text(message))
        if self.stream_id is None:
            write, new = executor.submit_items(store.add_task_events, self.task_id, [item])
        else:
            write, new = executor.submit_items(store.add_session_task_events, (self.task_id, self.stream_id), [item])
        if new:
            write.add_done_callback(self._written)
            self.writes.append(write)
        while self.writes and (self.writes[0].done() or len(self.writes) > self.MAX_QUEUED):
            try:
                await self.writes.popleft()
            except Exception:
                pass  # logged by _written

    def _written(self, write: asyncio.Future):
        if write.cancelled():
            return
        if write.exception() is not None:
            logger.warning("Messages of task %s were not stored", self.task_id, exc_info=write.exception())
        elif self.stream_id is not None and self.stored is not None:
            self.stored(self.stream_id, write.result())

    async def flush(self):
        """Wait for every write queued so far (a runner's worker, before it stores the outcome)."""
        if self.writes:
            await asyncio.gather(*self.writes, return_exceptions=True)
            self.writes.clear()
