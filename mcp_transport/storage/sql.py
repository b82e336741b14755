"""The hot operations (the statements every request runs) as SQL on Django's cursor: SQLite and
PostgreSQL. Everything else, and every other database, is the ORM's (`orm.Store`).

The statements run through Django's `CursorWrapper` on the store's connection, so
`connection.execute_wrapper`, `CaptureQueriesContext`, DEBUG's `connection.queries`, the debug
toolbar and APM tools that patch Django's cursor see them. What the ORM would add per query is
left out: the statements are built once per dialect, values are adapted once per call, and the
store keeps one wrapped cursor per DB-API connection. On SQLite that cursor is the driver's own,
with `?` placeholders, because Django's SQLite cursor rewrites `%s` into `?` with a regular
expression on every query. When someone reads the queries as Django logs them (DEBUG,
`CaptureQueriesContext`, a patched `connection.cursor()` such as the debug toolbar's), each
operation takes a cursor from `connection.cursor()` instead, with Django's `%s` placeholders,
exactly as any ORM query would.
"""
from __future__ import annotations

import json
import sqlite3
from datetime import timezone as dt_timezone

from django.conf import settings
from django.utils import timezone

from ..models import Event, Stream, StreamConnection, Task, retention_cutoff
from .orm import NO_TRANSACTION, Store
from .records import (
    OPEN, PRIMING, REQUEST, STANDALONE, TASK_VIEW_COLUMNS, WORKER, NewRequestStream, PendingStream, StoredEvent,
    TaskView, early_events, message_kinds, stream_pk,
)

STREAM_COLUMNS = (
    "session", "kind", "method", "tool_name", "request_id", "status", "last_seq", "reconnects", "worker",
    "lease_expires_at", "connected_worker", "connected_at", "disconnect_policy", "retry_ms", "created_at",
    "last_event_at", "finished_at",
)
EVENT_COLUMNS = ("stream", "seq", "kind", "payload", "created_at")
CONNECTION_COLUMNS = ("stream", "worker", "opened_at", "closed_at", "resumed_from", "close_reason")
# What a resumption needs to know of its stream (the last: whether its request's lease ran out).
FOUND_COLUMNS = ("kind", "method", "tool_name", "status", "last_seq", "reconnects")
# The keys of JSON records (PostgreSQL): an event's, and in `open_many` a stream's and an event's
# with their stream's place `o` in the list first.
EVENT_KEYS = tuple(Event._meta.get_field(name).column for name in EVENT_COLUMNS[1:4])
PLACED_STREAM_KEYS = ("o", *(Stream._meta.get_field(name).column for name in STREAM_COLUMNS))
PLACED_EVENT_KEYS = ("o", *EVENT_KEYS)


