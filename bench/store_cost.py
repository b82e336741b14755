"""The database thread's cost per request, without HTTP: `python bench/store_cost.py [--db postgres]`.

Runs the store's writes the way the database thread does (N requests per transaction) and
prints microseconds per request for:

  answered  a quick request: its stream, priming event and response in one call (the hot path)
  streamed  a slower one: the stream with its priming event, then the response appended
  orm       the same two writes through the ORM (what vendors without RETURNING get)

Uses a fresh database (a temporary SQLite file, or a temporary PostgreSQL database).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

RESULT = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--batches", default="1,8,32", help="requests per transaction, comma-separated")
    args = parser.parse_args(argv)

    from bench.server import databases

    dbs = databases(args.db)
    env = dbs.new()
    os.environ.update({"DJANGO_SETTINGS_MODULE": "bench.settings", **env})
    try:
        import django

        django.setup()
        from django.db import connection, transaction

        from mcp_transport.models import Session
        from mcp_transport.storage import store

        Session.objects.create(id="bench", server="default", protocol_version="2025-11-25")

        def answered(i):
            store.open_request_stream("bench", method="tools/call", request_id=str(i), tool_name="echo", prime=True,
                                      policy="never", retry_ms=1000, writes=[([RESULT], "completed")])

        def streamed(i):
            stream_id, _ = store.open_stream("bench", method="tools/call", request_id=str(i), tool_name="echo",
                                             prime=True, policy="never", retry_ms=1000)
            store.append(stream_id, [RESULT], finish="completed")

        def measure(write, batch):
            start = time.perf_counter()
            for first in range(0, args.requests, batch):
                with transaction.atomic():
                    for i in range(first, min(first + batch, args.requests)):
                        write(i)
            return (time.perf_counter() - start) / args.requests * 1e6

        def choose(chosen):
            """Make the connection choose its store again, with `chosen` (None: as it would)."""
            store.implementation = chosen or implementation
            connection.close()

        implementation = store.implementation
        print(f"database: {connection.vendor}, store: {type(store.current()).__name__}; "
              "microseconds per request (lower is better)\n")
        print("| requests per transaction | answered | streamed | orm |")
        print("|---|---|---|---|")
        for batch in [int(b) for b in args.batches.split(",")]:
            row = [measure(answered, batch), measure(streamed, batch)]
            choose(lambda db: store.Store)
            try:
                row.append(measure(streamed, batch))
            finally:
                choose(None)
            print(f"| {batch} | " + " | ".join(f"{value:,.0f}" for value in row) + " |")
        connection.close()
    finally:
        dbs.drop(env)
        dbs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
