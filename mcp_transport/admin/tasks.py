"""Tasks: status, tool, who asked, where it runs, how long it took; the task's timeline of events,
request, answer and questions; cancel one."""
from __future__ import annotations

from django.contrib import admin
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from .. import operations
from ..models import Task
from . import timeline
from .base import OperatorAdmin
from .display import badge, pretty_json, short_id, when
from .workers import decorate_liveness, liveness_badge

CANCEL_PERMISSION = "mcp_transport.change_task"
EVENTS_SHOWN = 100
STATUS_BADGES = {
    Task.Status.WORKING: "active",
    Task.Status.INPUT_REQUIRED: "resumable",
    Task.Status.COMPLETED: "completed",
    Task.Status.FAILED: "failed",
    Task.Status.CANCELLED: "cancelled",
}


@admin.register(Task)
class TaskAdmin(OperatorAdmin):
    list_display = ("task", "tool", "status_badge", "principal", "runner", "worker", "worker_alive", "created",
                    "took")
    list_filter = ("status", "runner", "tool", "server")
    search_fields = ("=id", "tool", "=principal", "=worker")
    ordering = ("-created_at",)
    actions = ["cancel_tasks"]
    fieldsets = [
        (None, {"fields": ("id", "status_badge", "status_message", "tool", "principal", "server")}),
        ("Where it runs", {"fields": ("runner", "worker", "worker_alive", "lease_expires_at")}),
        ("Times", {"fields": ("created_at", "updated_at", "finished_at", "took", "ttl_ms", "poll_interval_ms",
                              "expires_at")}),
        ("Request and answer", {"fields": ("request_json", "questions", "answers", "result_json", "error_json")}),
    ]
    readonly_fields = ("id", "status_badge", "status_message", "tool", "principal", "server", "runner", "worker",
                       "worker_alive", "lease_expires_at", "created_at", "updated_at", "finished_at", "took",
                       "ttl_ms", "poll_interval_ms", "expires_at", "request_json", "questions", "answers",
                       "result_json", "error_json")

    def decorate(self, rows):
        return decorate_liveness(rows)

    @admin.display(description="task", ordering="id")
    def task(self, obj):
        return format_html('<span class="mcp-mono" title="{}">{}</span>', obj.pk, short_id(obj.pk, 13))

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return badge(STATUS_BADGES.get(obj.status, "expired"), obj.get_status_display(), obj.status_message)

    @admin.display(description="worker alive")
    def worker_alive(self, obj):
        return "—" if obj.terminal else liveness_badge(obj)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return when(obj.created_at)

    @admin.display(description="took")
    def took(self, obj):
        end = obj.finished_at or timezone.now()
        seconds = (end - obj.created_at).total_seconds()
        return f"{seconds:.1f} s" + ("" if obj.finished_at else " so far")

    @admin.display(description="request")
    def request_json(self, obj):
        return format_html('<pre class="mcp-mono">{}</pre>', pretty_json(obj.request))

    @admin.display(description="questions waiting")
    def questions(self, obj):
        return format_html('<pre class="mcp-mono">{}</pre>', pretty_json(obj.input_requests)) \
            if obj.input_requests not in ("", "{}") else "—"

    @admin.display(description="answers received")
    def answers(self, obj):
        return format_html('<pre class="mcp-mono">{}</pre>', pretty_json(obj.input_responses)) \
            if obj.input_responses not in ("", "{}") else "—"

    @admin.display(description="result")
    def result_json(self, obj):
        return format_html('<pre class="mcp-mono">{}</pre>', pretty_json(obj.result)) if obj.result else "—"

    @admin.display(description="error")
    def error_json(self, obj):
        return format_html('<pre class="mcp-mono">{}</pre>', pretty_json(obj.error)) if obj.error else "—"

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("<path:object_id>/cancel/", self.admin_site.admin_view(self.cancel_view), name="%s_%s_cancel" % info),
            *super().get_urls(),
        ]

    def cancel_view(self, request, object_id):
        return self.object_operation_view(
            request, object_id, permission=CANCEL_PERMISSION, operation=operations.cancel_task,
            title="Cancel this task", question="The task is cancelled now; the worker running it stops the work.",
            submit="Cancel the task", applies=lambda task: not task.terminal)

    @admin.action(description="Cancel the selected tasks", permissions=["cancel"])
    def cancel_tasks(self, request, queryset):
        return self.confirmed_action(
            request, queryset, operation=operations.cancel_task, title="Cancel these tasks",
            question="Active tasks are cancelled now; finished ones stay as they are.", submit="Cancel them")

    def has_cancel_permission(self, request):
        return request.user.has_perm(CANCEL_PERMISSION)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "can_cancel": self.has_cancel_permission(request)}
        task = self.get_object(request, object_id)
        if task is not None:
            events, total = timeline.task_events(task)
            extra_context.update(
                task_badge=self.status_badge(task),
                task_timeline_svg=mark_safe(timeline.task_svg(task, events, total)),
                task_events=events[-EVENTS_SHOWN:],
                task_event_total=total,
                task_events_shown=min(total, EVENTS_SHOWN),
            )
        return super().change_view(request, object_id, form_url, extra_context)
