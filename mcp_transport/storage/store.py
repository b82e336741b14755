"""The only writer of sessions, streams and events: the functions the rest of the package calls.

Each function runs one operation of the `Store` chosen for the database connection it runs on
(`current()`): `SQLiteStore` or `PostgresStore` (storage/sql.py) where the database has what their
statements need, else the ORM's `Store` (storage/orm.py), which has every operation. Each has an
async twin (`a...`) that the database thread runs in its batches; the `Operation`s among them
tell that thread how they batch (storage/executor.py).
"""
from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Callable

from django.db import connections, transaction
from django.utils import timezone

from .. import metrics
from ..conf import mcp_settings
from ..models import Session, Stream
from .executor import batch_connection, batched, count_on_commit, database_alias, operation
from .orm import Store
from .recent import Recent
from .records import (  # noqa: F401
    MAX_ROW_ID, WORKER, NewRequestStream, PendingStream, StoredEvent, TaskView, stream_pk,
)
from .sql import PostgresStore, SQLiteStore


def implementation(db) -> type[Store]:
    """The store for a Django connection, from what its database can do: the SQL specialisations
    need INSERT ... RETURNING (and, on SQLite, JSON1); every other database takes the ORM."""
    features = db.features
    if not features.can_return_columns_from_insert:
        return Store
    if db.vendor == "postgresql":
        return PostgresStore
    if db.vendor == "sqlite" and features.supports_json_field:
        return SQLiteStore
    return Store


def _counted(instrument, amount: int):
    """Count what this transaction wrote once it commits: a batch that fails runs again, call by call."""
    if amount and metrics.on and not count_on_commit(instrument, amount):
        transaction.on_commit(partial(instrument.inc, amount), using=database_alias())


def _stored_by_opening(opened: tuple) -> tuple:
    _, priming, stored = opened
    _counted(metrics.events_stored, (priming is not None) + sum(len(events) for events in stored))
    return opened


def current() -> Store:
    """The store for this thread's connection to the store's database (on the database thread:
    its batch's connection), chosen once per DB-API connection (a reconnect chooses again)."""
    db = batch_connection() or connections[database_alias()]
    store = getattr(db, "_mcp_store", None)
    if store is None or store.raw is not db.connection:
        db.ensure_connection()
        store = db._mcp_store = implementation(db)(db)
    return store


# Sessions

def create_session(session_id, server, protocol_version, client_info, capabilities, user_id=None,
                   principal="", limit=0) -> Session | None:
    """A new session; None when `principal` already has `limit` active ones (0: no limit)."""
    return current().create_session(session_id, server, protocol_version, client_info, capabilities,
                                    user_id, principal, limit)


def get_session(session_id: str, server: str) -> Session | None:
    """The live session with that id on that server, or None (unknown, expired, terminated)."""
    return current().get_session(session_id, server)


def touch_sessions_holding(stream_ids: list[int]):
    """The sessions whose connections this worker holds were seen now (a client that only listens
    on its GET stream sends no request, yet its session is in use)."""
    current().touch_sessions_holding(stream_ids)


def terminate_session(session_id: str, server: str) -> bool:
    return current().terminate_session(session_id, server)


def set_log_level(session_id: str, level: str):
    current().set_log_level(session_id, level)


def subscribe(session_id: str, uri: str):
    current().subscribe(session_id, uri)


def unsubscribe(session_id: str, uri: str):
    current().unsubscribe(session_id, uri)


def subscribed_sessions(server: str, uri: str) -> list[str]:
    return current().subscribed_sessions(server, uri)


def active_session_ids(server: str) -> list[str]:
    return current().active_session_ids(server)


# Streams and events

def open_stream(session_id, *, method="", request_id="", tool_name="", prime=False, policy="",
                retry_ms=None, pending: PendingStream | None = None) -> tuple[int, StoredEvent | None]:
    """A new request stream, run and held by this worker, with its priming event (seq 0) if due."""
    stream_id, priming, _ = open_request_stream(session_id, method=method, request_id=request_id,
                                                tool_name=tool_name, prime=prime, policy=policy,
                                                retry_ms=retry_ms, pending=pending)
    return stream_id, priming


def _open_request_streams(calls) -> list[tuple]:
    """A run of open_request_stream calls in one batch, as one call (on PostgreSQL: one statement)."""
    opened = current().open_request_streams([NewRequestStream(*args, **kwargs) for args, kwargs in calls])
    for one in opened:
        _stored_by_opening(one)
    return opened


