"""Workers: heartbeat, alive or not, the connections and requests each holds."""
from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone

from ..conf import mcp_settings
from ..models import Worker
from .base import OperatorAdmin
from .counts import decorate_workers
from .display import badge


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
        fresh = obj.heartbeat_at >= timezone.now() - timedelta(seconds=mcp_settings.LEASE_SECONDS)
        if obj.stopping:
            return badge("expired", "stopping")
        return badge("active", "alive") if fresh else badge("failed", "silent")

    @admin.display(description="connections held")
    def holding(self, obj):
        return getattr(obj, "held", "—")

    @admin.display(description="requests running")
    def running(self, obj):
        return getattr(obj, "running_count", "—")
