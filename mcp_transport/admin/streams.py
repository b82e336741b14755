"""Streams: kind, state, the worker holding the connection, events and reconnects; the stream's page
with its timeline, connections and events; close a connection, cancel a request."""
from __future__ import annotations

from django.contrib import admin
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from .. import operations
from ..eventids import format_event_id, parse_event_id
from ..models import Cutoffs, Event, Session, Stream, StreamConnection
from . import timeline
from .base import OperatorAdmin
from .counts import decorate_streams
from .display import badge, pretty_json, short_id, stream_badge, stream_state, when

EVENTS_PER_PAGE = 50
PAYLOAD_PREVIEW_CHARS = 20_000


class StreamStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [
            ("active", "Active (open)"),
            ("resumable", "Resumable"),
            ("connected", "Connected now"),
            ("expired", "Expired"),
        ]

    STATES = {"resumable": Stream.State.RESUMABLE, "connected": Stream.State.CONNECTED,
              "expired": Stream.State.EXPIRED}

    def queryset(self, request, queryset):
        value = self.value()
        if value == "active":
            return queryset.open()
        if value in self.STATES:
            cutoffs = Cutoffs.at()
            return queryset.in_state(self.STATES[value], cutoffs=cutoffs, alive_workers=cutoffs.running_workers)
        return queryset


