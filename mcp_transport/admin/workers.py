"""Workers: heartbeat, liveness (`Worker.liveness_at`), the connections and requests each holds."""
from __future__ import annotations

from django.contrib import admin

from ..models import Cutoffs, Worker
from .base import OperatorAdmin
from .counts import decorate_workers
from .display import badge

# Liveness -> (badge style, label). A stale worker is "silent": no heartbeat for over LEASE_SECONDS.
LIVENESS_BADGES = {
    Worker.Liveness.ALIVE: ("active", "alive"),
    Worker.Liveness.STOPPING: ("expired", "stopping"),
    Worker.Liveness.STALE: ("failed", "silent"),
}


def decorate_liveness(rows, field: str = "worker"):
    """Each row's worker liveness (`row.liveness`), from one query for the page."""
    cutoffs = Cutoffs.at()
    ids = {getattr(row, field) for row in rows if getattr(row, field)}
    workers = {w.id: w for w in Worker.objects.filter(id__in=ids)}
    for row in rows:
        worker = workers.get(getattr(row, field))
        row.liveness = worker.liveness_at(cutoffs) if worker else Worker.Liveness.STALE
    return rows


def liveness_badge(obj, field: str = "worker"):
    """A row's worker as alive / stopping / silent (decorated rows; a detail page asks once)."""
    if getattr(obj, "liveness", None) is None:
        decorate_liveness([obj], field)
    return badge(*LIVENESS_BADGES[obj.liveness])


@admin.register(Worker)
class WorkerAdmin(OperatorAdmin):
    list_display = ("id", "host", "pid", "started_at", "heartbeat_at", "alive", "holding", "running")
    fields = ("id", "host", "pid", "started_at", "heartbeat_at", "stopping", "alive")
    readonly_fields = fields
    ordering = ("-heartbeat_at",)

    def decorate(self, rows):
        return decorate_workers(rows)

    @admin.display(description="alive")
    def alive(self, obj):
        return badge(*LIVENESS_BADGES[obj.liveness_at(Cutoffs.at())])

    @admin.display(description="connections held")
    def holding(self, obj):
        return getattr(obj, "held", "—")

    @admin.display(description="requests running")
    def running(self, obj):
        return getattr(obj, "running_count", "—")