def _common_statements(db, mark: str) -> dict[str, str]:
    """The statements both dialects run, with `mark` as the placeholder."""
    quote = db.ops.quote_name

    def columns(model, names, alias=""):
        return ", ".join(alias + quote(model._meta.get_field(name).column) for name in names)

    def values(count):
        return "(" + ", ".join([mark] * count) + ")"

    stream, event = quote(Stream._meta.db_table), quote(Event._meta.db_table)
    log = quote(StreamConnection._meta.db_table)
    task = (f"SELECT {columns(Task, TASK_VIEW_COLUMNS)} FROM {quote(Task._meta.db_table)} "
            f"WHERE {quote(Task._meta.pk.column)} ")
    bump = f"UPDATE {stream} SET last_seq = last_seq + {mark}, last_event_at = {mark}"
    where = f" WHERE id = {mark} AND status = {mark} RETURNING last_seq"
    return {
        "insert_stream": (f"INSERT INTO {stream} ({columns(Stream, STREAM_COLUMNS)}) VALUES "
                          f"{values(len(STREAM_COLUMNS))} RETURNING id"),
        "insert_events": f"INSERT INTO {event} ({columns(Event, EVENT_COLUMNS)}) VALUES ",
        "event_row": values(len(EVENT_COLUMNS)),
        "bump": bump + where,
        "bump_finish": bump + f", status = {mark}, finished_at = {mark}" + where,
        "found": columns(Stream, FOUND_COLUMNS, "s."),
        "lapsed": f"CASE WHEN s.lease_expires_at < {mark} THEN 1 ELSE 0 END",
        "replayable": (f"s.id = {mark} AND s.session_id = {mark} "
                       f"AND (s.finished_at IS NULL OR s.finished_at >= {mark})"),
        "find_standalone": f"SELECT id, last_seq FROM {stream} WHERE session_id = {mark} AND kind = {mark} "
                           f"ORDER BY id LIMIT 1",
        "status": f"SELECT status FROM {stream} WHERE id = {mark}",
        # A poll's task; a batch's polls, their ids as one JSON array (completed per dialect).
        "get_task": f"{task}= {mark}",
        "get_tasks": f"{task}IN ",
        # The ids as one JSON array (completed per dialect): one fixed text, however many streams
        # the sweep asks about.
        "progress": f"SELECT id, last_seq, status FROM {stream} WHERE id IN ",
        "events_after": f"SELECT seq, kind, payload FROM {event} WHERE stream_id = {mark} AND seq > {mark} ORDER BY seq",
        "connect": (
            f"UPDATE {stream} SET connected_worker = {mark}, connected_at = {mark}, disconnect_policy = {mark}, "
            f"retry_ms = {mark}, reconnects = reconnects + {mark} WHERE id = {mark}"
        ),
        "log_connection": f"INSERT INTO {log} ({columns(StreamConnection, CONNECTION_COLUMNS)}) VALUES "
                          f"{values(len(CONNECTION_COLUMNS))} RETURNING id",
    }


