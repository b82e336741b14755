"""The store's interface, implemented with Django's ORM: what any database Django supports runs.

`Store` holds every operation. `storage/sql.py` specialises the hot ones (the statements every
request runs) for SQLite and PostgreSQL; `storage/store.py` chooses the implementation once per
database connection and is what the rest of the package calls.

Event sequence numbers come from `Stream.last_seq`, bumped in the same transaction as the
insert: the row lock (PostgreSQL) or the database lock (SQLite) orders concurrent writers,
so sequence order is commit order and a reader never sees seq N+1 before seq N.
"""
from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Callable

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from ..conf import mcp_settings
from ..models import (Delivery, Elicitation, Event, ModernRequest, Session, Stream, StreamConnection, Subscription,
                      Task, TaskEvent, Worker, elicitation_key, hash_uri, retention_cutoff)
from .records import (
    MAX_ROW_ID, PRIMING, TASK_VIEW_COLUMNS, WORKER, NewRequestStream, PendingStream, StoredEvent, TaskView,
    early_events, message_kinds, stream_pk,
)

TOUCH_EVERY = timedelta(seconds=30)
NO_TRANSACTION = nullcontext()
# Payload characters in one INSERT at most: MySQL and MariaDB refuse a statement above
# max_allowed_packet (16 MB by default), however small each event; UTF-8 takes at most 4 bytes
# a character.
INSERT_CHARS = 2_000_000


def _json(value) -> str:
    """JSON as text every database stores: ASCII (a NUL is the six characters \\u0000)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)


def _status(status: str, message: str) -> dict:
    """A task's status change as its event stores it."""
    return {"status": status, "statusMessage": message} if message else {"status": status}


def _storable(text, max_length: int | None = None) -> str:
    """Client-given text as every database stores it: no NUL (PostgreSQL refuses it), cut to the column."""
    text = text if isinstance(text, str) else ""
    text = text.replace("\x00", "\ufffd")
    return text[:max_length] if max_length else text