@operation(own_transaction=True, many=_open_request_streams)
def open_request_stream(session_id, *, method="", request_id="", tool_name="", prime=False, policy="",
                        retry_ms=None, pending: PendingStream | None = None, writes=()):
    """A new request stream, run and held by this worker, with its priming event (seq 0) if due.

    `writes`: (payloads, finish) the request made while this INSERT waited in the queue (a quick
    request's whole answer), stored with it. -> (stream id, priming event or None, events per write).
    """
    return _stored_by_opening(current().open_request_streams([NewRequestStream(
        session_id, method, request_id, tool_name, prime, policy, retry_ms, pending, writes)])[0])


def standalone_stream(session_id: str) -> tuple[int, int, bool]:
    """The session's GET stream (created with a priming event if missing) -> (id, last seq, created)."""
    found = current().standalone_stream(session_id)
    _counted(metrics.events_stored, int(found[2]))
    return found


def find_stream(session_id: str, stream_id: int) -> Stream | None:
    """A stream of that session that is still replayable (open, or finished within the retention)."""
    return current().find_stream(session_id, stream_id)


def append(stream: int | PendingStream, payloads: list[str], finish: str | None = None) -> list[StoredEvent]:
    """Store messages at the end of an open stream; `finish` (a status) ends it with the last one.

    Returns [] when the stream is no longer open (cancelled, session terminated).
    """
    events = current().append(stream, payloads, finish)
    _counted(metrics.events_stored, len(events))
    return events


def finish(stream: int | PendingStream, status: str) -> bool:
    """End an open stream without a final message (cancelled, failed without a response)."""
    return current().finish(stream, status)


@operation(own_transaction=True)
def events_after(stream_id: int, seq: int) -> tuple[list[StoredEvent], str]:
    """Every stored event after `seq`, in order, and the stream's status read with them."""
    return current().events_after(stream_id, seq)


@operation(own_transaction=True)
def resume_stream(session_id: str, stream_id: int, seq: int, orphan_error: Callable[[Stream], str]):
    """A client resuming after event `seq`: its stream and the events to replay (one statement on
    PostgreSQL). None unless the stream is this session's and still replayable; a request whose
    worker is gone is failed first with `orphan_error(stream)`.
    -> (stream, failed events, events after `seq`, status)."""
    found = current().resume_stream(session_id, stream_id, seq, orphan_error)
    if found is not None and found[1]:
        _counted(metrics.events_stored, len(found[1]))
        _counted(metrics.leases_expired.labels("request"), 1)
    return found


@operation(own_transaction=True)
def attach(stream_id: int, seq: int, policy: str, retry_ms: int | None):
    """A new GET connection holds the stream from here (one trip to the database thread).
    -> (events after `seq`, status, connection log id)."""
    return current().attach(stream_id, seq, policy, retry_ms)


@operation(own_transaction=True)
def connected(stream_id: int, resumed_from: int | None, policy: str = "", retry_ms: int | None = None) -> int:
    """A connection (resumption, or a new GET) now holds the stream here: returns its log row id."""
    return current().connected(stream_id, resumed_from, policy, retry_ms)


def disconnected(records: list[tuple[int, int | None, str, object]]):
    """Connections that ended before their stream: (stream id, log row id or None, reason, when)."""
    current().disconnected(records)


def stream_progress(stream_ids) -> dict[int, tuple[int, str]]:
    """stream id -> (last seq, status), for catching up after lost wake-ups."""
    return current().stream_progress(stream_ids)


def request_worker(session_id: str, request_key: str) -> str | None:
    """The worker running an open request of this session, if it runs on a stream."""
    return current().request_worker(session_id, request_key)


# Between workers, and their upkeep

def deliver(worker: str, session_id: str, kind: str, payload: dict):
    current().deliver(worker, session_id, kind, payload)


def take_deliveries(worker: str) -> list[tuple[str, str, dict]]:
    """What other workers left for this one: (session id, kind, payload), removed as they are read."""
    return current().take_deliveries(worker)


def heartbeat(host: str, pid: int, stopping=False):
    """This worker is alive: its row, and the leases of the requests it runs."""
    current().heartbeat(host, pid, stopping)


def peers() -> list[tuple[str, int]]:
    """The other workers alive on this database: (host, pid)."""
    return current().peers()


def fail_orphans(orphan_error: Callable[[Stream], str], stream_id: int | None = None) -> list[StoredEvent]:
    """Requests whose worker's lease ran out end with `orphan_error(stream)` (the execution layer's
    JSON-RPC error), so no client waits forever."""
    failed = current().fail_orphans(orphan_error, stream_id)
    _counted(metrics.events_stored, len(failed))
    _counted(metrics.leases_expired.labels("request"), len(failed))  # one error per stream
    return failed


