"""The counts a page shows, for all its rows at once: one query per page, never one per row.

Event counts come from the stored counter (`Stream.last_seq`, see `timeline.event_count`) and
from which streams opened with a priming event (seq 0).
"""
from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q, Sum

from ..models import Event, Stream
from . import timeline


def primed_streams(stream_ids) -> set[int]:
    """Which of these streams opened with a priming event (seq 0): one indexed query."""
    if not stream_ids:
        return set()
    rows = Event.objects.filter(stream_id__in=list(stream_ids), seq=0).order_by().values_list("stream_id", flat=True)
    return set(rows)


def decorate_streams(streams):
    """Attach `primed` and `event_total` (the count, from the stored counter) to streams: one query."""
    primed = primed_streams([s.pk for s in streams])
    for stream in streams:
        stream.primed = stream.pk in primed
        stream.event_total = timeline.event_count(stream, stream.primed)
    return streams


def decorate_sessions(sessions):
    """Attach `stream_total` and `event_total` to sessions: one grouped query for the page."""
    ids = [s.pk for s in sessions]
    counts = {}
    if ids:
        primed = Exists(Event.objects.filter(stream=OuterRef("pk"), seq=0))
        rows = (
            Stream.objects.filter(session_id__in=ids).order_by().values("session_id")
            .annotate(streams=Count("id"), seqs=Sum("last_seq"), primed=Count("id", filter=Q(primed)))
        )
        counts = {row["session_id"]: (row["streams"], (row["seqs"] or 0) + row["primed"]) for row in rows}
    for session in sessions:
        session.stream_total, session.event_total = counts.get(session.pk, (0, 0))
    return sessions


def decorate_workers(workers):
    """Attach `held` (open streams whose connection each holds) and `running_count` (open requests
    each runs): two grouped queries for the page."""
    ids = [w.pk for w in workers]
    open_streams = Stream.objects.open().order_by()
    held = dict(open_streams.filter(connected_worker__in=ids).values("connected_worker")
                .annotate(n=Count("id")).values_list("connected_worker", "n"))
    running = dict(open_streams.filter(worker__in=ids, kind=Stream.Kind.REQUEST).values("worker")
                   .annotate(n=Count("id")).values_list("worker", "n"))
    for worker in workers:
        worker.held, worker.running_count = held.get(worker.pk, 0), running.get(worker.pk, 0)
    return workers
