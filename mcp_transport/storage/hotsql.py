"""The statements every request runs, on the DB-API connection itself (SQLite and PostgreSQL).

Measured (BENCHMARKS.md): Django's cursor wrapper, its per-query placeholder rewriting (SQLite),
its per-field value preparation and the thread-local lookup behind each `connection.x` cost
several times what SQLite takes to run these statements. Here the statements are built once
per vendor, the raw cursor is kept with its connection and values are adapted once per call.
Everything else in the store goes through the ORM; other vendors take the ORM path everywhere.
"""
from __future__ import annotations

import json
import sqlite3
from datetime import timezone
from functools import lru_cache

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from ..models import Event, Stream, StreamConnection

STREAM_COLUMNS = (
    "session", "kind", "method", "tool_name", "request_id", "status", "last_seq", "reconnects", "worker",
    "lease_expires_at", "connected_worker", "connected_at", "disconnect_policy", "retry_ms", "created_at",
    "last_event_at", "finished_at",
)
EVENT_COLUMNS = ("stream", "seq", "kind", "payload", "created_at")
CONNECTION_COLUMNS = ("stream", "worker", "opened_at", "closed_at", "resumed_from", "close_reason")
# What a resumption needs to know of its stream (the last: whether its request's lease ran out).
FOUND_COLUMNS = ("kind", "method", "tool_name", "status", "last_seq", "reconnects")
# Plain strings: a driver may adapt an Enum by its name.
OPEN = str(Stream.Status.OPEN)
REQUEST, STANDALONE = str(Stream.Kind.REQUEST), str(Stream.Kind.STANDALONE)
# The keys of JSON records (PostgreSQL): an event's, and in `open_many` a stream's and an event's
# with their stream's place `o` in the list first.
EVENT_KEYS = tuple(Event._meta.get_field(name).column for name in EVENT_COLUMNS[1:4])
PLACED_STREAM_KEYS = ("o", *(Stream._meta.get_field(name).column for name in STREAM_COLUMNS))
PLACED_EVENT_KEYS = ("o", *EVENT_KEYS)
PRIMING, MESSAGE, FINAL = str(Event.Kind.PRIMING), str(Event.Kind.MESSAGE), str(Event.Kind.FINAL)


