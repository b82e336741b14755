"""The database side of the bench, run with Django set up on the served project's settings:

    python -m bench.dbtool count
    python -m bench.dbtool fill --rows 990000 [--per-stream 1000] [--analyze]
    python -m bench.dbtool stream-times --stream 12

Each prints one JSON line. `fill` adds finished streams of a filler session with bulk SQL
(one INSERT ... SELECT over a generated series), so a million events take seconds, not hours.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILLER_PAYLOAD = (
    '{"jsonrpc":"2.0","method":"notifications/progress","params":'
    '{"progressToken":"filler","progress":1,"total":1000,"message":"step 1"}}'
)


def _setup():
    import django

    django.setup()


def count() -> dict:
    from mcp_transport.models import Event

    return {"events": Event.objects.count()}


def fill(rows: int, per_stream: int = 1000, analyze: bool = False) -> dict:
    """Add about `rows` events (whole streams of `per_stream`) to the events table."""
    from django.db import connection, transaction
    from django.utils import timezone

    from mcp_transport.models import Event, Session, Stream

    t0 = time.monotonic()
    streams = max(1, -(-rows // per_stream))
    now = timezone.now()
    session_id = f"bench-filler-{secrets.token_hex(6)}"
    quote = connection.ops.quote_name
    event_table, stream_table = quote(Event._meta.db_table), quote(Stream._meta.db_table)
    created = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic():
        Session.objects.create(id=session_id, protocol_version="2025-11-25", client_name="bench-filler")
        Stream.objects.bulk_create(
            [Stream(session_id=session_id, kind=Stream.Kind.REQUEST, method="tools/call", tool_name="progress",
                    request_id=str(i), status=Stream.Status.COMPLETED, last_seq=per_stream, last_event_at=now,
                    worker="bench-filler", created_at=now, finished_at=now) for i in range(streams)],
            batch_size=500,
        )
        columns = "stream_id, seq, kind, payload, created_at"
        if connection.vendor == "postgresql":
            sql = (
                f"INSERT INTO {event_table} ({columns}) "
                f"SELECT s.id, n.i, %s, %s, %s FROM {stream_table} s CROSS JOIN generate_series(1, %s) AS n(i) "
                f"WHERE s.session_id = %s ORDER BY s.id, n.i"
            )
            params = [Event.Kind.MESSAGE, FILLER_PAYLOAD, created, per_stream, session_id]
        else:
            sql = (
                f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
                f"INSERT INTO {event_table} ({columns}) "
                f"SELECT s.id, n.i, %s, %s, %s FROM {stream_table} s CROSS JOIN n WHERE s.session_id = %s"
            )
            params = [per_stream, Event.Kind.MESSAGE, FILLER_PAYLOAD, created, session_id]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    if analyze:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {event_table}")
    return {"added": streams * per_stream, "streams": streams, "seconds": round(time.monotonic() - t0, 2),
            "analyzed": analyze, **count()}


def stream_times(stream_id: int) -> dict:
    """When a stream was opened, and when its first and last events were stored."""
    from django.db.models import Count, Max, Min

    from mcp_transport.models import Event, Stream

    stream = Stream.objects.filter(pk=stream_id).values("created_at", "status", "last_seq").first()
    if stream is None:
        return {"error": f"no stream {stream_id}"}
    agg = Event.objects.filter(stream_id=stream_id).aggregate(n=Count("id"), first=Min("created_at"),
                                                              last=Max("created_at"))
    span = (agg["last"] - stream["created_at"]).total_seconds() if agg["last"] else None
    return {"events": agg["n"], "status": stream["status"], "last_seq": stream["last_seq"],
            "store_span_s": span, "first_to_last_s": (agg["last"] - agg["first"]).total_seconds() if agg["n"] else None}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.dbtool")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("count")
    p = sub.add_parser("fill")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--per-stream", type=int, default=1000)
    p.add_argument("--analyze", action="store_true")
    p = sub.add_parser("stream-times")
    p.add_argument("--stream", type=int, required=True)
    args = parser.parse_args(argv)
    _setup()
    if args.command == "count":
        out = count()
    elif args.command == "fill":
        out = fill(args.rows, args.per_stream, args.analyze)
    else:
        out = stream_times(args.stream)
    print(json.dumps(out))


class DBTool:
    """Runs `python -m bench.dbtool` with a served project's environment (its settings and database)."""

    def __init__(self, env: dict[str, str], vendor: str = "sqlite"):
        self.env = env
        self.vendor = vendor

    def run(self, *args: str, timeout: float = 600) -> dict:
        env = {**os.environ, **self.env}
        done = subprocess.run([sys.executable, "-m", "bench.dbtool", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"bench.dbtool {' '.join(args)} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def count(self) -> int:
        return self.run("count")["events"]

    def fill(self, rows: int, analyze: bool | None = None) -> dict:
        if analyze is None:
            analyze = self.vendor == "postgres"  # what autovacuum would soon do; SQLite has no such thing
        return self.run("fill", "--rows", str(rows), *(["--analyze"] if analyze else []))

    def stream_times(self, stream_id: int) -> dict:
        return self.run("stream-times", "--stream", str(stream_id))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