class Store:
    """Every store operation, on one Django database connection (`db`: the alias that
    `router.db_for_write(Stream)` names, where every table of the store lives)."""

    def __init__(self, db):
        self.db = db
        self.alias = db.alias
        # The DB-API connection this store was chosen for: a reconnect chooses again.
        self.raw = db.connection

    def rows(self, model):
        """`model`'s rows on this store's database (not wherever the router sends reads: a replica
        may lag the writes a replay must see)."""
        return model._default_manager.using(self.alias)

    def atomic(self, one_statement=False):
        """The batch's transaction when there is one (the database thread's), else a new one.
        `one_statement`: the block is reads and at most one write statement, which needs no
        transaction where the database runs it atomically by itself (PostgresStore)."""
        if self.db.in_atomic_block:
            return NO_TRANSACTION
        return transaction.atomic(using=self.alias, savepoint=False)

    # Sessions

    def create_session(self, session_id, server, protocol_version, client_info, capabilities, user_id=None,
                       principal="", limit=0) -> Session | None:
        """A new session; None when `principal` already has `limit` active ones (0: no limit)."""
        client_info = client_info or {}
        sessions = self.rows(Session)
        if principal and limit and sessions.active().filter(principal=principal).count() >= limit:
            return None
        return sessions.create(
            id=session_id,
            server=server,
            protocol_version=protocol_version,
            client_name=str(client_info.get("name", ""))[:200],
            client_version=str(client_info.get("version", ""))[:100],
            client_capabilities=capabilities or {},
            user_id=user_id,
            principal=principal[:200],
        )

    def get_session(self, session_id: str, server: str) -> Session | None:
        """The live session with that id on that server, or None (unknown, expired, terminated)."""
        session = self.rows(Session).active().filter(pk=session_id, server=server).first()
        if session is not None:
            now = timezone.now()
            if now - session.last_seen_at > TOUCH_EVERY:
                self.touch_session(session_id, now)
                session.last_seen_at = now
        return session

    def touch_session(self, session_id: str, now):
        self.rows(Session).filter(pk=session_id).update(last_seen_at=now)

    def touch_sessions_holding(self, stream_ids: list[int]):
        """A session whose client holds a connection is in use, even with no request for hours."""
        if stream_ids:
            holding = self.rows(Stream).filter(pk__in=stream_ids).values("session_id")
            self.rows(Session).filter(pk__in=holding, terminated_at__isnull=True).update(last_seen_at=timezone.now())

    def terminate_session(self, session_id: str, server: str) -> bool:
        now = timezone.now()
        with transaction.atomic(using=self.alias, savepoint=False):
            found = self.rows(Session).active().filter(pk=session_id, server=server).update(terminated_at=now)
            if found:
                self.rows(Stream).filter(session_id=session_id, status=Stream.Status.OPEN).update(
                    status=Stream.Status.CANCELLED, finished_at=now
                )
        return bool(found)

    def set_log_level(self, session_id: str, level: str):
        self.rows(Session).filter(pk=session_id).update(log_level=level)

    def subscribe(self, session_id: str, uri: str):
        self.rows(Subscription).get_or_create(session_id=session_id, uri_hash=hash_uri(uri), defaults={"uri": uri})

    def unsubscribe(self, session_id: str, uri: str):
        self.rows(Subscription).filter(session_id=session_id, uri_hash=hash_uri(uri)).delete()

    def subscribed_sessions(self, server: str, uri: str) -> list[str]:
        return list(self.rows(Session).active().filter(server=server, subscriptions__uri_hash=hash_uri(uri))
                    .values_list("id", flat=True))

    def active_session_ids(self, server: str) -> list[str]:
        return list(self.rows(Session).active().filter(server=server).values_list("id", flat=True))

    # Streams and events: the hot operations first (SQLiteStore and PostgresStore replace them)

    def open_request_streams(self, requests: list[NewRequestStream]) -> list[tuple]:
        """open_request_stream for each request, in order: -> [(stream id, priming event or None,
        events per early write)]. Sets each request's PendingStream id."""
        now = timezone.now()
        lease = now + timedelta(seconds=mcp_settings.LEASE_SECONDS)
        with self.atomic(one_statement=True):
            for request in requests:
                if request.pending is not None:
                    request.pending.id = None  # a batch rolled back and re-run: only the last INSERT counts
            results = self.insert_request_streams(requests, now, lease)
            for request, (stream_id, _, _) in zip(requests, results):
                if request.pending is not None:
                    request.pending.id = stream_id
        return results

    def insert_request_streams(self, requests: list[NewRequestStream], now, lease) -> list[tuple]:
        """The rows of open_request_streams: one statement per implementation where it can."""
        return [self._insert_request_stream(request, now, lease) for request in requests]

    def _insert_request_stream(self, r: NewRequestStream, now, lease) -> tuple:
        stream = self.rows(Stream).create(
            session_id=r.session_id, kind=Stream.Kind.REQUEST, method=r.method, tool_name=r.tool_name[:200],
            request_id=r.request_id, worker=WORKER, lease_expires_at=lease, connected_worker=WORKER,
            connected_at=now, disconnect_policy=r.policy[:200], retry_ms=r.retry_ms, created_at=now,
        )
        stream_id = stream.id
        stored, finished = early_events(stream_id, r.writes)
        events = [e for batch in stored for e in batch]
        if events or finished:
            self.rows(Stream).filter(pk=stream_id).update(
                last_seq=len(events), last_event_at=now if events else None,
                status=finished or Stream.Status.OPEN, finished_at=now if finished else None,
            )
        self.insert_events(
            ([Event(stream_id=stream_id, seq=0, kind=Event.Kind.PRIMING, payload="", created_at=now)]
             if r.prime else [])
            + [Event(stream_id=stream_id, seq=e.seq, kind=e.kind, payload=e.payload, created_at=now)
               for e in events]
        )
        priming = StoredEvent(stream_id, 0, PRIMING, "") if r.prime else None
        return stream_id, priming, stored

    def standalone_stream(self, session_id: str) -> tuple[int, int, bool]:
        """The session's GET stream (created with a priming event if missing) -> (id, last seq, created)."""
        with self.atomic():
            stream = self.rows(Stream).filter(session_id=session_id, kind=Stream.Kind.STANDALONE).first()
            if stream is not None:
                return stream.id, stream.last_seq, False
            stream = self.rows(Stream).create(session_id=session_id, kind=Stream.Kind.STANDALONE, worker=WORKER)
            self.rows(Event).create(stream=stream, seq=0, kind=Event.Kind.PRIMING, payload="")
        return stream.id, 0, True

    def append(self, stream: int | PendingStream, payloads: list[str], finish: str | None = None) -> list[StoredEvent]:
        """Store messages at the end of an open stream; `finish` (a status) ends it with the last one.

        Returns [] when the stream is no longer open (cancelled, session terminated).
        """
        stream_id = stream_pk(stream)
        count = len(payloads)
        kinds = message_kinds(count, finish)
        now = timezone.now()
        with self.atomic():
            updates = {"last_seq": F("last_seq") + count, "last_event_at": now}
            if finish:
                updates.update(status=finish, finished_at=now)
            if not self.rows(Stream).filter(pk=stream_id, status=Stream.Status.OPEN).update(**updates):
                return []
            last = self.rows(Stream).filter(pk=stream_id).values_list("last_seq", flat=True).get()
            events = [StoredEvent(stream_id, last - count + 1 + i, kinds[i], p) for i, p in enumerate(payloads)]
            self.insert_events([Event(stream_id=stream_id, seq=e.seq, kind=e.kind, payload=e.payload,
                                      created_at=now) for e in events])
        return events

    def insert_events(self, events: list[Event]):
        """In statements of at most INSERT_CHARS payload characters."""
        start, size = 0, 0
        for i, event in enumerate(events):
            if size and size + len(event.payload) > INSERT_CHARS:
                self.rows(Event).bulk_create(events[start:i])
                start, size = i, 0
            size += len(event.payload)
        self.rows(Event).bulk_create(events[start:])

    def events_after(self, stream_id: int, seq: int) -> tuple[list[StoredEvent], str]:
        """Every stored event after `seq`, in order, and the stream's status read with them."""
        with self.atomic(one_statement=True):
            status = self.rows(Stream).filter(pk=stream_id).values_list("status", flat=True).first()
            rows = list(self.rows(Event).filter(stream_id=stream_id, seq__gt=seq).order_by("seq")
                        .values_list("seq", "kind", "payload"))
        return [StoredEvent(stream_id, s, k, p) for s, k, p in rows], status or Stream.Status.CANCELLED

    def resume_stream(self, session_id: str, stream_id: int, seq: int, orphan_error: Callable[[Stream], str]):
        """A client resuming after event `seq`: its stream and the events to replay.

        The stream must be this session's and still replayable, else None. A request whose
        worker's lease ran out is failed first with `orphan_error(stream)` as its last message (so
        the client gets an error, not silence). The connection is recorded by `connected`, which
        the caller queues without waiting for it.
        -> (stream, failed events, events after `seq`, status).
        """
        if stream_id > MAX_ROW_ID or seq > MAX_ROW_ID:
            return None  # no such row or event (and a DB-API driver may refuse the number)
        with self.atomic(one_statement=True):  # a failing orphan's append opens its own
            return self.replay(session_id, stream_id, seq, orphan_error)

    def replay(self, session_id: str, stream_id: int, seq: int, orphan_error):
        """resume_stream's reads, in its transaction (if any)."""
        stream = self.find_stream(session_id, stream_id)
        if stream is None or seq > stream.last_seq:
            return None
        failed = []
        if stream.status == Stream.Status.OPEN and stream.kind == Stream.Kind.REQUEST:
            failed = self.fail_orphans(orphan_error, stream_id)
        return stream, failed, *self.events_after(stream_id, seq)

    def stream_progress(self, stream_ids) -> dict[int, tuple[int, str]]:
        """stream id -> (last seq, status), for catching up after lost wake-ups."""
        rows = self.rows(Stream).filter(pk__in=list(stream_ids)).values_list("id", "last_seq", "status")
        return {pk: (last, status) for pk, last, status in rows}

    def connected(self, stream_id: int, resumed_from: int | None, policy: str = "", retry_ms: int | None = None) -> int:
        """A connection (resumption, or a new GET) now holds the stream here: returns its log row id."""
        now = timezone.now()
        with self.atomic(one_statement=True):
            updates = dict(connected_worker=WORKER, connected_at=now, disconnect_policy=policy[:200],
                           retry_ms=retry_ms)
            if resumed_from is not None:
                updates["reconnects"] = F("reconnects") + 1
            self.rows(Stream).filter(pk=stream_id).update(**updates)
            return self.rows(StreamConnection).create(
                stream_id=stream_id, worker=WORKER, opened_at=now, resumed_from=resumed_from
            ).pk

    # Built on the hot operations, the same everywhere

    def attach(self, stream_id: int, seq: int, policy: str, retry_ms: int | None):
        """A new GET connection holds the stream from here (one trip to the database thread).
        -> (events after `seq`, status, connection log id)."""
        with self.atomic(one_statement=True):
            events, status = self.events_after(stream_id, seq)
            return events, status, self.connected(stream_id, None, policy, retry_ms)

    def fail_orphans(self, orphan_error: Callable[[Stream], str], stream_id: int | None = None) -> list[StoredEvent]:
        """Requests whose worker's lease ran out end with `orphan_error(stream)` (the execution layer's
        JSON-RPC error), so no client waits forever."""
        orphans = self.rows(Stream).filter(
            status=Stream.Status.OPEN, kind=Stream.Kind.REQUEST, lease_expires_at__lt=timezone.now()
        )
        if stream_id is not None:
            orphans = orphans.filter(pk=stream_id)
        failed = []
        for stream in orphans[:500]:
            failed += self.append(stream.id, [orphan_error(stream)], finish=Stream.Status.FAILED)
        return failed

    # The rest: the ORM everywhere

    def find_stream(self, session_id: str, stream_id: int) -> Stream | None:
        """A stream of that session that is still replayable (open, or finished within the retention)."""
        streams = self.rows(Stream).filter(pk=stream_id, session_id=session_id)
        return streams.exclude(finished_at__lt=retention_cutoff()).first()

    def finish(self, stream: int | PendingStream, status: str) -> bool:
        """End an open stream without a final message (cancelled, failed without a response)."""
        streams = self.rows(Stream).filter(pk=stream_pk(stream), status=Stream.Status.OPEN)
        return bool(streams.update(status=status, finished_at=timezone.now()))

    def request_worker(self, session_id: str, request_key: str) -> str | None:
        """The worker running an open request of this session, if it runs on a stream.

        The key is compared here too: a collation may fold case (MariaDB's default matches "a" with "A")."""
        rows = (self.rows(Stream).filter(session_id=session_id, request_id=request_key, status=Stream.Status.OPEN)
                .order_by("-id").values_list("request_id", "worker"))
        return next((worker for key, worker in rows if key == request_key), None)

    def deliver(self, worker: str, session_id: str, kind: str, payload: dict):
        self.rows(Delivery).create(worker=worker, session_id=session_id, kind=kind, payload=json.dumps(payload))

    def take_deliveries(self, worker: str) -> list[tuple[str, str, dict]]:
        """What other workers left for this one: (session id, kind, payload), removed as they are read."""
        deliveries = self.rows(Delivery)
        rows = list(deliveries.filter(worker=worker).order_by("id")
                    .values_list("id", "session_id", "kind", "payload")[:500])
        if rows:
            deliveries.filter(pk__in=[row[0] for row in rows]).delete()
        return [(session_id, kind, json.loads(payload)) for _, session_id, kind, payload in rows]

    def disconnected(self, records: list[tuple[int, int | None, str, object]]):
        """Connections that ended before their stream: (stream id, log row id or None, reason, when)."""
        with transaction.atomic(using=self.alias, savepoint=False):
            for stream_id, log_id, reason, when in records:
                self.rows(Stream).filter(pk=stream_id, connected_worker=WORKER).update(connected_worker="")
                if log_id is None:
                    opened = self.rows(Stream).filter(pk=stream_id).values_list("created_at", flat=True).first()
                    if opened is not None:
                        self.rows(StreamConnection).create(stream_id=stream_id, worker=WORKER, opened_at=opened,
                                                           closed_at=when, close_reason=reason)
                else:
                    self.rows(StreamConnection).filter(pk=log_id).update(closed_at=when, close_reason=reason)

    def heartbeat(self, host: str, pid: int, stopping=False):
        """This worker is alive: its row, and the leases of the requests it runs."""
        now = timezone.now()
        self.rows(Worker).update_or_create(id=WORKER, defaults=dict(host=host, pid=pid, heartbeat_at=now,
                                                                   stopping=stopping))
        lease = timezone.now() + timedelta(seconds=mcp_settings.LEASE_SECONDS)
        self.rows(Stream).filter(worker=WORKER, status=Stream.Status.OPEN, kind=Stream.Kind.REQUEST).update(
            lease_expires_at=lease
        )
        self.rows(Task).filter(worker=WORKER, status__in=Task.ACTIVE).update(lease_expires_at=lease)

    def peers(self) -> list[tuple[str, int]]:
        """The other workers alive on this database: (host, pid)."""
        return list(self.rows(Worker).alive().exclude(id=WORKER).values_list("host", "pid"))

    def prune(self) -> dict:
        """Delete expired and terminated sessions, finished streams past their retention, the
        modern requests of workers that are gone, tasks past their TTL (their events with them),
        and 2026-07-28 requests' URL elicitations as old as an idle session."""
        streams, _ = self.rows(Stream).past_retention().delete()
        sessions, _ = self.rows(Session).prunable().delete()
        modern = self.forget_orphaned_modern()
        _, deleted = self.rows(Task).expired().delete()  # their events with them
        elicitations, _ = self.rows(Elicitation).prunable().delete()
        return {"streams": streams, "sessions": sessions, "modern": modern,
                "tasks": deleted.get(Task._meta.label, 0), "task_events": deleted.get(TaskEvent._meta.label, 0),
                "elicitations": elicitations}

    # URL-mode elicitations

    def record_elicitation(self, server: str, elicitation_id: str, session_id: str | None, principal: str,
                           url: str) -> bool:
        """Remember who started this elicitation; False when the id is already another's (another
        session, another principal): an id stays with whoever used it first."""
        with self.atomic():
            row, created = self.rows(Elicitation).get_or_create(
                key=elicitation_key(server, elicitation_id),
                defaults={"server": server, "elicitation_id": elicitation_id, "session_id": session_id,
                          "principal": principal, "url": url})
        return created or (row.session_id == session_id and row.principal == principal
                           and row.elicitation_id == elicitation_id)

    def elicitation_completed(self, server: str, elicitation_id: str, principal: str) -> bool:
        return self.rows(Elicitation).filter(key=elicitation_key(server, elicitation_id), principal=principal,
                                             completed_at__isnull=False).exists()

    def complete_elicitation(self, server: str, elicitation_id: str) -> tuple[bool, str | None]:
        """Mark it completed -> (whether this call did, the session to tell: None for a 2026-07-28
        request's, or a session that ended)."""
        with self.atomic():
            rows = self.rows(Elicitation).filter(key=elicitation_key(server, elicitation_id),
                                                 completed_at__isnull=True)
            session_id = rows.values_list("session_id", flat=True).first()
            if not rows.update(completed_at=timezone.now()):
                return False, None
            if session_id is not None and not self.rows(Session).filter(
                    pk=session_id, terminated_at__isnull=True).exists():
                session_id = None
        return True, session_id

    # Tasks: every change is one conditional statement, or a locked read and a write

    def create_task(self, task_id: str, *, server: str, principal: str, method: str, tool: str, request: dict,
                    client_capabilities: dict, ttl_ms: int | None, poll_interval_ms: int,
                    session_id: str | None = None, user_id=None, runner: str = "process",
                    answers: dict | None = None) -> Task:
        """Run here ("process": this worker, its lease), or queued for another runner (no worker and
        no lease until one picks it up: `claim_task`)."""
        now = timezone.now()
        here = runner == "process"
        return self.rows(Task).create(
            id=task_id, server=server[:100], principal=_storable(principal, 200), session_id=session_id,
            user_id=user_id, method=method[:100], tool=_storable(tool, 200), request=_json(request),
            client_capabilities=_json(client_capabilities), ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms,
            runner=runner, worker=WORKER if here else "",
            lease_expires_at=now + timedelta(seconds=mcp_settings.LEASE_SECONDS) if here else None,
            input_responses=_json(answers or {}), created_at=now, updated_at=now,
            expires_at=now + timedelta(milliseconds=ttl_ms) if ttl_ms is not None else None,
        )

    def claim_task(self, task_id: str, worker: str) -> Task | None:
        """A runner's worker starts (or renews) an active task: its lease from now. None: no longer active."""
        updated = self.rows(Task).filter(pk=task_id, status__in=Task.ACTIVE).update(
            worker=worker[:100], lease_expires_at=timezone.now() + timedelta(seconds=mcp_settings.LEASE_SECONDS))
        return self.get_task_by_id(task_id) if updated else None

    def get_task(self, task_id: str, server: str, principal: str) -> TaskView | None:
        """The task, if it is `principal`'s: anyone else's is as unknown as a task that never was."""
        return self.get_tasks([(task_id, server, principal)])[0]

    def get_tasks(self, keys: list[tuple[str, str, str]]) -> list[TaskView | None]:
        """get_task for each (task id, server, principal), in one statement. Ids, servers and
        principals are compared here, exactly (a collation may fold case: MariaDB's default)."""
        rows = {row.id: row for row in self.read_tasks(list({task_id for task_id, _, _ in keys}))}
        found = [rows.get(task_id) for task_id, _, _ in keys]
        return [row if row is not None and (row.server, row.principal) == (server, principal) else None
                for row, (_, server, principal) in zip(found, keys)]

    def read_tasks(self, ids: list[str]) -> list[TaskView]:
        rows = self.rows(Task).filter(pk__in=ids).order_by().values_list(*TASK_VIEW_COLUMNS)
        return [TaskView(*row) for row in rows]

    def get_task_by_id(self, task_id: str) -> Task | None:
        return self.rows(Task).filter(pk=task_id).first()

    def list_tasks(self, server: str, principal: str, session_id: str | None, after: tuple | None,
                   limit: int) -> list[Task]:
        """A page of the tasks one client may see, newest first: its principal's (authenticated),
        else its session's. `after`: (created_at, id) of the last task of the previous page."""
        tasks = self.rows(Task).filter(server=server, principal=principal).order_by("-created_at", "-id")
        if not principal:
            tasks = tasks.filter(session_id=session_id)
        if after is not None:
            created_at, task_id = after
            tasks = tasks.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=task_id))
        return list(tasks[:limit])

    def ask_task(self, task_id: str, requests: dict[str, dict]) -> str | None:
        """The running task waits on these questions: -> its status (None: no longer active)."""
        with self.atomic():
            task = self.rows(Task).select_for_update().filter(pk=task_id, status__in=Task.ACTIVE).first()
            if task is None:
                return None
            pending, answered = json.loads(task.input_requests), json.loads(task.input_responses)
            asked = {k: v for k, v in requests.items() if k not in answered and k not in pending}
            pending.update(asked)
            if asked:
                self.rows(TaskEvent).create(task_id=task_id, kind=TaskEvent.Kind.QUESTION, payload=_json(asked))
            if pending:
                self.rows(Task).filter(pk=task_id).update(
                    input_requests=_json(pending), status=Task.Status.INPUT_REQUIRED, updated_at=timezone.now())
            return Task.Status.INPUT_REQUIRED if pending else task.status

    def task_answers(self, task_id: str, keys) -> tuple[str | None, dict]:
        """The running task's answers to `keys` received so far, and its status (None: gone)."""
        task = self.rows(Task).filter(pk=task_id).only("status", "input_responses").first()
        if task is None:
            return None, {}
        answered = json.loads(task.input_responses)
        return task.status, {k: answered[k] for k in keys if k in answered}

    def answer_task(self, task_id: str, server: str, principal: str, responses: dict) -> Task | None:
        """`tasks/update`: answers to questions the task waits on (others are ignored). Back to
        working once none is left. None for an unknown task."""
        with self.atomic():
            task = self.rows(Task).select_for_update().filter(pk=task_id, server=server, principal=principal).first()
            if task is None or task.terminal:
                return task
            pending, answered = json.loads(task.input_requests), json.loads(task.input_responses)
            taken = {k: v for k, v in responses.items() if k in pending}
            if taken:
                answered.update(taken)
                for key in taken:
                    del pending[key]
                task.input_requests, task.input_responses = _json(pending), _json(answered)
                task.status = Task.Status.INPUT_REQUIRED if pending else Task.Status.WORKING
                task.updated_at = timezone.now()
                self.rows(Task).filter(pk=task_id).update(
                    input_requests=task.input_requests, input_responses=task.input_responses, status=task.status,
                    updated_at=task.updated_at)
                self._status_events([task_id], {"status": task.status, "answered": sorted(taken)}, task.updated_at)
            return task

    def cancel_task(self, task_id: str, server: str | None, principal: str | None, message: str = "") -> Task | None:
        """`tasks/cancel` (or an operator's, with server and principal None): an active task is
        cancelled now (the table decides; its worker stops the work when told); a finished one
        stays as it is. None for an unknown task."""
        now = timezone.now()
        mine = self.rows(Task).filter(pk=task_id)
        if server is not None:
            mine = mine.filter(server=server, principal=principal)
        with self.atomic():
            if mine.filter(status__in=Task.ACTIVE).update(status=Task.Status.CANCELLED, status_message=message,
                                                          input_requests="{}", updated_at=now, finished_at=now):
                self._status_events([task_id], _status(Task.Status.CANCELLED, message), now)
            return mine.first()

    def finish_task(self, task_id: str, status: str, result: dict | None = None, error: dict | None = None,
                    message: str = "") -> bool:
        """The task's outcome, unless it already has one (a cancel came first): -> whether stored."""
        now = timezone.now()
        with self.atomic():
            stored = bool(self.rows(Task).filter(pk=task_id, status__in=Task.ACTIVE).update(
                status=status, result=_json(result) if result is not None else "",
                error=_json(error) if error is not None else "", status_message=message, input_requests="{}",
                updated_at=now, finished_at=now))
            if stored:
                self._status_events([task_id], _status(status, message), now)
            return stored

    def ended_tasks(self, task_ids: list[str]) -> list[str]:
        """Which of these tasks are no longer active (cancelled from another worker, say)."""
        if not task_ids:
            return []
        return list(self.rows(Task).filter(pk__in=task_ids).exclude(status__in=Task.ACTIVE)
                    .values_list("pk", flat=True))

    def fail_orphaned_tasks(self, error: dict, message: str) -> list[str]:
        """Active tasks whose worker's lease ran out end `failed`: nobody is running them."""
        now = timezone.now()
        with self.atomic():
            ids = list(self.rows(Task).orphaned(now).values_list("pk", flat=True))
            if ids:
                self.rows(Task).filter(pk__in=ids, status__in=Task.ACTIVE).update(
                    status=Task.Status.FAILED, error=_json(error), status_message=message, input_requests="{}",
                    updated_at=now, finished_at=now)
                self._status_events(ids, _status(Task.Status.FAILED, message), now)
        return ids

    def _status_events(self, task_ids: list[str], change: dict, now):
        payload = _json(change)
        self.rows(TaskEvent).bulk_create([TaskEvent(task_id=task_id, kind=TaskEvent.Kind.STATUS, payload=payload,
                                                    created_at=now) for task_id in task_ids])

    def add_task_events(self, task_id: str, items: list[tuple[str, datetime, str | None]]) -> int:
        """Messages a task's tool sent: (payload, when, status text or None). The last status text (a
        progress message's) becomes the active task's status message. -> how many were stored."""
        self.rows(TaskEvent).bulk_create([TaskEvent(task_id=task_id, kind=TaskEvent.Kind.MESSAGE, payload=payload,
                                                    created_at=at) for payload, at, _ in items])
        texts = [text for _, _, text in items if text]
        if texts:
            self.rows(Task).filter(pk=task_id, status__in=Task.ACTIVE).update(
                status_message=_storable(texts[-1]), updated_at=items[-1][1])
        return len(items)

    # 2026-07-28 requests held open

    def open_modern(self, kind: str, server: str, method: str, name: str, request_id: str, principal: str,
                    client_name: str, client_version: str, notifications: dict) -> int:
        return self.rows(ModernRequest).create(
            kind=kind, server=server[:100], worker=WORKER, method=_storable(method, 100), name=_storable(name),
            request_id=_storable(request_id), principal=_storable(principal, 200),
            client_name=_storable(client_name, 200), client_version=_storable(client_version, 100),
            notifications=notifications,
        ).pk

    def close_modern(self, row_ids: list[int]):
        self.rows(ModernRequest).filter(pk__in=row_ids).delete()

    def forget_orphaned_modern(self) -> int:
        """Rows of workers no longer running: what they held went with them."""
        deleted, _ = self.rows(ModernRequest).orphaned().delete()
        return deleted