@lru_cache(maxsize=None)
def _statements(vendor: str) -> dict[str, str]:
    db = connections[DEFAULT_DB_ALIAS]
    mark = "?" if vendor == "sqlite" else "%s"
    quote = db.ops.quote_name

    def columns(model, names, alias=""):
        return ", ".join(alias + quote(model._meta.get_field(name).column) for name in names)

    def values(count):
        return "(" + ", ".join([mark] * count) + ")"

    stream, event = quote(Stream._meta.db_table), quote(Event._meta.db_table)
    log = quote(StreamConnection._meta.db_table)
    bump = f"UPDATE {stream} SET last_seq = last_seq + {mark}, last_event_at = {mark}"
    where = f" WHERE id = {mark} AND status = {mark} RETURNING last_seq"
    insert_stream = (f"INSERT INTO {stream} ({columns(Stream, STREAM_COLUMNS)}) VALUES "
                     f"{values(len(STREAM_COLUMNS))} RETURNING id")
    found = columns(Stream, FOUND_COLUMNS, "s.")
    lapsed = f"CASE WHEN s.lease_expires_at < {mark} THEN 1 ELSE 0 END"
    replayable = f"s.id = {mark} AND s.session_id = {mark} AND (s.finished_at IS NULL OR s.finished_at >= {mark})"
    statements = {
        "insert_stream": insert_stream,
        "insert_events": f"INSERT INTO {event} ({columns(Event, EVENT_COLUMNS)}) VALUES ",
        "event_row": values(len(EVENT_COLUMNS)),
        "bump": bump + where,
        "bump_finish": bump + f", status = {mark}, finished_at = {mark}" + where,
        "find": f"SELECT {found}, {lapsed} FROM {stream} s WHERE {replayable}",
        "find_standalone": f"SELECT id, last_seq FROM {stream} WHERE session_id = {mark} AND kind = {mark} "
                           f"ORDER BY id LIMIT 1",
        "status": f"SELECT status FROM {stream} WHERE id = {mark}",
        # The ids as one JSON array: one fixed text, however many streams the sweep asks about.
        "progress": f"SELECT id, last_seq, status FROM {stream} WHERE id IN "
                    + ("(SELECT value FROM json_each(?))" if vendor == "sqlite"
                       else "(SELECT value::bigint FROM json_array_elements_text(%s::json))"),
        "events_after": f"SELECT seq, kind, payload FROM {event} WHERE stream_id = {mark} AND seq > {mark} ORDER BY seq",
        "connect": (
            f"UPDATE {stream} SET connected_worker = {mark}, connected_at = {mark}, disconnect_policy = {mark}, "
            f"retry_ms = {mark}, reconnects = reconnects + {mark} WHERE id = {mark}"
        ),
        "log_connection": f"INSERT INTO {log} ({columns(StreamConnection, CONNECTION_COLUMNS)}) VALUES "
                          f"{values(len(CONNECTION_COLUMNS))} RETURNING id",
    }
    if vendor == "postgresql":
        # Every PostgreSQL statement here has one fixed text, so that it can be prepared: a list of
        # rows goes in as one JSON parameter, read by json_to_recordset. One C-encoded string costs
        # the database thread less than a parameter per value (or a list per column, which psycopg
        # adapts element by element in Python), and PostgreSQL parses it once.
        def record(model, names):
            return ", ".join(f"{quote(model._meta.get_field(name).column)} "
                             f"{model._meta.get_field(name).cast_db_type(db)}" for name in names)

        events = f"INSERT INTO {event} ({columns(Event, EVENT_COLUMNS)}) SELECT "
        event_record = record(Event, EVENT_COLUMNS[1:4])
        event_records = f"json_to_recordset(%s::json) AS v({event_record})"
        # One round trip instead of two: the events go in with the row that numbers them.
        statements["open_with_events"] = (
            f"WITH s AS ({insert_stream}) {events}s.id, v.seq, v.kind, v.payload, %s FROM s "
            f"CROSS JOIN {event_records} RETURNING stream_id"
        )
        append = f"{events}%s, b.last_seq - %s + v.seq, v.kind, v.payload, %s FROM b CROSS JOIN {event_records} RETURNING seq"
        statements["append_events"] = f"WITH b AS ({statements['bump']}) {append}"
        statements["append_events_finish"] = f"WITH b AS ({statements['bump_finish']}) {append}"
        # The stream's row first (as seq -1), then its events: one round trip, and each event's row
        # without the stream's columns again (a join's rows took 17 ms for 10,000 events, these 10).
        nulls = ", ".join(["NULL"] * (len(FOUND_COLUMNS) + 1))
        statements["find_and_replay"] = (
            f"WITH s AS (SELECT {found}, {lapsed} AS lapsed, s.id FROM {stream} s WHERE {replayable}) "
            f"SELECT {columns(Stream, FOUND_COLUMNS)}, lapsed, -1 AS seq, NULL, NULL FROM s UNION ALL "
            f"SELECT {nulls}, e.seq, e.kind, e.payload FROM {event} e JOIN s ON e.stream_id = s.id "
            f"WHERE e.seq > %s ORDER BY seq"
        )
        # Several streams and their events in one statement. The stream ids are drawn first, so
        # that each event can name its stream by its place `o` in the list.
        pk = Stream._meta.pk.column
        statements["open_many"] = (
            f"WITH v AS (SELECT * FROM json_to_recordset(%s::json) AS v(o integer, {record(Stream, STREAM_COLUMNS)})), "
            f"i AS (SELECT o, nextval(pg_get_serial_sequence('{stream}', '{pk}')) AS id FROM v), "
            f"s AS (INSERT INTO {stream} ({quote(pk)}, {columns(Stream, STREAM_COLUMNS)}) "
            f"SELECT i.id, {columns(Stream, STREAM_COLUMNS, 'v.')} FROM v JOIN i USING (o)), "
            f"e AS ({events}i.id, x.seq, x.kind, x.payload, %s FROM json_to_recordset(%s::json) "
            f"AS x(o integer, {event_record}) JOIN i USING (o)) "
            f"SELECT id FROM i ORDER BY o"
        )
        statements["connect_and_log"] = f"WITH u AS ({statements['connect']}) {statements['log_connection']}"
    return statements