def prune() -> dict:
    """Delete expired and terminated sessions, finished streams past their retention, the modern
    requests of workers that are gone, tasks past their TTL, and 2026-07-28 requests' URL
    elicitations as old as an idle session."""
    recent.finished_tasks.clear()
    recent.working_tasks.clear()
    return current().prune()


# URL-mode elicitations

def record_elicitation(server: str, elicitation_id: str, session_id: str | None, principal: str, url: str) -> bool:
    return current().record_elicitation(server, elicitation_id, session_id, principal, url)


def elicitation_completed(server: str, elicitation_id: str, principal: str) -> bool:
    return current().elicitation_completed(server, elicitation_id, principal)


def complete_elicitation(server: str, elicitation_id: str) -> tuple[bool, str | None]:
    return current().complete_elicitation(server, elicitation_id)


# Tasks. Those that are one statement run alone in their batch without a transaction around them
# (`own_transaction`): on PostgreSQL a lone task creation or poll is one round trip, not three
# (BEGIN and COMMIT), and one statement is atomic by itself on every database.

@operation(own_transaction=True)
def create_task(task_id: str, **fields):
    """A new task, running on this worker (its lease renewed by the heartbeat): durable once this returns."""
    return current().create_task(task_id, **fields)


def _get_tasks(calls) -> list:
    """A run of get_task calls in one batch (a worker's clients polling their tasks), as one call:
    one statement for all of them."""
    return current().get_tasks([_task_key(*args, **kwargs) for args, kwargs in calls])


def _task_key(task_id: str, server: str, principal: str) -> tuple[str, str, str]:
    return task_id, server, principal


@operation(own_transaction=True, many=_get_tasks)
def get_task(task_id: str, server: str, principal: str) -> TaskView | None:
    """The task if it is this principal's, else None (another's task is unknown, not forbidden)."""
    return current().get_task(task_id, server, principal)


def claim_task(task_id: str, worker: str):
    """A runner's worker holds this active task (its lease renewed from now); None when it is not active."""
    _changing(task_id)
    return current().claim_task(task_id, worker)


@operation(own_transaction=True)
def get_task_by_id(task_id: str):
    return current().get_task_by_id(task_id)


def list_tasks(server: str, principal: str, session_id: str | None, after: tuple | None, limit: int) -> list:
    """A page of the tasks one client may see (its principal's, or anonymous: its session's)."""
    return current().list_tasks(server, principal, session_id, after, limit)


def ask_task(task_id: str, requests: dict[str, dict]) -> str | None:
    _changing(task_id)
    return current().ask_task(task_id, requests)


@operation(own_transaction=True)
def task_answers(task_id: str, keys) -> tuple[str | None, dict]:
    return current().task_answers(task_id, keys)


def answer_task(task_id: str, server: str, principal: str, responses: dict):
    _changing(task_id)
    return current().answer_task(task_id, server, principal, responses)


def cancel_task(task_id: str, server: str | None, principal: str | None, message: str = ""):
    """Cancel an active task (server and principal None: whoever's it is, for an operator)."""
    _changing(task_id)
    return current().cancel_task(task_id, server, principal, message)


def finish_task(task_id: str, status: str, result: dict | None = None, error: dict | None = None,
                message: str = "") -> bool:
    _changing(task_id)
    return current().finish_task(task_id, status, result, error, message)


def add_task_events(task_id: str, items: list[tuple]) -> int:
    """Messages a task's tool sent, stored against the task: (payload, when, status text or None);
    the last status text becomes the active task's status message. Queued with
    `executor.submit_items`, a burst is one write."""
    _changing(task_id)
    return current().add_task_events(task_id, items)


def add_session_task_events(target: tuple[str, int], items: list[tuple]) -> list[StoredEvent]:
    """`add_task_events`, and the same messages at the end of the task's session's GET stream
    (`target`: task id, stream id), in one write: -> the stream's new events."""
    task_id, stream_id = target
    _changing(task_id)
    current().add_task_events(task_id, items)
    return append(stream_id, [payload for payload, _, _ in items])


def ended_tasks(task_ids: list[str]) -> list[str]:
    return current().ended_tasks(task_ids)


@operation(own_transaction=True)
def read_tasks(task_ids: list[str]) -> dict[str, TaskView]:
    """The rows of these tasks, whoever's (what this process remembers of them, checked)."""
    return {task.id: task for task in current().read_tasks(task_ids)} if task_ids else {}


def _changing(task_id: str):
    """The task's row changes: this process's memory of it goes now, and again once the change
    commits (reads begun meanwhile saw the old row)."""
    recent.working_tasks.forget(task_id)
    transaction.on_commit(partial(recent.working_tasks.forget, task_id), using=database_alias())