class SQLStore(Store):
    """The hot operations that read the same way in both dialects; a dialect supplies its
    statements (`statements`) and how it inserts streams, appends and replays."""

    # The placeholder of this store's own cursor; Django's cursor always takes "%s".
    mark = "%s"
    _statements_cache: dict = {}

    def __init__(self, db):
        super().__init__(db)
        self.sql = self.statements(db, self.mark)
        self.django_sql = self.statements(db, "%s")
        self.driver = self.driver_cursor()
        self.wrapped = db.make_cursor(self.driver)
        self.adapt_time = db.ops.adapt_datetimefield_value

    @classmethod
    def statements(cls, db, mark: str) -> dict[str, str]:
        key = (cls, mark)
        found = SQLStore._statements_cache.get(key)
        if found is None:
            found = SQLStore._statements_cache[key] = cls.build_statements(db, mark)
        return found

    @classmethod
    def build_statements(cls, db, mark: str) -> dict[str, str]:
        raise NotImplementedError

    def driver_cursor(self):
        """The DB-API cursor this store's statements run on (wrapped in Django's CursorWrapper)."""
        return self.db.create_cursor()

    def cursor(self):
        """-> (Django's cursor for one operation, the statements for it)."""
        db = self.db
        if db.queries_logged or "cursor" in db.__dict__:
            # Someone reads this connection's queries as Django logs them: the cursor any query gets.
            return db.cursor(), self.django_sql
        return self.wrapped, self.sql

    def rows_cursor(self):
        """-> (the cursor for reads of many typed columns, the statements for it)."""
        return self.cursor()

    # Hot operations

    def standalone_stream(self, session_id: str) -> tuple[int, int, bool]:
        with self.atomic():
            cursor, sql = self.cursor()
            found = _one(cursor, sql["find_standalone"], (session_id, STANDALONE))
            if found is not None:
                return found[0], found[1], False
            at = self.adapt_time(timezone.now())
            stream_id = self.insert_stream(cursor, sql, (
                session_id, STANDALONE, "", "", "", OPEN, 0, 0, WORKER, None, "", None, "", None, at, None, None,
            ), [(0, PRIMING, "")], at)
            return stream_id, 0, True

    def insert_stream(self, cursor, sql, values: tuple, events: list[tuple], at) -> int:
        """A stream row (STREAM_COLUMNS, datetimes adapted) and its first events (seq, kind, payload)."""
        raise NotImplementedError

    def insert_request_streams(self, requests: list[NewRequestStream], now, lease) -> list[tuple]:
        at, lease = self.adapt_time(now), self.adapt_time(lease)
        rows, early = [], []
        for r in requests:
            # The id is not known before the INSERT: events are numbered with 0 and re-made below.
            stored, finished = early_events(0, r.writes)
            last = sum(len(events) for events in stored)
            events = [(0, PRIMING, "")] if r.prime else []
            events += [(e.seq, e.kind, e.payload) for batch in stored for e in batch]
            rows.append(((
                r.session_id, REQUEST, r.method, r.tool_name[:200], r.request_id, str(finished or OPEN),
                last, 0, WORKER, lease, WORKER, at, r.policy[:200], r.retry_ms, at, at if last else None,
                at if finished else None,
            ), events))
            early.append(stored)
        cursor, sql = self.cursor()
        return [
            (stream_id, StoredEvent(stream_id, 0, PRIMING, "") if r.prime else None,
             [[StoredEvent(stream_id, e.seq, e.kind, e.payload) for e in batch] for batch in stored])
            for stream_id, r, stored in zip(self.insert_streams(cursor, sql, rows, at), requests, early)
        ]

    def insert_streams(self, cursor, sql, streams: list[tuple[tuple, list[tuple]]], at) -> list[int]:
        """insert_stream for several streams, in order: -> their ids."""
        return [self.insert_stream(cursor, sql, values, events, at) for values, events in streams]

    def append(self, stream: int | PendingStream, payloads: list[str], finish: str | None = None) -> list[StoredEvent]:
        stream_id = stream_pk(stream)
        count = len(payloads)
        kinds = message_kinds(count, finish)
        at = self.adapt_time(timezone.now())
        with self.atomic():
            cursor, sql = self.cursor()
            last = self.append_events(cursor, sql, stream_id, kinds, payloads, at, finish)
        if last is None:
            return []
        return [StoredEvent(stream_id, last - count + 1 + i, kinds[i], p) for i, p in enumerate(payloads)]

    def append_events(self, cursor, sql, stream_id: int, kinds: list[str], payloads: list[str], at,
                      finish: str | None) -> int | None:
        """Number and store events at the end of an open stream (ending it with `finish`): -> the
        last sequence number, or None if the stream is not open."""
        raise NotImplementedError

    def events_after(self, stream_id: int, seq: int) -> tuple[list[StoredEvent], str]:
        with self.atomic(one_statement=True):
            cursor, sql = self.cursor()
            status = _one(cursor, sql["status"], (stream_id,))
            rows = _all(cursor, sql["events_after"], (stream_id, seq))
        return ([StoredEvent(stream_id, s, k, p) for s, k, p in rows],
                status[0] if status else Stream.Status.CANCELLED)

    def replay(self, session_id: str, stream_id: int, seq: int, orphan_error):
        now = timezone.now()
        cursor, sql = self.cursor()
        found = self.find_and_replay(cursor, sql, session_id, stream_id, seq,
                                     self.adapt_time(retention_cutoff(now)), self.adapt_time(now))
        if found is None:
            return None
        (*columns, lease_expired), rows = found
        stream = Stream(id=stream_id, session_id=session_id, **dict(zip(FOUND_COLUMNS, columns)))
        if seq > stream.last_seq:
            return None
        failed = self.fail_orphans(orphan_error, stream_id) if lease_expired and stream.status == OPEN else []
        if failed:
            cursor, sql = self.cursor()
            rows = _all(cursor, sql["events_after"], (stream_id, seq))
        events = [StoredEvent(stream_id, s, k, p) for s, k, p in rows]
        return stream, failed, events, Stream.Status.FAILED if failed else stream.status

    def find_and_replay(self, cursor, sql, session_id: str, stream_id: int, seq: int, cutoff, now):
        """If the stream is this session's and was not finished before `cutoff`: (FOUND_COLUMNS and
        whether its lease ran out, its events after `seq` as (seq, kind, payload)); else None."""
        raise NotImplementedError

    def stream_progress(self, stream_ids) -> dict[int, tuple[int, str]]:
        cursor, sql = self.cursor()
        rows = _all(cursor, sql["progress"], (json.dumps(list(stream_ids)),))
        return {pk: (last, status) for pk, last, status in rows}

    def read_tasks(self, ids: list[str]) -> list[TaskView]:
        cursor, sql = self.rows_cursor()
        if len(ids) == 1:
            rows = _all(cursor, sql["get_task"], (ids[0],))
        else:
            rows = _all(cursor, sql["get_tasks"], (json.dumps(ids),))
        read = self.read_time
        return [TaskView(*row[:-3], read(row[-3]), read(row[-2]), read(row[-1])) for row in rows]

    def read_time(self, value):
        """A datetime column's value as the ORM would give it."""
        return value

    def connected(self, stream_id: int, resumed_from: int | None, policy: str = "", retry_ms: int | None = None) -> int:
        at = self.adapt_time(timezone.now())
        update = (WORKER, at, policy[:200], retry_ms, 0 if resumed_from is None else 1, stream_id)
        log = (stream_id, WORKER, at, None, resumed_from, "")
        with self.atomic(one_statement=True):
            cursor, sql = self.cursor()
            return self.connect(cursor, sql, update, log)

    def connect(self, cursor, sql, update: tuple, log: tuple) -> int:
        """The stream is held by a connection here from now; its timeline gets a row: -> that row's id."""
        raise NotImplementedError