@admin.register(Stream)
class StreamAdmin(OperatorAdmin):
    # The state right after the id: a long method or tool name must not push it off narrow screens.
    list_display = ("id", "state", "kind_label", "session_link", "held_by", "opened", "last_event", "events",
                    "reconnects")
    list_display_links = ("id",)
    list_filter = (StreamStateFilter, "status", "kind")
    list_select_related = ("session",)
    search_fields = ("^session__id", "tool_name", "method", "=request_id", "=worker", "=connected_worker")
    ordering = ("-id",)
    actions = ["close_connections", "cancel_requests"]
    fieldsets = [
        (None, {"fields": ("state", "session_link", "kind_label", "method", "tool_name", "request_id")}),
        ("Connection", {"fields": ("held_by", "connected_at", "reconnects", "policy")}),
        ("Request", {"fields": ("worker", "lease", "created_at", "finished_at")}),
        ("Events", {"fields": ("events", "last_event")}),
    ]
    readonly_fields = ("state", "session_link", "kind_label", "method", "tool_name", "request_id", "held_by",
                       "connected_at", "reconnects", "policy", "worker", "lease", "created_at", "finished_at",
                       "events", "last_event")

    def decorate(self, rows):
        cutoffs = Cutoffs.at()
        for row in rows:
            row.operator_state = stream_state(row, cutoffs)
        return decorate_streams(rows)

    @staticmethod
    def state_of(obj) -> Stream.State:
        """The row's state as decorated for its page (`stream_state`), or read now for a lone row."""
        if not hasattr(obj, "operator_state"):
            obj.operator_state = stream_state(obj, Cutoffs.at())
        return obj.operator_state

    def get_search_results(self, request, queryset, search_term):
        """Besides the text fields, a stream id (`12`) or an SSE event id (`12-34`) finds its stream."""
        results, duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        stream_id = int(term) if term.isdigit() and len(term) < 19 else (parse_event_id(term) or (None,))[0]
        if stream_id is not None:
            results = results | queryset.filter(pk=stream_id)
        return results, duplicates

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("<path:object_id>/close/", self.admin_site.admin_view(self.close_view), name="%s_%s_close" % info),
            path("<path:object_id>/cancel/", self.admin_site.admin_view(self.cancel_view),
                 name="%s_%s_cancel" % info),
            *super().get_urls(),
        ]

    # Columns

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj):
        url = reverse("admin:mcp_transport_session_change", args=[obj.session_id], current_app=self.admin_site.name)
        return format_html('<a href="{}" title="{}" class="mcp-mono">{}</a>', url, obj.session_id,
                           short_id(obj.session_id))

    @admin.display(description="kind")
    def kind_label(self, obj):
        if obj.kind == Stream.Kind.STANDALONE:
            return format_html('<span class="mcp-kind">GET stream</span> <span class="mcp-muted">{}</span>',
                               "server messages")
        name = format_html(" <strong>{}</strong>", obj.tool_name) if obj.tool_name else ""
        return format_html('<span class="mcp-kind">{}</span>{} <span class="mcp-muted">id {}</span>',
                           obj.method or "request", name, obj.request_id or "—")

    @admin.display(description="state", ordering="status")
    def state(self, obj):
        return stream_badge(self.state_of(obj))

    @admin.display(description="held by", ordering="connected_worker")
    def held_by(self, obj):
        if obj.connected_worker and obj.status == Stream.Status.OPEN:
            gone = "" if self.state_of(obj) == Stream.State.CONNECTED else " (worker gone)"
            return format_html('<span class="mcp-mono">{}</span>{}', obj.connected_worker, gone)
        return "—"

    @admin.display(description="opened", ordering="created_at")
    def opened(self, obj):
        return when(obj.created_at)

    @admin.display(description="last event", ordering="last_seq")
    def last_event(self, obj):
        primed = getattr(obj, "primed", True)
        if timeline.event_count(obj, primed) == 0:
            return "—"
        at = obj.last_event_at or obj.created_at
        return format_html('<span class="mcp-mono">{}</span> <span class="mcp-muted">{}</span>',
                           format_event_id(obj.pk, obj.last_seq),
                           timezone.localtime(at).strftime("%H:%M:%S"))

    @admin.display(description="events", ordering="last_seq")
    def events(self, obj):
        if not hasattr(obj, "event_total"):
            decorate_streams([obj])
        url = reverse("admin:mcp_transport_event_changelist", current_app=self.admin_site.name)
        return format_html('<a href="{}?stream__id__exact={}">{}</a>', url, obj.pk, obj.event_total)

    @admin.display(description="disconnect policy, retry")
    def policy(self, obj):
        retry = f"retry {obj.retry_ms} ms" if obj.retry_ms is not None else "retry —"
        return f"{obj.disconnect_policy or '—'}, {retry}"

    @admin.display(description="lease")
    def lease(self, obj):
        if obj.lease_expires_at is None:
            return "—"
        expired = obj.orphaned_at(Cutoffs.at())
        text = timezone.localtime(obj.lease_expires_at).strftime("%Y-%m-%d %H:%M:%S")
        return format_html("{} {}", text, badge("failed", "expired: worker gone") if expired else "")

    # Pages

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("session")

    def get_object(self, request, object_id, from_field=None):
        # The page reads its stream twice (change_view, then Django's changeform_view): once is enough.
        cached = getattr(request, "_mcp_stream", None)
        if cached is not None and str(cached.pk) == str(object_id) and from_field is None:
            return cached
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            decorate_streams([obj])
            request._mcp_stream = obj
        return obj

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        stream = self.get_object(request, object_id)
        if stream is not None:
            extra_context.update(self.stream_page_context(request, stream))
        return super().change_view(request, object_id, form_url, extra_context)

    STATE_TABS = [("active", "Active"), ("resumable", "Resumable"), ("connected", "Connected now"), ("", "All")]

    def changelist_view(self, request, extra_context=None):
        """Quick "active" / "resumable" tabs on top; a banner when the list is one session's streams."""
        extra_context = extra_context or {}
        params = request.GET.copy()
        for key in ("state", "p"):
            params.pop(key, None)
        tabs = []
        for key, label in self.STATE_TABS:
            query = params.copy()
            if key:
                query["state"] = key
            tabs.append((key or "all", label, "?" + query.urlencode(), request.GET.get("state", "") == key))
        extra_context["state_tabs"] = tabs
        session_id = request.GET.get("session__id__exact")
        if session_id:
            extra_context["filtered_session"] = Session.objects.filter(pk=session_id).first()
        return super().changelist_view(request, extra_context)

    def stream_page_context(self, request, stream):
        first = timeline.first_seq(stream.primed)
        pages = max(1, -(-stream.event_total // EVENTS_PER_PAGE))
        try:
            page = min(max(int(request.GET.get("events", "1")), 1), pages)
        except ValueError:
            page = 1
        start = first + (page - 1) * EVENTS_PER_PAGE
        events = list(Event.objects.filter(stream=stream, seq__gte=start, seq__lt=start + EVENTS_PER_PAGE)
                      .order_by("seq"))
        for event in events:
            event.pretty = pretty_json(event.payload, PAYLOAD_PREVIEW_CHARS)
        connections = list(StreamConnection.objects.filter(stream=stream).order_by("-opened_at", "-id")[:50])
        can_operate = request.user.has_perm("mcp_transport.change_stream")
        is_open = stream.status == Stream.Status.OPEN
        cutoffs = Cutoffs.at()
        state = stream.operator_state = stream_state(stream, cutoffs)
        return {
            "stream_state": state,
            "timeline_svg": mark_safe(timeline.svg(stream, stream.primed, alive_workers=cutoffs.running_workers)),
            "events": events,
            "events_page": page,
            "events_pages": pages,
            "events_prev": page - 1 if page > 1 else None,
            "events_next": page + 1 if page < pages else None,
            "connections": connections,
            "can_close": can_operate and is_open,
            "can_cancel": can_operate and is_open and stream.kind == Stream.Kind.REQUEST and bool(stream.request_id),
            "events_url": reverse("admin:mcp_transport_event_changelist", current_app=self.admin_site.name)
            + f"?stream__id__exact={stream.pk}",
        }

    # Operations

    def has_operate_permission(self, request):
        return request.user.has_perm("mcp_transport.change_stream")

    @admin.action(description="Close the live connection of the selected streams", permissions=["operate"])
    def close_connections(self, request, queryset):
        self.run_operation(request, list(queryset), operations.close_connection)

    @admin.action(description="Cancel the in-flight request of the selected streams", permissions=["operate"])
    def cancel_requests(self, request, queryset):
        return self.confirmed_action(
            request, queryset, operation=operations.cancel_request, title="Cancel requests",
            question="Cancel the requests running on these streams? Each tool is cancelled and its client "
                     "gets an error response (-32800).",
            submit="Yes, cancel the requests",
        )

    def close_view(self, request, object_id):
        return self.object_operation_view(
            request, object_id, permission="mcp_transport.change_stream", operation=operations.close_connection,
            title="Close connection", applies=lambda s: s.status == Stream.Status.OPEN, danger=False,
            question="Close this stream's live connection now? The client reconnects after its retry interval "
                     "and loses nothing.",
            submit="Close connection now",
        )

    def cancel_view(self, request, object_id):
        return self.object_operation_view(
            request, object_id, permission="mcp_transport.change_stream", operation=operations.cancel_request,
            title="Cancel request",
            applies=lambda s: s.status == Stream.Status.OPEN and s.kind == Stream.Kind.REQUEST,
            question="Cancel the request running on this stream? The tool is cancelled and the client gets an "
                     "error response (-32800).",
            submit="Yes, cancel the request",
        )
