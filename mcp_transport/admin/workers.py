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