class SQLiteStore(SQLStore):
    """SQLite 3.35 or later (RETURNING) with JSON1. SQLite has no round trips: a statement more
    costs less than one statement whose rows repeat columns."""

    mark = "?"

    def __init__(self, db):
        super().__init__(db)
        if settings.USE_TZ and db.timezone is dt_timezone.utc:
            self.adapt_time = _utc_text

    @classmethod
    def build_statements(cls, db, mark):
        sql = _common_statements(db, mark)
        sql["find"] = f"SELECT {sql['found']}, {sql['lapsed']} FROM {db.ops.quote_name(Stream._meta.db_table)} s " \
                      f"WHERE {sql['replayable']}"
        sql["progress"] += f"(SELECT value FROM json_each({mark}))"
        sql["get_tasks"] += f"(SELECT value FROM json_each({mark}))"
        return sql

    def read_time(self, value):
        return self.db.ops.convert_datetimefield_value(value, None, self.db)

    def driver_cursor(self):
        # The driver's cursor: Django's SQLite cursor would rewrite each statement's placeholders.
        return sqlite3.Cursor(self.db.connection)

    def insert_stream(self, cursor, sql, values, events, at):
        stream_id = _one(cursor, sql["insert_stream"], values)[0]
        if events:
            _insert_events(cursor, sql, [(stream_id, seq, kind, payload, at) for seq, kind, payload in events])
        return stream_id

    def append_events(self, cursor, sql, stream_id, kinds, payloads, at, finish):
        count = len(payloads)
        if finish:
            row = _one(cursor, sql["bump_finish"], (count, at, str(finish), at, stream_id, OPEN))
        else:
            row = _one(cursor, sql["bump"], (count, at, stream_id, OPEN))
        if row is None:
            return None
        last = row[0]
        if count:
            _insert_events(cursor, sql, [(stream_id, last - count + 1 + i, kind, payload, at)
                                         for i, (kind, payload) in enumerate(zip(kinds, payloads))])
        return last

    def find_and_replay(self, cursor, sql, session_id, stream_id, seq, cutoff, now):
        # Two statements: a join's rows would repeat the stream's columns for every event.
        found = _one(cursor, sql["find"], (now, stream_id, session_id, cutoff))
        return None if found is None else (found, _all(cursor, sql["events_after"], (stream_id, seq)))

    def connect(self, cursor, sql, update, log):
        cursor.execute(sql["connect"], update)
        return _one(cursor, sql["log_connection"], log)[0]