def fail_orphaned_tasks(error: dict, message: str) -> list[str]:
    failed = current().fail_orphaned_tasks(error, message)
    for task_id in failed:
        _changing(task_id)
    _counted(metrics.leases_expired.labels("task"), len(failed))
    return failed


# 2026-07-28 requests held open (listen streams, long calls): rows the admin shows

def open_modern(kind: str, server: str, method: str, name: str = "", request_id: str = "", principal: str = "",
                client_name: str = "", client_version: str = "", notifications: dict | None = None) -> int:
    return current().open_modern(kind, server, method, name, request_id, principal, client_name, client_version,
                                 notifications or {})


def close_modern(row_ids: list[int]):
    current().close_modern(row_ids)


def forget_orphaned_modern() -> int:
    return current().forget_orphaned_modern()


acreate_session = batched(create_session)
_get_session = batched(get_session)
_touch = batched(lambda session_id, now: current().touch_session(session_id, now))
# This process's short memory of sessions and tasks (the worker holds it).
recent = Recent(WORKER)


async def aget_session(session_id: str, server: str) -> Session | None:
    hit = recent.sessions.get(session_id, server)
    if hit is not None:
        session, touch = hit
        if touch:
            session.last_seen_at = timezone.now()
            asyncio.ensure_future(_touch(session_id, session.last_seen_at))
        return session
    session = await _get_session(session_id, server)
    if session is not None:
        recent.sessions.put(session)
    else:
        recent.sessions.forget(session_id)
    return session


def forget_session(session_id: str):
    recent.sessions.forget(session_id)


def forget_task(task_id: str):
    """Another process changed the task's row: what this one remembers of it goes."""
    recent.working_tasks.forget(task_id)


aterminate_session = batched(terminate_session)
atouch_sessions_holding = batched(touch_sessions_holding)
aset_log_level = batched(set_log_level)
asubscribe = batched(subscribe)
aunsubscribe = batched(unsubscribe)
asubscribed_sessions = batched(subscribed_sessions)
aactive_session_ids = batched(active_session_ids)
aopen_stream = batched(open_stream)
astandalone_stream = batched(standalone_stream)
aappend = batched(append)
arecord_elicitation = batched(record_elicitation)
aelicitation_completed = batched(elicitation_completed)
aevents_after = batched(events_after)
aresume_stream = batched(resume_stream)
aattach = batched(attach)
adisconnected = batched(disconnected)
_heartbeat = batched(heartbeat)
apeers = batched(peers)
afail_orphans = batched(fail_orphans)
arequest_worker = batched(request_worker)
adeliver = batched(deliver)
atake_deliveries = batched(take_deliveries)
astream_progress = batched(stream_progress)
aopen_modern = batched(open_modern)
aclose_modern = batched(close_modern)
aforget_orphaned_modern = batched(forget_orphaned_modern)
acreate_task = batched(create_task)
_get_task = batched(get_task)


async def aget_task(task_id: str, server: str, principal: str) -> TaskView | None:
    """A poll: from this process's memory when it has the task (finished, or running here), else
    from the row."""
    task = recent.finished_tasks.get(task_id) or recent.working_tasks.get(task_id)
    if task is not None:
        return task if (task.server, task.principal) == (server, principal) else None
    working, task = recent.working_tasks, None
    started = working.begin(task_id)
    try:
        task = await _get_task(task_id, server, principal)
    finally:
        working.read(task_id, started, task)
    if task is not None:
        recent.finished_tasks.put(task)
    return task


async def aheartbeat(host: str, pid: int, stopping=False):
    """`heartbeat`; the leases it renews hold for this process's memory of its tasks until a third
    of LEASE_SECONDS before they run out (another worker's clock may run ahead)."""
    started = time.monotonic()
    await _heartbeat(host, pid, stopping)
    recent.working_tasks.leased(started + float(mcp_settings.LEASE_SECONDS) * 2 / 3)


async def acheck_working_tasks():
    """Check the tasks this process answered polls of from memory since the last check against
    their rows (the heartbeat's, at each of its flushes): what changed elsewhere is forgotten."""
    working = recent.working_tasks
    seen = working.due()
    if seen:
        started = time.monotonic()
        working.checked(started, seen, await aread_tasks(list(seen)))


aask_task = batched(ask_task)
aget_task_by_id = batched(get_task_by_id)
alist_tasks = batched(list_tasks)
atask_answers = batched(task_answers)
aanswer_task = batched(answer_task)
acancel_task = batched(cancel_task)
afinish_task = batched(finish_task)
afail_orphaned_tasks = batched(fail_orphaned_tasks)
aended_tasks = batched(ended_tasks)
aread_tasks = batched(read_tasks)
