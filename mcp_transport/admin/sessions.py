"""Sessions: who, which client and version, state, their streams and events; terminate, prune."""
from __future__ import annotations

import json

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from .. import operations
from ..conf import mcp_settings
from ..models import Cutoffs, Session, Stream
from ..protocol.dispatch import SUPPORTED_VERSIONS
from .base import OperatorAdmin
from .counts import decorate_sessions, decorate_streams
from .display import badge, short_id, stream_state, when

SESSION_STREAMS_SHOWN = 20


class SessionStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return Session.State.choices

    def queryset(self, request, queryset):
        if self.value() in Session.State.values:
            return queryset.in_state(self.value())
        return queryset


class ProtocolVersionFilter(admin.SimpleListFilter):
    title = "protocol version"
    parameter_name = "protocol_version"

    def lookups(self, request, model_admin):
        return [(v, v) for v in SUPPORTED_VERSIONS]

    def queryset(self, request, queryset):
        return queryset.filter(protocol_version=self.value()) if self.value() else queryset


@admin.register(Session)
class SessionAdmin(OperatorAdmin):
    # The state right after the id: long client names must not push it off narrow screens.
    list_display = ("session_id", "state", "client", "protocol_version", "user", "last_seen", "created",
                    "streams", "events")
    list_filter = (SessionStateFilter, ProtocolVersionFilter, ("client_name", admin.AllValuesFieldListFilter),
                   "server")
    list_select_related = ("user",)
    ordering = ("-last_seen_at",)
    actions = ["terminate_sessions"]
    fieldsets = [
        (None, {"fields": ("state", "id", "server", "protocol_version", "client", "user", "principal", "log_level")}),
        ("Times", {"fields": ("created_at", "last_seen_at", "terminated_at")}),
        ("Client capabilities", {"fields": ("capabilities",), "classes": ("collapse",)}),
    ]
    readonly_fields = ("state", "id", "server", "protocol_version", "client", "user", "principal", "log_level",
                       "created_at", "last_seen_at", "terminated_at", "capabilities")

    def get_search_fields(self, request):
        return ("^id", "client_name", "client_version", f"user__{get_user_model().USERNAME_FIELD}", "=principal")

    def decorate(self, rows):
        return decorate_sessions(rows)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("prune/", self.admin_site.admin_view(self.prune_view), name="%s_%s_prune" % info),
            path("<path:object_id>/terminate/", self.admin_site.admin_view(self.terminate_view),
                 name="%s_%s_terminate" % info),
            *super().get_urls(),
        ]

    # Columns

    @admin.display(description="session", ordering="id")
    def session_id(self, obj):
        return format_html('<span title="{}" class="mcp-mono">{}</span>', obj.pk, short_id(obj.pk))

    @admin.display(description="client", ordering="client_name")
    def client(self, obj):
        return f"{obj.client_name} {obj.client_version}".strip() or "—"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return when(obj.created_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj):
        return when(obj.last_seen_at)

    @admin.display(description="state")
    def state(self, obj):
        return badge(obj.state)

    @admin.display(description="streams")
    def streams(self, obj):
        count = getattr(obj, "stream_total", None)
        if count is None:
            count = obj.streams.count()
        url = reverse("admin:mcp_transport_stream_changelist", current_app=self.admin_site.name)
        return format_html('<a href="{}?session__id__exact={}">{} stream{}</a>', url, obj.pk, count,
                           "" if count == 1 else "s")

    @admin.display(description="events")
    def events(self, obj):
        count = getattr(obj, "event_total", None)
        if count is None:
            count = decorate_sessions([obj])[0].event_total
        return count

    @admin.display(description="client capabilities")
    def capabilities(self, obj):
        return format_html('<pre class="mcp-json">{}</pre>', json.dumps(obj.client_capabilities, indent=2))

    # Pages

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        session = self.get_object(request, object_id)
        if session is not None:
            streams = list(Stream.objects.filter(session=session).select_related("session")
                           .order_by("-id")[:SESSION_STREAMS_SHOWN])
            decorate_streams(streams)
            decorate_sessions([session])
            cutoffs = Cutoffs.at()
            extra_context.update(
                session_streams=[(s, stream_state(s, cutoffs)) for s in streams],
                session_stream_total=session.stream_total,
                session_events=session.event_total,
                can_terminate=request.user.has_perm("mcp_transport.change_session")
                and session.state_at(cutoffs) == Session.State.ACTIVE,
                streams_url=reverse("admin:mcp_transport_stream_changelist", current_app=self.admin_site.name)
                + f"?session__id__exact={session.pk}",
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        extra_context = extra_context or {}
        extra_context["can_prune"] = self.has_prune_permission(request)
        return super().changelist_view(request, extra_context)

    # Operations

    def has_terminate_permission(self, request):
        return request.user.has_perm("mcp_transport.change_session")

    def has_prune_permission(self, request):
        return request.user.has_perms(["mcp_transport.delete_session", "mcp_transport.delete_stream"])

    @admin.action(description="Terminate the selected sessions", permissions=["terminate"])
    def terminate_sessions(self, request, queryset):
        return self.confirmed_action(
            request, queryset, operation=operations.terminate_session, title="Terminate sessions",
            question="Terminate these sessions? Their requests are cancelled, their connections closed, and "
                     "their clients get 404 and must initialize again.",
            submit="Yes, terminate",
        )

    def terminate_view(self, request, object_id):
        return self.object_operation_view(
            request, object_id, permission="mcp_transport.change_session", operation=operations.terminate_session,
            title="Terminate session", applies=lambda s: s.terminated_at is None,
            question="Terminate this session? Its requests are cancelled, its connections closed, and its "
                     "client gets 404 and must initialize again.",
            submit="Yes, terminate",
        )

    def prune_view(self, request):
        if not self.has_prune_permission(request):
            raise PermissionDenied
        changelist = reverse("admin:mcp_transport_session_changelist", current_app=self.admin_site.name)
        if request.method == "POST":
            self.report(request, operations.prune())
            return HttpResponseRedirect(changelist)
        preview = operations.prune_preview()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "media": self.media,
            "title": "Prune expired sessions and streams",
            "preview": preview,
            "idle_timeout": mcp_settings.SESSION_IDLE_TIMEOUT,
            "retention": mcp_settings.EVENT_RETENTION_SECONDS,
        }
        return TemplateResponse(request, "admin/mcp_transport/prune.html", context)