class PostgresStore(SQLStore):
    """PostgreSQL: one statement, so one round trip and no transaction, for each hot operation.

    Every statement has one fixed text, so that it can be prepared: a list of rows goes in as one
    JSON parameter, read by json_to_recordset (one C-encoded string costs the database thread less
    than a parameter per value, or a list per column that psycopg adapts element by element in
    Python, and PostgreSQL parses it once). Where the project sets DATABASES OPTIONS
    "prepare_threshold", the store's cursor binds on the server, so psycopg prepares the statements
    it runs that often; Django's default (None) keeps PgBouncer's transaction pooling working.
    """

    @classmethod
    def build_statements(cls, db, mark):
        sql = _common_statements(db, mark)
        quote = db.ops.quote_name

        def columns(model, names, alias=""):
            return ", ".join(alias + quote(model._meta.get_field(name).column) for name in names)

        def record(model, names):
            return ", ".join(f"{quote(model._meta.get_field(name).column)} "
                             f"{model._meta.get_field(name).cast_db_type(db)}" for name in names)

        stream, event = quote(Stream._meta.db_table), quote(Event._meta.db_table)
        sql["progress"] += "(SELECT value::bigint FROM json_array_elements_text(%s::json))"
        sql["get_tasks"] += "(SELECT value FROM json_array_elements_text(%s::json))"
        events = f"INSERT INTO {event} ({columns(Event, EVENT_COLUMNS)}) SELECT "
        event_record = record(Event, EVENT_COLUMNS[1:4])
        event_records = f"json_to_recordset(%s::json) AS v({event_record})"
        # The events go in with the row that numbers them.
        sql["open_with_events"] = (
            f"WITH s AS ({sql['insert_stream']}) {events}s.id, v.seq, v.kind, v.payload, %s FROM s "
            f"CROSS JOIN {event_records} RETURNING stream_id"
        )
        append = f"{events}%s, b.last_seq - %s + v.seq, v.kind, v.payload, %s FROM b CROSS JOIN {event_records} RETURNING seq"
        sql["append_events"] = f"WITH b AS ({sql['bump']}) {append}"
        sql["append_events_finish"] = f"WITH b AS ({sql['bump_finish']}) {append}"
        # The stream's row first (as seq -1), then its events: each event's row without the
        # stream's columns again.
        nulls = ", ".join(["NULL"] * (len(FOUND_COLUMNS) + 1))
        sql["find_and_replay"] = (
            f"WITH s AS (SELECT {sql['found']}, {sql['lapsed']} AS lapsed, s.id FROM {stream} s "
            f"WHERE {sql['replayable']}) "
            f"SELECT {columns(Stream, FOUND_COLUMNS)}, lapsed, -1 AS seq, NULL, NULL FROM s UNION ALL "
            f"SELECT {nulls}, e.seq, e.kind, e.payload FROM {event} e JOIN s ON e.stream_id = s.id "
            f"WHERE e.seq > %s ORDER BY seq"
        )
        # Several streams and their events in one statement. The stream ids are drawn first, so
        # that each event can name its stream by its place `o` in the list.
        pk = Stream._meta.pk.column
        sql["open_many"] = (
            f"WITH v AS (SELECT * FROM json_to_recordset(%s::json) AS v(o integer, {record(Stream, STREAM_COLUMNS)})), "
            f"i AS (SELECT o, nextval(pg_get_serial_sequence('{stream}', '{pk}')) AS id FROM v), "
            f"s AS (INSERT INTO {stream} ({quote(pk)}, {columns(Stream, STREAM_COLUMNS)}) "
            f"SELECT i.id, {columns(Stream, STREAM_COLUMNS, 'v.')} FROM v JOIN i USING (o)), "
            f"e AS ({events}i.id, x.seq, x.kind, x.payload, %s FROM json_to_recordset(%s::json) "
            f"AS x(o integer, {event_record}) JOIN i USING (o)) "
            f"SELECT id FROM i ORDER BY o"
        )
        sql["connect_and_log"] = f"WITH u AS ({sql['connect']}) {sql['log_connection']}"
        return sql

    def __init__(self, db):
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        super().__init__(db)
        # Reads of many typed columns take binary results: Django's loader parses text timestamps in
        # Python, psycopg's binary one in C. Binary results need server-side binding, not preparing.
        self.binary = db.make_cursor(_binary_cursor(db.connection)) if is_psycopg3 else self.wrapped

    def driver_cursor(self):
        raw = self.db.connection
        if getattr(raw, "prepare_threshold", None) is not None:
            import psycopg

            return psycopg.Cursor(raw)  # server-side binding: what preparing needs
        return super().driver_cursor()

    def rows_cursor(self):
        cursor, sql = self.cursor()
        return (self.binary, sql) if cursor is self.wrapped else (cursor, sql)

    def read_time(self, value):
        # The binary loader gives the session's time zone, which Django set to the connection's:
        # its tzinfo (None without USE_TZ) is what Django's text loader would have put there.
        timezone_ = self.db.timezone
        return value if value is None or value.tzinfo is timezone_ else value.replace(tzinfo=timezone_)

    def atomic(self, one_statement=False):
        # Under READ COMMITTED a transaction gives reads and one write statement nothing, and
        # BEGIN and COMMIT would be two more round trips.
        if one_statement:
            return NO_TRANSACTION
        return super().atomic()

    def insert_stream(self, cursor, sql, values, events, at):
        if events:
            return _one(cursor, sql["open_with_events"], [*values, at, _records(EVENT_KEYS, events)])[0]
        return _one(cursor, sql["insert_stream"], values)[0]

    def insert_streams(self, cursor, sql, streams, at):
        # One stream alone takes insert_stream's plainer statement, which PostgreSQL plans for less.
        if len(streams) == 1:
            return super().insert_streams(cursor, sql, streams, at)
        rows = [(place, *values) for place, (values, _) in enumerate(streams)]
        events = [(place, *event) for place, (_, stream_events) in enumerate(streams) for event in stream_events]
        return [row[0] for row in _all(cursor, sql["open_many"], [
            _records(PLACED_STREAM_KEYS, rows), at, _records(PLACED_EVENT_KEYS, events),
        ])]

    def append_events(self, cursor, sql, stream_id, kinds, payloads, at, finish):
        count = len(payloads)
        if finish:
            params = [count, at, str(finish), at, stream_id, OPEN]
        else:
            params = [count, at, stream_id, OPEN]
        if not count:
            row = _one(cursor, sql["bump_finish" if finish else "bump"], params)
            return None if row is None else row[0]
        records = _records(EVENT_KEYS, [(seq, kind, payload)
                                        for seq, (kind, payload) in enumerate(zip(kinds, payloads), 1)])
        rows = _all(cursor, sql["append_events_finish" if finish else "append_events"],
                    [*params, stream_id, count, at, records])
        return max(row[0] for row in rows) if rows else None

    def find_and_replay(self, cursor, sql, session_id, stream_id, seq, cutoff, now):
        rows = _all(cursor, sql["find_and_replay"], (now, stream_id, session_id, cutoff, seq))
        if not rows:
            return None
        width = len(FOUND_COLUMNS) + 1
        return rows[0][:width], [row[width:] for row in rows[1:]]

    def connect(self, cursor, sql, update, log):
        return _one(cursor, sql["connect_and_log"], update + log)[0]


def _binary_cursor(raw):
    import psycopg

    cursor = psycopg.Cursor(raw)
    cursor.format = psycopg.pq.Format.BINARY
    return cursor


def _one(cursor, sql: str, params):
    cursor.execute(sql, params)
    return cursor.cursor.fetchone()


def _all(cursor, sql: str, params):
    cursor.execute(sql, params)
    return cursor.cursor.fetchall()


def _insert_events(cursor, sql, rows: list[tuple]):
    """rows: EVENT_COLUMNS in order, datetimes adapted; one statement (its text varies with the count)."""
    cursor.execute(sql["insert_events"] + ", ".join([sql["event_row"]] * len(rows)),
                   [value for row in rows for value in row])


def _records(keys: tuple, rows) -> str:
    """Rows as the JSON that the PostgreSQL statements read with json_to_recordset (datetimes as text)."""
    return json.dumps([dict(zip(keys, row)) for row in rows], default=str, ensure_ascii=False)


def _utc_text(value) -> str:
    """What Django's SQLite backend stores for an aware datetime when the database is in UTC."""
    if value.tzinfo is not dt_timezone.utc:
        value = value.astimezone(dt_timezone.utc)
    return str(value.replace(tzinfo=None))