class HotSQL:
    """Bound to one DB-API connection (a reconnect makes a new one)."""

    def __init__(self, db):
        self.raw = db.connection
        self.postgres = db.vendor == "postgresql"
        # Django's SQLite cursor rewrites `%s` to `?` in every query: the base class does not.
        self.cursor = sqlite3.Cursor(self.raw) if db.vendor == "sqlite" else self.raw.cursor()
        self.prepared = None
        if self.postgres and prepares(self.raw):
            import psycopg

            self.prepared = psycopg.Cursor(self.raw)  # server-side binding: what preparing needs
        self.sql = _statements(db.vendor)
        if db.vendor == "sqlite" and settings.USE_TZ and db.timezone is timezone.utc:
            self.adapt_time = _utc_text
        else:
            self.adapt_time = db.ops.adapt_datetimefield_value

    def run(self, sql: str, params):
        """Every statement's one way in: on PostgreSQL, prepared where the project allows it."""
        if self.prepared is not None:
            return self.prepared.execute(sql, params, prepare=True)
        return self.cursor.execute(sql, params)

    def open_stream(self, values: tuple, events: list[tuple], at) -> int:
        """A stream row (STREAM_COLUMNS, datetimes adapted) and its first events (seq, kind, payload)."""
        if events and self.postgres:
            return self.run(self.sql["open_with_events"], [*values, at, _records(EVENT_KEYS, events)]).fetchone()[0]
        stream_id = self.run(self.sql["insert_stream"], values).fetchone()[0]
        if events:
            self.insert_events([(stream_id, seq, kind, payload, at) for seq, kind, payload in events])
        return stream_id

    def open_streams(self, streams: list[tuple[tuple, list[tuple]]], at) -> list[int]:
        """open_stream for several streams; on PostgreSQL in one statement (one round trip, and
        atomic without a transaction around it). One stream alone takes open_stream's plainer
        statement: unprepared, `open_many` cost PostgreSQL 0.7-1.0 ms of CPU for it instead of 0.5."""
        if not self.postgres or len(streams) == 1:
            return [self.open_stream(values, events, at) for values, events in streams]
        rows = [(place, *values) for place, (values, _) in enumerate(streams)]
        events = [(place, *event) for place, (_, stream_events) in enumerate(streams) for event in stream_events]
        cursor = self.run(self.sql["open_many"], [
            _records(PLACED_STREAM_KEYS, rows), at, _records(PLACED_EVENT_KEYS, events),
        ])
        return [row[0] for row in cursor.fetchall()]

    def find_and_replay(self, session_id: str, stream_id: int, seq: int, cutoff, now):
        """If the stream is this session's and was not finished before `cutoff`: (FOUND_COLUMNS and
        whether its lease ran out, its events after `seq` as (seq, kind, payload)).

        On PostgreSQL in one statement (one round trip); SQLite has no round trips, and two statements
        took it 15 ms for 10,000 events where a join, whose rows repeat the stream's columns, took 35."""
        if not self.postgres:
            found = self.run(self.sql["find"], (now, stream_id, session_id, cutoff)).fetchone()
            return None if found is None else (found, self.events_after(stream_id, seq))
        rows = self.run(self.sql["find_and_replay"], (now, stream_id, session_id, cutoff, seq)).fetchall()
        if not rows:
            return None
        width = len(FOUND_COLUMNS) + 1
        return rows[0][:width], [row[width:] for row in rows[1:]]

    def find_standalone(self, session_id: str) -> tuple[int, int] | None:
        return self.run(self.sql["find_standalone"], (session_id, STANDALONE)).fetchone()

    def status(self, stream_id: int) -> str | None:
        row = self.run(self.sql["status"], (stream_id,)).fetchone()
        return row[0] if row else None

    def progress(self, stream_ids: list[int]) -> list[tuple[int, int, str]]:
        return self.run(self.sql["progress"], (json.dumps(stream_ids),)).fetchall()

    def events_after(self, stream_id: int, seq: int) -> list[tuple[int, str, str]]:
        return self.run(self.sql["events_after"], (stream_id, seq)).fetchall()

    def connect(self, stream_id: int, worker: str, resumed_from: int | None, policy: str, retry_ms, at) -> int:
        """The stream is held by `worker` from now; its timeline gets a row: -> that row's id."""
        update = (worker, at, policy, retry_ms, 0 if resumed_from is None else 1, stream_id)
        log = (stream_id, worker, at, None, resumed_from, "")
        if self.postgres:
            return self.run(self.sql["connect_and_log"], update + log).fetchone()[0]
        self.run(self.sql["connect"], update)
        return self.run(self.sql["log_connection"], log).fetchone()[0]

    def insert_events(self, rows: list[tuple]):
        """rows: EVENT_COLUMNS in order, datetimes adapted (SQLite; PostgreSQL inserts events with
        the statement that numbers them)."""
        sql = self.sql["insert_events"] + ", ".join([self.sql["event_row"]] * len(rows))
        self.cursor.execute(sql, [value for row in rows for value in row])

    def append(self, stream_id: int, kinds: list[str], payloads: list[str], at, finish: str | None) -> int | None:
        """Number and store events at the end of an open stream (ending it with `finish`): -> the
        last sequence number, or None if the stream is not open."""
        count = len(payloads)
        if finish:
            name, params = "bump_finish", [count, at, str(finish), at, stream_id, OPEN]
        else:
            name, params = "bump", [count, at, stream_id, OPEN]
        if self.postgres and count:
            records = _records(EVENT_KEYS, [(seq, kind, payload)
                                            for seq, (kind, payload) in enumerate(zip(kinds, payloads), 1)])
            sql = self.sql["append_events_finish" if finish else "append_events"]
            seqs = [row[0] for row in self.run(sql, [*params, stream_id, count, at, records]).fetchall()]
            return max(seqs) if seqs else None
        row = self.run(self.sql[name], params).fetchone()
        if row is None:
            return None
        last = row[0]
        if count:
            self.insert_events([(stream_id, last - count + 1 + i, kind, payload, at)
                                for i, (kind, payload) in enumerate(zip(kinds, payloads))])
        return last


def _records(keys: tuple, rows) -> str:
    """Rows as the JSON that the PostgreSQL statements read with json_to_recordset (datetimes as text)."""
    return json.dumps([dict(zip(keys, row)) for row in rows], default=str, ensure_ascii=False)


def _utc_text(value) -> str:
    """What Django's SQLite backend stores for an aware datetime when the database is in UTC."""
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    return str(value.replace(tzinfo=None))


def prepares(raw) -> bool:
    """Whether the project allows prepared statements on this psycopg connection: DATABASES
    OPTIONS "prepare_threshold" set. Django's default (None) keeps PgBouncer's transaction
    pooling working; then the statements are parsed and planned every time (PostgreSQL spent
    240-252 µs of CPU per call that way against 192-196 prepared, BENCHMARKS.md)."""
    return getattr(raw, "prepare_threshold", None) is not None


def hot(db) -> HotSQL | None:
    """The hot path's statements for this Django connection, or None (vendor without RETURNING)."""
    if db.vendor not in ("sqlite", "postgresql"):
        return None
    db.ensure_connection()
    bound = getattr(db, "_mcp_hotsql", None)
    if bound is None or bound.raw is not db.connection:
        bound = db._mcp_hotsql = HotSQL(db)
    return bound
