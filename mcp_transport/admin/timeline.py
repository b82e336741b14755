"""A stream's or a task's life as a small inline SVG, drawn on the server for the admin's pages.

Two lanes over one time axis, from the creation to the end (or now):

- stream page, connections: a bar per connection (the initial POST, each resumption or GET),
  ended by a red mark with the reason it closed (policy, tool, admin, client, replaced...), or
  running on to the right edge while a live worker holds it; each resumption starts with a
  green mark.
- stream page, events: a tick per event (priming grey, messages blue, the final one green and
  taller), sampled evenly by sequence number to at most `MAX_EVENTS`, so a stream of a million
  events costs one indexed query of a few hundred rows.
- task page (`collect_task`), status: one bar from the task's creation to its end (or on to
  the right edge while it works), ended by a red mark if it failed or was cancelled.
- task page, events: the task's own events (progress and log messages, questions to the client,
  status changes, its end), the newest `MAX_EVENTS`.

Everything is escaped; every mark has a <title> tooltip.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from xml.sax.saxutils import escape

from django.utils import timezone

from ..models import Event, Stream, StreamConnection, Task, TaskEvent
from .display import summarize

MAX_EVENTS = 500
MAX_CONNECTIONS = 500
WIDTH = 960
LEFT = 96
RIGHT = 24
CONN_Y = 26
EVENT_Y = 78
AXIS_Y = 116
HEIGHT = 140
ENDED_NORMALLY = {"completed", "ended", ""}
# An event's tick by kind: a stream's events (`Event.Kind`), and what a task's events are (`task_line`).
TICK_COLORS = {Event.Kind.PRIMING: "#999999", Event.Kind.MESSAGE: "#417690", Event.Kind.FINAL: "#2e7d32",
               "status": "#c77c02", "question": "#8e44ad"}
TALL_TICKS = {Event.Kind.FINAL, "status", "question"}


@dataclass
class Span:
    start: datetime
    end: datetime
    worker: str = ""
    reason: str = ""
    resumed_from: int | None = None
    live: bool = False
    initial: bool = False
    logged: bool = True
    what: str = ""  # what the bar is, when it is not one of a stream's connections
    live_label: str = "connected now"
    until: str = ""  # how the bar ends, when it is not one of a stream's connections


@dataclass
class Tick:
    seq: int
    kind: str
    at: datetime
    title: str = ""


@dataclass
class Timeline:
    start: datetime
    end: datetime
    spans: list[Span]
    ticks: list[Tick]
    event_total: int
    connection_total: int
    lanes: tuple[str, str] = ("connections", "events")
    subject: str = "Stream timeline"
    partial: str = "drawn (sampled by seq)"


def first_seq(primed: bool) -> int:
    return 0 if primed else 1


def event_count(stream: Stream, primed: bool) -> int:
    """Events are never deleted one by one and their seqs have no gaps: the count is a stored counter."""
    return stream.last_seq + (1 if primed else 0)


def sample_seqs(first: int, last: int, limit: int = MAX_EVENTS) -> list[int]:
    """At most `limit` seqs from first..last, evenly spread, both ends included."""
    total = last - first + 1
    if total <= 0:
        return []
    if total <= limit:
        return list(range(first, last + 1))
    step = (total - 1) / (limit - 1)
    return sorted({first + round(i * step) for i in range(limit)})


def held(stream: Stream, alive_workers=None) -> bool:
    """An open stream whose connection a worker holds (one of `alive_workers`, if given)."""
    return stream.status == Stream.Status.OPEN and bool(stream.connected_worker) and (
        alive_workers is None or stream.connected_worker in alive_workers)


def collect(stream: Stream, primed: bool, now: datetime | None = None, alive_workers=None) -> Timeline:
    """Read what the picture needs: two indexed queries (connections, sampled events). Given
    `alive_workers` (`Cutoffs.running_workers`), a connection held by another worker is not live."""
    now = now or timezone.now()
    end = stream.finished_at or now
    total_events = event_count(stream, primed)
    seqs = sample_seqs(first_seq(primed), stream.last_seq) if total_events else []
    rows = Event.objects.filter(stream=stream, seq__in=seqs).order_by("seq").values_list("seq", "kind", "created_at")
    ticks = [Tick(seq, kind, at) for seq, kind, at in rows] if seqs else []

    connections = StreamConnection.objects.filter(stream=stream)
    logged = list(connections.order_by("-opened_at", "-id").values_list(
        "opened_at", "closed_at", "worker", "close_reason", "resumed_from")[:MAX_CONNECTIONS])
    logged.reverse()
    connection_total = len(logged)
    if connection_total == MAX_CONNECTIONS:
        connection_total = connections.count()

    spans = []
    for index, (opened, closed, worker, reason, resumed_from) in enumerate(logged):
        is_last = index == len(logged) - 1
        live = closed is None and is_last and held(stream, alive_workers)
        spans.append(Span(opened, closed or (now if live else end), worker, reason, resumed_from, live=live))
    if stream.kind == Stream.Kind.REQUEST and not any(s.resumed_from is None for s in spans) \
            and connection_total <= MAX_CONNECTIONS:
        # The initial POST connection is logged only if it ended before the stream did.
        resumed = [s.start for s in spans if s.resumed_from is not None]
        if stream.finished_at and not resumed:
            initial_end, live = stream.finished_at, False
        elif resumed:
            initial_end, live = resumed[0], False
        elif held(stream, alive_workers):
            initial_end, live = now, True
        else:
            initial_end, live = stream.last_event_at or now, False
        spans.insert(0, Span(stream.created_at, initial_end, stream.worker, "", None, live=live, initial=True,
                             logged=False))
    for span in spans:
        if span.resumed_from is None and stream.kind == Stream.Kind.REQUEST:
            span.initial = True
    start = min([stream.created_at, *(s.start for s in spans), *(t.at for t in ticks)])
    end = max([end, *(s.end for s in spans), *(t.at for t in ticks)])
    return Timeline(start, end, spans, ticks, total_events, connection_total)


def _fmt_time(value: datetime) -> str:
    return timezone.localtime(value).strftime("%H:%M:%S")


def _fmt_duration(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(timeline: Timeline) -> str:
    """The SVG markup (a string to mark safe: every text in it is escaped here)."""
    span_seconds = max((timeline.end - timeline.start).total_seconds(), 0.001)
    plot = WIDTH - LEFT - RIGHT

    def x(at: datetime) -> float:
        return round(LEFT + (at - timeline.start).total_seconds() / span_seconds * plot, 1)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="mcp-timeline" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(timeline.subject)}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="8" y="{CONN_Y + 13}" fill="#555">{escape(timeline.lanes[0])}</text>',
        f'<text x="8" y="{EVENT_Y + 13}" fill="#555">{escape(timeline.lanes[1])}</text>',
        f'<line x1="{LEFT}" y1="{AXIS_Y}" x2="{WIDTH - RIGHT}" y2="{AXIS_Y}" stroke="#999"/>',
    ]
    for i in range(5):
        at = timeline.start + (timeline.end - timeline.start) * i / 4
        tx = x(at)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        label = _fmt_time(at) if i in (0, 4) else "+" + _fmt_duration(at - timeline.start)
        out.append(f'<line x1="{tx}" y1="{CONN_Y - 6}" x2="{tx}" y2="{AXIS_Y + 4}" stroke="#eee"/>')
        out.append(f'<text x="{tx}" y="{AXIS_Y + 16}" text-anchor="{anchor}" fill="#666">{escape(label)}</text>')

    last_label_x = -1000.0
    for index, span in enumerate(timeline.spans):
        x1, x2 = x(span.start), x(span.end)
        width = max(x2 - x1, 2.0)
        what = span.what or ("initial POST" if span.initial else (
            f"resumed from seq {span.resumed_from}" if span.resumed_from is not None else "GET"))
        until = span.until or ("held now" if span.live else f"closed: {span.reason or 'with the stream'}")
        tip = f"{what} on {span.worker or '?'}, {_fmt_time(span.start)} to " \
              f"{'now' if span.live else _fmt_time(span.end)} ({_fmt_duration(span.end - span.start)}), {until}"
        fill = "#44aa55" if span.live else ("#79aec8" if index % 2 == 0 else "#5b8fb0")
        cls = "conn live" if span.live else "conn"
        out.append(f'<rect class="{cls}" x="{x1}" y="{CONN_Y}" width="{round(width, 1)}" height="18" rx="2" '
                   f'fill="{fill}"><title>{escape(tip)}</title></rect>')
        if span.resumed_from is not None:
            out.append(f'<path class="reconnect" d="M{x1} {CONN_Y - 2} l-4 -7 h8 z" fill="#2e7d32">'
                       f'<title>{escape("reconnect: " + tip)}</title></path>')
        if not span.live and span.reason not in ENDED_NORMALLY:
            out.append(f'<line class="disconnect" x1="{x2}" y1="{CONN_Y - 4}" x2="{x2}" y2="{CONN_Y + 22}" '
                       f'stroke="#ba2121" stroke-width="2"><title>{escape("disconnect: " + tip)}</title></line>')
            if x2 - last_label_x > 48:
                out.append(f'<text class="reason" x="{x2 + 2}" y="{CONN_Y + 32}" fill="#ba2121">'
                           f'{escape(span.reason)}</text>')
                last_label_x = x2
        if span.live:
            out.append(f'<text x="{min(x2 + 3, WIDTH - RIGHT)}" y="{CONN_Y - 3}" text-anchor="end" '
                       f'fill="#2e7d32">{escape(span.live_label)}</text>')

    for tick in timeline.ticks:
        tx = x(tick.at)
        top = EVENT_Y - 4 if tick.kind in TALL_TICKS else EVENT_Y
        bottom = EVENT_Y + 18
        title = tick.title or f"event {tick.seq} ({tick.kind}) at {_fmt_time(tick.at)}"
        out.append(f'<line class="event {escape(tick.kind)}" x1="{tx}" y1="{top}" x2="{tx}" y2="{bottom}" '
                   f'stroke="{TICK_COLORS.get(tick.kind, "#417690")}" stroke-width="1">'
                   f'<title>{escape(title)}</title></line>')
    shown = len(timeline.ticks)
    note = f"{timeline.event_total} events" if shown == timeline.event_total else \
        f"{shown} of {timeline.event_total} events {timeline.partial}"
    if len(timeline.spans) < timeline.connection_total:
        note += f"; the last {len(timeline.spans)} of {timeline.connection_total} connections"
    out.append(f'<text x="{WIDTH - RIGHT}" y="{EVENT_Y + 32}" text-anchor="end" fill="#666">{escape(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def svg(stream: Stream, primed: bool, now: datetime | None = None, alive_workers=None) -> str:
    return render(collect(stream, primed, now, alive_workers))



# A task's events: what is stored against it (`TaskEvent`).


@dataclass
class TaskEventLine:
    event: TaskEvent
    kind: str  # a key of TICK_COLORS
    summary: str


TASK_LIVE = {Task.Status.WORKING: "working now", Task.Status.INPUT_REQUIRED: "waiting for input now"}


def _loaded(payload: str):
    try:
        return json.loads(payload) if len(payload) < 65536 else None
    except ValueError:
        return None


def task_line(event: TaskEvent) -> TaskEventLine:
    """An event's tick and one line: message (progress, log), question, status (a change while it
    runs), final (its end: completed, failed or cancelled)."""
    body = _loaded(event.payload)
    if event.kind == TaskEvent.Kind.STATUS and isinstance(body, dict):
        status = str(body.get("status", ""))
        summary = f"status {status}" + (f": {body['statusMessage']}" if body.get("statusMessage") else "") \
            + (f" (answered {', '.join(map(str, body['answered']))})" if body.get("answered") else "")
        return TaskEventLine(event, "status" if status in Task.ACTIVE else Event.Kind.FINAL, summary)
    if event.kind == TaskEvent.Kind.QUESTION and isinstance(body, dict):
        asked = [f"{key}: {request.get('method', '?')}" for key, request in body.items() if isinstance(request, dict)]
        return TaskEventLine(event, "question", "asks " + ", ".join(asked))
    return TaskEventLine(event, Event.Kind.MESSAGE, summarize(event.payload))


def task_events(task: Task, limit: int = MAX_EVENTS) -> tuple[list[TaskEventLine], int]:
    """The newest `limit` events of a task, oldest first, and how many it has: one query on the
    (task, id) index, and a count only past `limit`."""
    rows = TaskEvent.objects.filter(task=task)
    events = list(rows.order_by("-id")[:limit])
    events.reverse()
    total = len(events) if len(events) < limit else rows.count()
    return [task_line(e) for e in events], total


def collect_task(task: Task, events: list[TaskEventLine], total: int, now: datetime | None = None) -> Timeline:
    """A task's timeline from its row (status, times, worker) and its events (`task_events`)."""
    now = now or timezone.now()
    end = task.finished_at or now
    live = not task.terminal
    ended = task.status in (Task.Status.FAILED, Task.Status.CANCELLED)
    span = Span(task.created_at, end, task.worker, task.status if ended else "", live=live,
                what=f"{task.tool or task.method} ({task.runner} runner)",
                live_label=TASK_LIVE.get(task.status, ""),
                until=TASK_LIVE.get(task.status) or f"ended {task.status}"
                + (f": {task.status_message}" if task.status_message else ""))
    ticks = [Tick(e.event.pk, e.kind, e.event.created_at, f"{_fmt_time(e.event.created_at)}: {e.summary}")
             for e in events]
    start = min([task.created_at, *(t.at for t in ticks)])
    end = max([end, *(t.at for t in ticks)])
    return Timeline(start, end, [span], ticks, total, 1, lanes=("status", "events"), subject="Task timeline",
                    partial="drawn (the newest)")


def task_svg(task: Task, events: list[TaskEventLine], total: int, now: datetime | None = None) -> str:
    return render(collect_task(task, events, total, now))
