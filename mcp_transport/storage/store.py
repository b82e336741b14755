"""The only writer of sessions, streams and events. Sync functions, each with an async twin (`a...`).

Event sequence numbers come from `Stream.last_seq`, bumped in the same transaction as the
insert: the row lock (PostgreSQL) or the database lock (SQLite) orders concurrent writers,
so sequence order is commit order and a reader never sees seq N+1 before seq N.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import socket
import time
from contextlib import nullcontext
from datetime import timedelta
from typing import Callable, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import F
from django.utils import timezone

from ..conf import mcp_settings
from ..eventids import format_event_id
from ..models import (Delivery, Event, Session, Stream, StreamConnection, Subscription, Worker, retention_cutoff,
                      hash_uri)
from . import hotsql
from .executor import batched

# This process, as it appears in Stream.worker and in channel-layer group names.
WORKER = f"{re.sub(r'[^A-Za-z0-9.-]', '-', socket.gethostname())[:40]}-{os.getpid()}-{secrets.token_hex(2)}"
TOUCH_EVERY = timedelta(seconds=30)
MAX_ROW_ID = 2**63 - 1  # BigAutoField, SQLite's INTEGER


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


def create_session(session_id, server, protocol_version, client_info, capabilities, user_id=None,
                   principal="", limit=0) -> Session | None:
    """A new session; None when `principal` already has `limit` active ones (0: no limit)."""
    client_info = client_info or {}
    if principal and limit and Session.objects.active().filter(principal=principal).count() >= limit:
        return None
    return Session.objects.create(
        id=session_id,
        server=server,
        protocol_version=protocol_version,
        client_name=str(client_info.get("name", ""))[:200],
        client_version=str(client_info.get("version", ""))[:100],
        client_capabilities=capabilities or {},
        user_id=user_id,
        principal=principal[:200],
    )


def get_session(session_id: str, server: str) -> Session | None:
    """The live session with that id on that server, or None (unknown, expired, terminated)."""
    session = Session.objects.active().filter(pk=session_id, server=server).first()
    if session is not None:
        now = timezone.now()
        if now - session.last_seen_at > TOUCH_EVERY:
            Session.objects.filter(pk=session_id).update(last_seen_at=now)
            session.last_seen_at = now
    return session


def terminate_session(session_id: str, server: str) -> bool:
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        found = Session.objects.active().filter(pk=session_id, server=server).update(terminated_at=now)
        if found:
            Stream.objects.filter(session_id=session_id, status=Stream.Status.OPEN).update(
                status=Stream.Status.CANCELLED, finished_at=now
            )
    return bool(found)


def set_log_level(session_id: str, level: str):
    Session.objects.filter(pk=session_id).update(log_level=level)


def subscribe(session_id: str, uri: str):
    Subscription.objects.get_or_create(session_id=session_id, uri_hash=hash_uri(uri), defaults={"uri": uri})


def unsubscribe(session_id: str, uri: str):
    Subscription.objects.filter(session_id=session_id, uri_hash=hash_uri(uri)).delete()


def subscribed_sessions(server: str, uri: str) -> list[str]:
    return list(
        Session.objects.active().filter(server=server, subscriptions__uri_hash=hash_uri(uri))
        .values_list("id", flat=True)
    )


def active_session_ids(server: str) -> list[str]:
    return list(Session.objects.active().filter(server=server).values_list("id", flat=True))


def _lease():
    return timezone.now() + timedelta(seconds=mcp_settings.LEASE_SECONDS)


def _atomic(db, one_statement=False):
    """The batch's transaction when there is one (the database thread's), else a new one; but
    none on PostgreSQL for a block of reads and at most one write statement: under READ COMMITTED
    a transaction gives them nothing, and BEGIN and COMMIT would be two more round trips."""
    if db.in_atomic_block or (one_statement and db.vendor == "postgresql"):
        return nullcontext()
    return transaction.atomic(savepoint=False)


def own_transaction(fn):
    """The database thread runs `fn`, when it is alone in its batch, without a transaction
    around it: `fn` opens one where it needs one."""
    fn.own_transaction = True
    return fn


def open_stream(session_id, *, method="", request_id="", tool_name="", prime=False, policy="",
                retry_ms=None, pending: PendingStream | None = None) -> tuple[int, StoredEvent | None]:
    """A new request stream, run and held by this worker, with its priming event (seq 0) if due."""
    stream_id, priming, _ = open_request_stream(session_id, method=method, request_id=request_id,
                                                tool_name=tool_name, prime=prime, policy=policy,
                                                retry_ms=retry_ms, pending=pending)
    return stream_id, priming


def _early_events(stream_id: int, writes) -> tuple[list[list[StoredEvent]], str | None]:
    """Sequence numbers for writes made before the stream existed; a finishing write ends it."""
    stored, seq, finished = [], 0, None
    for payloads, finish in writes:
        if finished:
            stored.append([])
            continue
        kinds = [hotsql.MESSAGE] * len(payloads)
        if finish and payloads:
            kinds[-1] = hotsql.FINAL
        stored.append([StoredEvent(stream_id, seq + 1 + i, kinds[i], p) for i, p in enumerate(payloads)])
        seq += len(payloads)
        finished = finish
    return stored, finished


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


@own_transaction
def open_request_stream(session_id, *, method="", request_id="", tool_name="", prime=False, policy="",
                        retry_ms=None, pending: PendingStream | None = None, writes=()):
    """A new request stream, run and held by this worker, with its priming event (seq 0) if due.

    `writes`: (payloads, finish) the request made while this INSERT waited in the queue (a quick
    request's whole answer), stored with it. -> (stream id, priming event or None, events per write).
    """
    return _open_request_streams([NewRequestStream(session_id, method, request_id, tool_name, prime, policy,
                                                   retry_ms, pending, writes)])[0]


def _open_request_streams(requests: list[NewRequestStream]) -> list[tuple]:
    """open_request_stream for several requests: on PostgreSQL one statement (one round trip)."""
    now = timezone.now()
    lease = now + timedelta(seconds=mcp_settings.LEASE_SECONDS)
    db = connections[DEFAULT_DB_ALIAS]
    sql = hotsql.hot(db)
    with _atomic(db, one_statement=sql is not None):
        for request in requests:
            if request.pending is not None:
                request.pending.id = None  # a batch rolled back and re-run: only the last INSERT counts
        if sql is None:
            results = [_open_request_stream_orm(request, now, lease) for request in requests]
        else:
            results = _open_request_streams_sql(sql, requests, now, lease)
        for request, (stream_id, _, _) in zip(requests, results):
            if request.pending is not None:
                request.pending.id = stream_id
    return results


# The database thread hands a run of open_request_stream calls in one batch to this.
open_request_stream.many = lambda calls: _open_request_streams([NewRequestStream(*a, **k) for a, k in calls])


def _open_request_streams_sql(sql: hotsql.HotSQL, requests: list[NewRequestStream], now, lease) -> list[tuple]:
    at, lease = sql.adapt_time(now), sql.adapt_time(lease)
    rows, early = [], []
    for r in requests:
        # The id is not known before the INSERT: events are numbered with 0 and re-made below.
        stored, finished = _early_events(0, r.writes)
        last = sum(len(events) for events in stored)
        events = [(0, hotsql.PRIMING, "")] if r.prime else []
        events += [(e.seq, e.kind, e.payload) for batch in stored for e in batch]
        rows.append(((
            r.session_id, hotsql.REQUEST, r.method, r.tool_name[:200], r.request_id, str(finished or hotsql.OPEN),
            last, 0, WORKER, lease, WORKER, at, r.policy[:200], r.retry_ms, at, at if last else None,
            at if finished else None,
        ), events))
        early.append(stored)
    return [
        (stream_id, StoredEvent(stream_id, 0, hotsql.PRIMING, "") if r.prime else None,
         [[StoredEvent(stream_id, e.seq, e.kind, e.payload) for e in batch] for batch in stored])
        for stream_id, r, stored in zip(sql.open_streams(rows, at), requests, early)
    ]


def _open_request_stream_orm(r: NewRequestStream, now, lease) -> tuple:
    stream = Stream.objects.create(
        session_id=r.session_id, kind=Stream.Kind.REQUEST, method=r.method, tool_name=r.tool_name[:200],
        request_id=r.request_id, worker=WORKER, lease_expires_at=lease, connected_worker=WORKER,
        connected_at=now, disconnect_policy=r.policy[:200], retry_ms=r.retry_ms, created_at=now,
    )
    stream_id = stream.id
    stored, finished = _early_events(stream_id, r.writes)
    events = [e for batch in stored for e in batch]
    if events or finished:
        Stream.objects.filter(pk=stream_id).update(
            last_seq=len(events), last_event_at=now if events else None,
            status=finished or Stream.Status.OPEN, finished_at=now if finished else None,
        )
    _insert_events(
        ([Event(stream_id=stream_id, seq=0, kind=Event.Kind.PRIMING, payload="", created_at=now)]
         if r.prime else [])
        + [Event(stream_id=stream_id, seq=e.seq, kind=e.kind, payload=e.payload, created_at=now)
           for e in events]
    )
    priming = StoredEvent(stream_id, 0, hotsql.PRIMING, "") if r.prime else None
    return stream_id, priming, stored


def standalone_stream(session_id: str) -> tuple[int, int, bool]:
    """The session's GET stream (created with a priming event if missing) -> (id, last seq, created)."""
    db = connections[DEFAULT_DB_ALIAS]
    with _atomic(db):
        sql = hotsql.hot(db)
        if sql is not None:
            found = sql.find_standalone(session_id)
            if found is not None:
                return found[0], found[1], False
            at = sql.adapt_time(timezone.now())
            stream_id = sql.open_stream((
                session_id, hotsql.STANDALONE, "", "", "", hotsql.OPEN, 0, 0, WORKER, None, "", None, "", None,
                at, None, None,
            ), [(0, hotsql.PRIMING, "")], at)
            return stream_id, 0, True
        stream = Stream.objects.filter(session_id=session_id, kind=Stream.Kind.STANDALONE).first()
        if stream is not None:
            return stream.id, stream.last_seq, False
        stream = Stream.objects.create(session_id=session_id, kind=Stream.Kind.STANDALONE, worker=WORKER)
        Event.objects.create(stream=stream, seq=0, kind=Event.Kind.PRIMING, payload="")
    return stream.id, 0, True


def find_stream(session_id: str, stream_id: int) -> Stream | None:
    """A stream of that session that is still replayable (open, or finished within the retention)."""
    streams = Stream.objects.filter(pk=stream_id, session_id=session_id)
    return streams.exclude(finished_at__lt=retention_cutoff()).first()


def append(stream: int | PendingStream, payloads: list[str], finish: str | None = None) -> list[StoredEvent]:
    """Store messages at the end of an open stream; `finish` (a status) ends it with the last one.

    Returns [] when the stream is no longer open (cancelled, session terminated).
    """
    stream_id = stream_pk(stream)
    count = len(payloads)
    kinds = [hotsql.MESSAGE] * count
    if finish:
        kinds[-1] = hotsql.FINAL
    now = timezone.now()
    db = connections[DEFAULT_DB_ALIAS]
    with _atomic(db):
        sql = hotsql.hot(db)
        if sql is not None:
            last = sql.append(stream_id, kinds, payloads, sql.adapt_time(now), finish)
            if last is None:
                return []
            return [StoredEvent(stream_id, last - count + 1 + i, kinds[i], p) for i, p in enumerate(payloads)]
        updates = {"last_seq": F("last_seq") + count, "last_event_at": now}
        if finish:
            updates.update(status=finish, finished_at=now)
        if not Stream.objects.filter(pk=stream_id, status=Stream.Status.OPEN).update(**updates):
            return []
        last = Stream.objects.filter(pk=stream_id).values_list("last_seq", flat=True).get()
        events = [StoredEvent(stream_id, last - count + 1 + i, kinds[i], p) for i, p in enumerate(payloads)]
        _insert_events([Event(stream_id=stream_id, seq=e.seq, kind=e.kind, payload=e.payload, created_at=now)
                        for e in events])
    return events


# Payload characters in one INSERT at most (the ORM path): MySQL and MariaDB refuse a statement
# above max_allowed_packet (16 MB by default), however small each event; UTF-8 takes at most 4
# bytes a character.
INSERT_CHARS = 2_000_000


def _insert_events(events: list[Event]):
    start, size = 0, 0
    for i, event in enumerate(events):
        if size and size + len(event.payload) > INSERT_CHARS:
            Event.objects.bulk_create(events[start:i])
            start, size = i, 0
        size += len(event.payload)
    Event.objects.bulk_create(events[start:])


def finish(stream: int | PendingStream, status: str) -> bool:
    """End an open stream without a final message (cancelled, failed without a response)."""
    streams = Stream.objects.filter(pk=stream_pk(stream), status=Stream.Status.OPEN)
    return bool(streams.update(status=status, finished_at=timezone.now()))


@own_transaction
def events_after(stream_id: int, seq: int) -> tuple[list[StoredEvent], str]:
    """Every stored event after `seq`, in order, and the stream's status read with them."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = hotsql.hot(db)
    with _atomic(db, one_statement=True):
        if sql is not None:
            status, rows = sql.status(stream_id), sql.events_after(stream_id, seq)
        else:
            status = Stream.objects.filter(pk=stream_id).values_list("status", flat=True).first()
            rows = list(Event.objects.filter(stream_id=stream_id, seq__gt=seq).order_by("seq")
                        .values_list("seq", "kind", "payload"))
    return [StoredEvent(stream_id, s, k, p) for s, k, p in rows], status or Stream.Status.CANCELLED


@own_transaction
def resume_stream(session_id: str, stream_id: int, seq: int, orphan_error: Callable[[Stream], str]):
    """A client resuming after event `seq`: its stream and the events to replay (one statement on
    PostgreSQL).

    The stream must be this session's and still replayable, else None. A request whose
    worker's lease ran out is failed first with `orphan_error(stream)` as its last message (so the
    client gets an error, not silence). The
    connection is recorded by `connected`, which the caller queues without waiting for it.
    -> (stream, failed events, events after `seq`, status).
    """
    if stream_id > MAX_ROW_ID or seq > MAX_ROW_ID:
        return None  # no such row or event (and a DB-API driver may refuse the number)
    db = connections[DEFAULT_DB_ALIAS]
    sql = hotsql.hot(db)
    with _atomic(db, one_statement=True):  # a failing orphan's append opens its own
        if sql is not None:
            return _replay_sql(sql, session_id, stream_id, seq, orphan_error)
        return _replay_orm(session_id, stream_id, seq, orphan_error)


def _replay_sql(sql: hotsql.HotSQL, session_id: str, stream_id: int, seq: int, orphan_error):
    now = timezone.now()
    found = sql.find_and_replay(session_id, stream_id, seq, sql.adapt_time(retention_cutoff(now)),
                                sql.adapt_time(now))
    if found is None:
        return None
    (*columns, lease_expired), rows = found
    stream = Stream(id=stream_id, session_id=session_id, **dict(zip(hotsql.FOUND_COLUMNS, columns)))
    if seq > stream.last_seq:
        return None
    failed = fail_orphans(orphan_error, stream_id) if lease_expired and stream.status == hotsql.OPEN else []
    if failed:
        rows = sql.events_after(stream_id, seq)
    events = [StoredEvent(stream_id, s, k, p) for s, k, p in rows]
    return stream, failed, events, Stream.Status.FAILED if failed else stream.status


def _replay_orm(session_id: str, stream_id: int, seq: int, orphan_error):
    stream = find_stream(session_id, stream_id)
    if stream is None or seq > stream.last_seq:
        return None
    failed = []
    if stream.status == Stream.Status.OPEN and stream.kind == Stream.Kind.REQUEST:
        failed = fail_orphans(orphan_error, stream_id)
    return stream, failed, *events_after(stream_id, seq)


@own_transaction
def attach(stream_id: int, seq: int, policy: str, retry_ms: int | None):
    """A new GET connection holds the stream from here (one trip to the database thread).
    -> (events after `seq`, status, connection log id)."""
    with _atomic(connections[DEFAULT_DB_ALIAS], one_statement=True):
        events, status = events_after(stream_id, seq)
        return events, status, connected(stream_id, None, policy, retry_ms)


def request_worker(session_id: str, request_key: str) -> str | None:
    """The worker running an open request of this session, if it runs on a stream.

    The key is compared here too: a collation may fold case (MariaDB's default matches "a" with "A")."""
    rows = (Stream.objects.filter(session_id=session_id, request_id=request_key, status=Stream.Status.OPEN)
            .order_by("-id").values_list("request_id", "worker"))
    return next((worker for key, worker in rows if key == request_key), None)


def deliver(worker: str, session_id: str, kind: str, payload: dict):
    Delivery.objects.create(worker=worker, session_id=session_id, kind=kind, payload=json.dumps(payload))


def take_deliveries(worker: str) -> list[tuple[str, str, dict]]:
    """What other workers left for this one: (session id, kind, payload), removed as they are read."""
    rows = list(Delivery.objects.filter(worker=worker).order_by("id").values_list("id", "session_id", "kind",
                                                                                  "payload")[:500])
    if rows:
        Delivery.objects.filter(pk__in=[row[0] for row in rows]).delete()
    return [(session_id, kind, json.loads(payload)) for _, session_id, kind, payload in rows]


def stream_progress(stream_ids) -> dict[int, tuple[int, str]]:
    """stream id -> (last seq, status), for catching up after lost wake-ups."""
    ids = list(stream_ids)
    sql = hotsql.hot(connections[DEFAULT_DB_ALIAS])
    if sql is not None:
        rows = sql.progress(ids)
    else:
        rows = Stream.objects.filter(pk__in=ids).values_list("id", "last_seq", "status")
    return {pk: (last, status) for pk, last, status in rows}


@own_transaction
def connected(stream_id: int, resumed_from: int | None, policy: str = "", retry_ms: int | None = None) -> int:
    """A connection (resumption, or a new GET) now holds the stream here: returns its log row id."""
    now = timezone.now()
    db = connections[DEFAULT_DB_ALIAS]
    sql = hotsql.hot(db)
    with _atomic(db, one_statement=True):
        if sql is not None:
            return sql.connect(stream_id, WORKER, resumed_from, policy[:200], retry_ms, sql.adapt_time(now))
        updates = dict(connected_worker=WORKER, connected_at=now, disconnect_policy=policy[:200], retry_ms=retry_ms)
        if resumed_from is not None:
            updates["reconnects"] = F("reconnects") + 1
        Stream.objects.filter(pk=stream_id).update(**updates)
        return StreamConnection.objects.create(
            stream_id=stream_id, worker=WORKER, opened_at=now, resumed_from=resumed_from
        ).pk


def disconnected(records: list[tuple[int, int | None, str, object]]):
    """Connections that ended before their stream: (stream id, log row id or None, reason, when)."""
    with transaction.atomic(savepoint=False):
        for stream_id, log_id, reason, when in records:
            Stream.objects.filter(pk=stream_id, connected_worker=WORKER).update(connected_worker="")
            if log_id is None:
                opened = Stream.objects.filter(pk=stream_id).values_list("created_at", flat=True).first()
                if opened is not None:
                    StreamConnection.objects.create(stream_id=stream_id, worker=WORKER, opened_at=opened,
                                                    closed_at=when, close_reason=reason)
            else:
                StreamConnection.objects.filter(pk=log_id).update(closed_at=when, close_reason=reason)


def heartbeat(host: str, pid: int, stopping=False):
    """This worker is alive: its row, and the leases of the requests it runs."""
    now = timezone.now()
    Worker.objects.update_or_create(id=WORKER, defaults=dict(host=host, pid=pid, heartbeat_at=now,
                                                            stopping=stopping))
    Stream.objects.filter(worker=WORKER, status=Stream.Status.OPEN, kind=Stream.Kind.REQUEST).update(
        lease_expires_at=_lease()
    )


def fail_orphans(orphan_error: Callable[[Stream], str], stream_id: int | None = None) -> list[StoredEvent]:
    """Requests whose worker's lease ran out end with `orphan_error(stream)` (the execution layer's
    JSON-RPC error), so no client waits forever."""
    orphans = Stream.objects.filter(
        status=Stream.Status.OPEN, kind=Stream.Kind.REQUEST, lease_expires_at__lt=timezone.now()
    )
    if stream_id is not None:
        orphans = orphans.filter(pk=stream_id)
    failed = []
    for stream in orphans[:500]:
        failed += append(stream.id, [orphan_error(stream)], finish=Stream.Status.FAILED)
    return failed


def prune() -> dict:
    """Delete expired and terminated sessions, and finished streams past their retention."""
    streams, _ = Stream.objects.expired().delete()
    sessions, _ = Session.objects.prunable().delete()
    return {"streams": streams, "sessions": sessions}


acreate_session = batched(create_session)
_get_session = batched(get_session)
_touch = batched(lambda session_id, now: Session.objects.filter(pk=session_id).update(last_seen_at=now))
# Sessions seen in the last seconds, so a burst of requests costs one lookup. A DELETE here
# forgets its session at once; other workers hear of it through the relay.
SESSION_CACHE_SECONDS = 2.0
# session id -> (cached until, next touch, session); both times on the monotonic clock.
_sessions: dict[str, tuple[float, float, Session]] = {}


async def aget_session(session_id: str, server: str) -> Session | None:
    now = time.monotonic()
    hit = _sessions.get(session_id)
    if hit is not None and hit[0] > now and hit[2].server == server:
        expires, touch_at, session = hit
        if now >= touch_at:
            session.last_seen_at = timezone.now()
            _sessions[session_id] = (expires, now + TOUCH_EVERY.total_seconds(), session)
            asyncio.ensure_future(_touch(session_id, session.last_seen_at))
        return session
    session = await _get_session(session_id, server)
    if session is not None:
        if len(_sessions) > 10000:
            for key in [k for k, (expires, _, _) in _sessions.items() if expires <= now]:
                del _sessions[key]
        age = (timezone.now() - session.last_seen_at).total_seconds()
        _sessions[session_id] = (now + SESSION_CACHE_SECONDS, now + TOUCH_EVERY.total_seconds() - age, session)
    else:
        _sessions.pop(session_id, None)
    return session


def forget_session(session_id: str):
    _sessions.pop(session_id, None)


aterminate_session = batched(terminate_session)
aset_log_level = batched(set_log_level)
asubscribe = batched(subscribe)
aunsubscribe = batched(unsubscribe)
asubscribed_sessions = batched(subscribed_sessions)
aactive_session_ids = batched(active_session_ids)
aopen_stream = batched(open_stream)
astandalone_stream = batched(standalone_stream)
aappend = batched(append)
aevents_after = batched(events_after)
aresume_stream = batched(resume_stream)
aattach = batched(attach)
adisconnected = batched(disconnected)
aheartbeat = batched(heartbeat)
afail_orphans = batched(fail_orphans)
arequest_worker = batched(request_worker)
adeliver = batched(deliver)
atake_deliveries = batched(take_deliveries)
astream_progress = batched(stream_progress)
