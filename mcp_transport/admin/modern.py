"""Modern requests (2026-07-28): the listen streams and the long calls the workers hold now, and
ending one. Quick calls never show up: they are over before they would be written."""
from __future__ import annotations

import json

from django.contrib import admin
from django.urls import path
from django.utils import timezone

from .. import operations
from ..models import ModernRequest
from .base import OperatorAdmin
from .display import when
from .workers import decorate_liveness, liveness_badge

END_PERMISSION = "mcp_transport.change_modernrequest"


class HeldFilter(admin.SimpleListFilter):
    title = "worker"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("running", "On a running worker"), ("gone", "Worker gone")]

    def queryset(self, request, queryset):
        if self.value() == "running":
            return queryset.on_running_workers()
        if self.value() == "gone":
            return queryset.orphaned()
        return queryset


@admin.register(ModernRequest)
class ModernRequestAdmin(OperatorAdmin):
    list_display = ("id", "kind", "method", "name", "principal", "client", "worker", "worker_alive", "since",
                    "listening_to")
    list_filter = ("kind", HeldFilter, "server")
    search_fields = ("=principal", "name", "method", "=worker", "client_name")
    ordering = ("-started_at",)
    actions = ["end_requests"]
    fields = ("kind", "server", "method", "name", "request_id", "principal", "client", "worker", "worker_alive",
              "started_at", "listening_to")
    readonly_fields = fields

    def decorate(self, rows):
        return decorate_liveness(rows)

    @admin.display(description="client")
    def client(self, obj):
        return f"{obj.client_name} {obj.client_version}".strip() or "—"

    @admin.display(description="worker")
    def worker_alive(self, obj):
        return liveness_badge(obj)

    @admin.display(description="since", ordering="started_at")
    def since(self, obj):
        return f"{when(obj.started_at)} ({int((timezone.now() - obj.started_at).total_seconds())} s)"

    @admin.display(description="notifications")
    def listening_to(self, obj):
        if obj.kind != ModernRequest.Kind.LISTEN:
            return "—"
        return json.dumps(obj.notifications, sort_keys=True) if obj.notifications else "nothing"

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("<path:object_id>/end/", self.admin_site.admin_view(self.end_view), name="%s_%s_end" % info),
            *super().get_urls(),
        ]

    def end_view(self, request, object_id):
        return self.object_operation_view(
            request, object_id, permission=END_PERMISSION, operation=operations.end_modern_request,
            title="End this request",
            question="A listen stream ends with its final result (its client may listen again); "
                     "a call is cancelled and answered with an error.",
            submit="End it")

    @admin.action(description="End the selected requests", permissions=["end"])
    def end_requests(self, request, queryset):
        return self.confirmed_action(
            request, queryset, operation=operations.end_modern_request, title="End these requests",
            question="Listen streams end with their final result; calls are cancelled and answered with an error.",
            submit="End them")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "can_end": self.has_end_permission(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    def has_end_permission(self, request):
        return request.user.has_perm(END_PERMISSION)
