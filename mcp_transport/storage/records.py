"""What the store hands out and takes, whichever implementation serves it: stored events, request
streams before their row exists, and this process's name as the rows record it."""
from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
from datetime import datetime
from typing import NamedTuple

from ..eventids import format_event_id
from ..models import Event, Stream, Task

# This process, as it appears in Stream.worker and in channel-layer group names.
WORKER = f"{re.sub(r'[^A-Za-z0-9.-]', '-', socket.gethostname())[:40]}-{os.getpid()}-{secrets.token_hex(2)}"
MAX_ROW_ID = 2**63 - 1  # BigAutoField, SQLite's INTEGER

# Plain strings, as the statements bind them: a driver may adapt an Enum by its name.
OPEN = str(Stream.Status.OPEN)
REQUEST, STANDALONE = str(Stream.Kind.REQUEST), str(Stream.Kind.STANDALONE)
PRIMING, MESSAGE, FINAL = str(Event.Kind.PRIMING), str(Event.Kind.MESSAGE), str(Event.Kind.FINAL)
TASK_ACTIVE = tuple(str(status) for status in Task.ACTIVE)


class StoredEvent(NamedTuple):
    stream_id: int
    seq: int
    kind: str
    payload: str

    @property
    def event_id(self) -> str:
        return format_event_id(self.stream_id, self.seq)


class PendingStream:
    """A request stream before its row exists.

    The request's task starts first: what it writes in its first turn of the loop (a quick
    request's whole answer) waits in `early` and is stored with the stream's INSERT; once the
    INSERT is queued (`queued`), writes queue behind it on the database thread, which sets `id`.
    Store functions take it wherever they take a stream id.
    """

    __slots__ = ("id", "queued", "early", "answered")

    def __init__(self):
        self.id: int | None = None
        self.queued = False
        self.early: list[tuple[list[str], str | None, asyncio.Future]] = []
        # The connection that opened the stream sent its whole answer in its first write: no one
        # else can hold the stream yet, so its events need no wake-ups.
        self.answered = False


def stream_pk(stream: int | PendingStream) -> int:
    if isinstance(stream, int):
        return stream
    if stream.id is None:
        raise RuntimeError("the stream's INSERT failed or has not run")
    return stream.id


class NewRequestStream(NamedTuple):
    """What open_request_stream is asked for (its arguments, defaults included)."""

    session_id: str
    method: str = ""
    request_id: str = ""
    tool_name: str = ""
    prime: bool = False
    policy: str = ""
    retry_ms: int | None = None
    pending: PendingStream | None = None
    writes: tuple | list = ()


def message_kinds(count: int, finish: str | None) -> list[str]:
    """The kinds of `count` events written together: the last is final when the write ends the stream."""
    kinds = [MESSAGE] * count
    if finish and count:
        kinds[-1] = FINAL
    return kinds


def early_events(stream_id: int, writes) -> tuple[list[list[StoredEvent]], str | None]:
    """Sequence numbers for writes made before the stream existed; a finishing write ends it.
    -> (events per write, the status the stream ends with or None)."""
    stored, seq, finished = [], 0, None
    for payloads, finish in writes:
        if finished:
            stored.append([])
            continue
        kinds = message_kinds(len(payloads), finish)
        stored.append([StoredEvent(stream_id, seq + 1 + i, kinds[i], p) for i, p in enumerate(payloads)])
        seq += len(payloads)
        finished = finish
    return stored, finished


class TaskView(NamedTuple):
    """A task as a poll reads it: the columns every task method answers from, without a model
    instance (a poll is the commonest request a task gets)."""

    id: str
    server: str
    principal: str
    session_id: str | None
    status: str
    status_message: str
    result: str
    error: str
    input_requests: str
    ttl_ms: int | None
    poll_interval_ms: int
    worker: str
    tool: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None

    @property
    def pk(self) -> str:
        return self.id

    @property
    def terminal(self) -> bool:
        return self.status not in TASK_ACTIVE


# Task columns (model attribute names) in TaskView's order.
TASK_VIEW_COLUMNS = TaskView._fields
