"""Prometheus instruments (the `metrics` extra: prometheus-client), counted where things happen.

Counters and histograms are this process's, and so is the gauge of the connections it holds.
With PROMETHEUS_MULTIPROC_DIR set before the process starts, prometheus-client keeps their values
in files there, and a scrape of any worker adds up every process on the host (`scrape.py`). What
the database knows (sessions active, streams resumable, tasks by status) is no instrument: a scrape
reads it from the tables (`scrape.StateCollector`), so several workers never count it twice.

Off (`MCP_TRANSPORT["METRICS"] = False`) or without prometheus-client, every instrument is `OFF`,
whose methods do nothing: nothing is registered, and code that does more than one increment checks
`on` first. Call sites read the instruments as attributes of this module (`metrics.tool_calls`),
never import them by name: `configure()` rebinds them when the setting changes.

Labels take values from fixed sets only (an outcome, a reason, a kind) and a declared tool's
name; never a session, stream, principal, or a name a client made up.
"""
from __future__ import annotations

import os
import time

from django.core.signals import setting_changed
from django.dispatch import receiver

from .conf import SETTING_NAME, mcp_settings

try:
    import prometheus_client
except ImportError:  # the `metrics` extra is not installed
    prometheus_client = None

UNKNOWN_TOOL = "(unknown)"  # tool names are [A-Za-z0-9_.-]: no declared tool is called that
TOOL_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
REPLAY_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class _Off:
    """Every instrument while metrics are off."""

    def labels(self, *args, **kwargs):
        return self

    def inc(self, amount=1):
        pass

    def dec(self, amount=1):
        pass

    def observe(self, amount):
        pass


OFF = _Off()

# (attribute, kind, name, documentation, labels, options): the README's table says the same.
INSTRUMENTS = (
    ("sessions_created", "Counter", "mcp_sessions_created", "Sessions created by initialize (2025-11-25).", (), {}),
    ("sessions_ended", "Counter", "mcp_sessions_ended", "Sessions ended: by the client's DELETE or an operator.",
     ("by",), {}),
    ("events_stored", "Counter", "mcp_events_stored",
     "SSE events written to the table (priming events, messages, responses, errors ending a stream).", (), {}),
    ("connections", "Gauge", "mcp_connections",
     "Connections this process holds: 2025-11-25 SSE streams, 2026-07-28 listen streams.", ("kind",),
     {"multiprocess_mode": "livesum"}),
    ("connections_closed", "Counter", "mcp_connections_closed",
     "2025-11-25 SSE connections ended, by reason (completed, client, policy, tool, admin, replaced, ...).",
     ("reason",), {}),
    ("reconnects", "Counter", "mcp_reconnects", "Resumptions asked for (GET with a Last-Event-ID).", (), {}),
    ("early_reconnects", "Counter", "mcp_early_reconnects",
     "Resumptions that came back before the retry interval: tolerated, or refused (429).", ("outcome",), {}),
    ("replay_seconds", "Histogram", "mcp_replay_seconds",
     "From a resumption's request to its replayed events written (its count: the replays).", (),
     {"buckets": REPLAY_SECONDS_BUCKETS}),
    ("replayed_events", "Counter", "mcp_replayed_events", "Events resumptions sent from the table.", (), {}),
    ("tool_calls", "Counter", "mcp_tool_calls",
     "tools/call by tool and outcome (ok, tool_error, error, cancelled, input_required).", ("tool", "outcome"), {}),
    ("tool_call_seconds", "Histogram", "mcp_tool_call_seconds", "How long tools/call took, by tool.", ("tool",),
     {"buckets": TOOL_SECONDS_BUCKETS}),
    ("leases_expired", "Counter", "mcp_leases_expired",
     "Requests and tasks failed because their worker's lease ran out (worker_lost).", ("kind",), {}),
    ("listen_streams_opened", "Counter", "mcp_listen_streams_opened", "2026-07-28 subscriptions/listen streams "
     "opened.", (), {}),
    ("tasks_created", "Counter", "mcp_tasks_created", "Calls that became tasks (either era).", (), {}),
)

on = False
sessions_created = sessions_ended = events_stored = connections = connections_closed = OFF
reconnects = early_reconnects = replay_seconds = replayed_events = tool_calls = tool_call_seconds = OFF
leases_expired = listen_streams_opened = tasks_created = OFF

_made: dict = {}
_children: dict = {}


def available() -> bool:
    return prometheus_client is not None


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")


def configure():
    """Bind the instruments, or OFF, for the current setting (at startup, on setting_changed).
    They are made once, in prometheus-client's default registry, where django-prometheus and any
    other exporter of that registry find them."""
    global on
    try:
        wanted = mcp_settings.METRICS is True
    except Exception:  # a malformed MCP_TRANSPORT: the system checks say what is wrong
        wanted = False
    on = wanted and available()
    if on and not _made:
        for attribute, kind, name, documentation, labels, options in INSTRUMENTS:
            _made[attribute] = getattr(prometheus_client, kind)(name, documentation, labels, **options)
    globals().update({attribute: _made[attribute] if on else OFF for attribute, *_ in INSTRUMENTS})


@receiver(setting_changed)
def _reconfigure(*, setting, **kwargs):
    if setting == SETTING_NAME:
        configure()


def labeled(instrument, *values):
    """`instrument.labels(*values)`, kept: prometheus-client's own lookup takes a lock every time.
    The label values come from fixed sets and declared tools, so this stays small."""
    if instrument is OFF:
        return OFF
    key = (instrument, values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = instrument.labels(*values)
    return child


def tool_label(server, params) -> str:
    """A declared tool's name; anything else one label, so clients cannot add series."""
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) and name in server.tools else UNKNOWN_TOOL


def outcome(result) -> str:
    """A handler's result as an outcome label: input_required, tool_error or ok."""
    if isinstance(result, dict):
        if result.get("resultType") == "input_required":
            return "input_required"
        if result.get("isError") is True:
            return "tool_error"
    return "ok"


def tool_called(tool: str, outcome: str, seconds: float):
    """A tools/call ended (`execution.observe` times it)."""
    if on:
        labeled(tool_calls, tool, outcome).inc()
        labeled(tool_call_seconds, tool).observe(seconds)


def replayed(events: int, started: float):
    """A resumption found its stream and wrote its replay (`started`: perf_counter at its request)."""
    if on:
        replay_seconds.observe(time.perf_counter() - started)
        replayed_events.inc(events)


def process_ending():
    """A graceful stop: this process's live gauges leave the multiprocess sums."""
    if on and multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())


def forget_dead_processes():
    """Live gauges of processes that ended without `process_ending` (killed) leave the sums too.
    Their counters stay: totals never go back. Process ids are this host's, as prometheus-client's
    files already assume."""
    from prometheus_client import multiprocess

    directory = multiprocess_dir()
    for pid in {name.rsplit("_", 1)[-1][:-3] for name in os.listdir(directory)
                if name.startswith("gauge_live") and name.endswith(".db")}:
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            try:
                multiprocess.mark_process_dead(int(pid), directory)
            except FileNotFoundError:
                pass  # another scrape was first


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
