"""URL elicitations: which page each client was sent to, for whom, and whether the project has
said it is done (`operations.complete_elicitation`, called by that page). Read-only: completing
one is the page's business, after it has checked its user."""
from __future__ import annotations

from django.contrib import admin

from ..models import Elicitation
from .base import OperatorAdmin
from .display import when


class CompletedFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("waiting", "Waiting for its page"), ("completed", "Completed")]

    def queryset(self, request, queryset):
        if self.value() in ("waiting", "completed"):
            return queryset.filter(completed_at__isnull=self.value() == "waiting")
        return queryset


@admin.register(Elicitation)
class ElicitationAdmin(OperatorAdmin):
    list_display = ("elicitation_id", "server", "session", "principal", "url", "started", "completed")
    list_filter = (CompletedFilter, "server")
    search_fields = ("=elicitation_id", "=principal", "=session__id")
    list_select_related = ("session",)
    ordering = ("-created_at",)
    fields = ("elicitation_id", "server", "session", "principal", "url", "created_at", "completed_at")
    readonly_fields = fields

    @admin.display(description="started", ordering="created_at")
    def started(self, obj):
        return when(obj.created_at)

    @admin.display(description="completed", ordering="completed_at")
    def completed(self, obj):
        return when(obj.completed_at) if obj.completed_at else "waiting"
