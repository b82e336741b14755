"""`manage.py mcp_status`: the live state of the workers and their streams, from the database.

Run it against the database the workers use (e.g. `--settings example_project.settings_scaled`).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.core.management.base import BaseCommand
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from mcp_transport.conf import mcp_settings
from mcp_transport.models import Cutoffs, ModernRequest, Session, Stream, Task, Worker

# A worker's state is its liveness (`Worker.liveness_at`), or unknown: named by streams, no row.
ALIVE, STOPPING, STALE = Worker.Liveness.ALIVE, Worker.Liveness.STOPPING, Worker.Liveness.STALE
UNKNOWN = "unknown"


def _iso(value):
    return value.isoformat() if value is not None else None


def _seconds(delta: timedelta) -> float:
    return round(delta.total_seconds(), 1)


def collect(*, show_all: bool = False, limit: int = 50) -> dict:
    """Everything the command shows, as plain data (the `--json` output)."""
    cutoffs = Cutoffs.at()
    now = cutoffs.now
    lease_seconds = float(mcp_settings.LEASE_SECONDS)

    open_streams = Stream.objects.open().order_by()
    requests = open_streams.filter(kind=Stream.Kind.REQUEST)
    orphaned = Stream.orphaned_q(cutoffs)
    running = {
        row["worker"]: row
        for row in requests.values("worker").annotate(
            n=Count("id"), earliest=Min("lease_expires_at"), latest=Max("lease_expires_at"),
            expired=Count("id", filter=orphaned),
        )
    }
    connected: dict[str, dict[str, int]] = {}
    for row in open_streams.exclude(connected_worker="").values("connected_worker", "kind").annotate(n=Count("id")):
        connected.setdefault(row["connected_worker"], {})[row["kind"]] = row["n"]
    rows = {w.id: w for w in Worker.objects.all()}

    def stream_in(state) -> Q:
        # A connection counts only on a worker that is not stale: the others' connections are gone.
        return Stream.state_q(state, cutoffs, alive_workers=cutoffs.running_workers)

    resumable = dict(open_streams.filter(stream_in(Stream.State.RESUMABLE)).values("worker").annotate(n=Count("id"))
                     .values_list("worker", "n"))

    modern: dict[str, dict[str, int]] = {}
    for row in ModernRequest.objects.order_by().values("worker", "kind").annotate(n=Count("id")):
        modern.setdefault(row["worker"], {})[row["kind"]] = row["n"]

    ids = set(rows) | set(running) | set(connected) | set(resumable) | set(modern)
    ids.discard("")
    workers, hidden = [], 0
    for worker_id in ids:
        row = rows.get(worker_id)
        state = row.liveness_at(cutoffs) if row is not None else UNKNOWN
        run = running.get(worker_id, {})
        held = connected.get(worker_id, {})
        held_modern = modern.get(worker_id, {})
        busy = run.get("n", 0) or sum(held.values()) or resumable.get(worker_id, 0) or sum(held_modern.values())
        if state in (STALE, UNKNOWN) and not busy and not show_all:
            hidden += 1
            continue
        in_flight = list(
            requests.filter(worker=worker_id).order_by("lease_expires_at", "id")
            .values("id", "session_id", "method", "tool_name", "request_id", "lease_expires_at",
                    "connected_worker", "last_seq", "reconnects")[:limit]
        )
        workers.append({
            "id": worker_id,
            "host": row.host if row else "",
            "pid": row.pid if row else None,
            "started_at": _iso(row.started_at) if row else None,
            "heartbeat_at": _iso(row.heartbeat_at) if row else None,
            "heartbeat_age_seconds": _seconds(now - row.heartbeat_at) if row else None,
            "state": state,
            "requests_in_flight": run.get("n", 0),
            "leases": {
                "earliest_expiry": _iso(run.get("earliest")),
                "latest_expiry": _iso(run.get("latest")),
                "expired": run.get("expired", 0),
            },
            "streams_connected": {
                "request": held.get(Stream.Kind.REQUEST, 0),
                "standalone": held.get(Stream.Kind.STANDALONE, 0),
            },
            "streams_resumable": resumable.get(worker_id, 0),
            "modern": {
                "listen_streams": held_modern.get(ModernRequest.Kind.LISTEN, 0),
                "long_calls": held_modern.get(ModernRequest.Kind.CALL, 0),
            },
            "requests": [
                {
                    "stream": r["id"],
                    "session": r["session_id"],
                    "method": r["method"],
                    "tool": r["tool_name"],
                    "request_id": r["request_id"],
                    "lease_expires_at": _iso(r["lease_expires_at"]),
                    "lease_remaining_seconds": (
                        _seconds(r["lease_expires_at"] - now) if r["lease_expires_at"] else None
                    ),
                    "connected_worker": r["connected_worker"],
                    "events": r["last_seq"],
                    "reconnects": r["reconnects"],
                }
                for r in in_flight
            ],
        })
    order = {ALIVE: 0, STOPPING: 1, STALE: 2, UNKNOWN: 3}
    workers.sort(key=lambda w: (order[w["state"]], w["host"], w["started_at"] or "", w["id"]))

    totals = open_streams.aggregate(
        open=Count("id"),
        connected=Count("id", filter=stream_in(Stream.State.CONNECTED)),
        resumable=Count("id", filter=stream_in(Stream.State.RESUMABLE)),
        orphaned=Count("id", filter=orphaned),
        # Connected as the row says, but not on a worker that is alive: that connection is gone.
        held_by_gone_workers=Count("id", filter=~Q(connected_worker="") & ~stream_in(Stream.State.CONNECTED)),
    )
    totals["replayable_finished"] = Stream.objects.replayable(cutoffs).count()
    on_running = ModernRequest.objects.on_running_workers(cutoffs).order_by()
    modern_totals = {
        "listen_streams": on_running.filter(kind=ModernRequest.Kind.LISTEN).count(),
        "long_calls": on_running.filter(kind=ModernRequest.Kind.CALL).count(),
    }
    return {
        "generated_at": _iso(now),
        "lease_seconds": lease_seconds,
        "sessions_active": Session.objects.active(cutoffs).count(),
        "modern": modern_totals,
        "tasks": {status: 0 for status in Task.Status.values} | dict(
            Task.objects.order_by().values("status").annotate(n=Count("id")).values_list("status", "n")),
        "workers": workers,
        "workers_hidden": hidden,
        "streams": totals,
    }


def _age(seconds) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"


def _leases(worker: dict, now) -> str:
    leases = worker["leases"]
    if not worker["requests_in_flight"]:
        return "-"
    if leases["expired"]:
        return f"{leases['expired']} expired"
    if not leases["earliest_expiry"]:
        return "-"
    return f"next in {(datetime.fromisoformat(leases['earliest_expiry']) - now).total_seconds():.1f}s"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [headers, *rows]]


def render(status: dict) -> str:
    now = datetime.fromisoformat(status["generated_at"])
    lines = [
        (f"MCP transport status at {timezone.localtime(now):%Y-%m-%d %H:%M:%S %Z}; "
         f"a worker silent for over LEASE_SECONDS ({status['lease_seconds']:g}s) is stale."),
        "",
    ]
    rows = []
    for w in status["workers"]:
        held = w["streams_connected"]
        rows.append([
            w["id"], w["host"] or "-", w["pid"] if w["pid"] is not None else "-", _age(w["heartbeat_age_seconds"]),
            w["state"], w["requests_in_flight"], _leases(w, now),
            f"{held['request']} + {held['standalone']} GET" if held["standalone"] else held["request"],
            w["streams_resumable"], w["modern"]["listen_streams"], w["modern"]["long_calls"],
        ])
    if rows:
        lines += _table(["WORKER", "HOST", "PID", "HEARTBEAT", "STATE", "IN FLIGHT", "LEASES", "CONNECTED",
                         "RESUMABLE", "LISTENING", "LONG CALLS"], rows)
    else:
        lines.append("No workers (a worker appears with its first request).")
    if status["workers_hidden"]:
        lines.append(f"(not shown: {status['workers_hidden']} stale worker(s) with nothing left on them; "
                     "--all shows them)")
    s = status["streams"]
    lines += [
        "",
        (f"Sessions active: {status['sessions_active']}.  Streams open: {s['open']} "
         f"(connected {s['connected']}, resumable {s['resumable']}); finished and still replayable: "
         f"{s['replayable_finished']}."),
        (f"2026-07-28: listen streams open: {status['modern']['listen_streams']}; calls running for over a second: "
         f"{status['modern']['long_calls']}."),
        "Tasks: " + ", ".join(f"{label} {status['tasks'][value]}" for value, label in Task.Status.choices) + ".",
    ]
    if s["orphaned"]:
        lines.append(f"Requests whose lease expired (their worker is gone; the next heartbeat or resume fails "
                     f"them with reason worker_lost): {s['orphaned']}.")
    if s["held_by_gone_workers"]:
        lines.append(f"Open streams marked connected to a stale or unknown worker (that connection is gone): "
                     f"{s['held_by_gone_workers']}.")
    requests = [(w["id"], r) for w in status["workers"] for r in w["requests"]]
    if requests:
        lines += ["", "In-flight requests:"]
        lines += _table(
            ["STREAM", "WORKER", "SESSION", "REQUEST", "ID", "LEASE", "CONNECTED TO", "EVENTS", "RECONNECTS"],
            [[r["stream"], worker, r["session"][:12], r["tool"] or r["method"], r["request_id"],
              "-" if r["lease_remaining_seconds"] is None else f"{r['lease_remaining_seconds']:+.1f}s",
              r["connected_worker"] or "(client away)", r["events"], r["reconnects"]]
             for worker, r in requests],
        )
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Show the live state of the MCP transport: workers (heartbeat, alive or stale by LEASE_SECONDS), "
        "their in-flight requests and leases, the open and resumable streams of each worker, and its "
        "2026-07-28 listen streams and long calls."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON instead of tables.")
        parser.add_argument("--all", action="store_true", help="Also list stale workers with nothing left on them.")
        parser.add_argument("--limit", type=int, default=50,
                            help="In-flight requests listed per worker (default 50; the counts are always complete).")

    def handle(self, *args, **options):
        status = collect(show_all=options["all"], limit=max(options["limit"], 0))
        if options["json"]:
            self.stdout.write(json.dumps(status, indent=2))
        else:
            self.stdout.write(render(status))
