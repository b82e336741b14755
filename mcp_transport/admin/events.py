"""Events: one stream's in order, or all newest first; found by stream id or SSE event id."""
from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from ..eventids import parse_event_id
from ..models import Event
from .base import OperatorAdmin
from .display import badge, pretty_json, summarize


@admin.register(Event)
class EventAdmin(OperatorAdmin):
    list_display = ("event", "stream_link", "kind_label", "summary", "stored")
    list_display_links = ("event",)
    list_filter = ("kind",)
    search_fields = ("=stream__id",)
    fields = ("event", "stream_link", "kind_label", "created_at", "payload_pretty")
    readonly_fields = fields

    def get_ordering(self, request):
        # One stream's events in order; all events newest first.
        return ("seq",) if "stream__id__exact" in request.GET else ("-id",)

    def get_search_results(self, request, queryset, search_term):
        """A stream id (`12`) lists its events; an SSE event id (`12-34`) finds that event."""
        term = search_term.strip()
        parsed = parse_event_id(term)
        if parsed:
            return queryset.filter(stream_id=parsed[0], seq=parsed[1]), False
        if term.isdigit() and len(term) < 19:
            return queryset.filter(stream_id=int(term)), False
        if term:
            return queryset.none(), False
        return queryset, False

    @admin.display(description="event id", ordering="id")
    def event(self, obj):
        return format_html('<span class="mcp-mono">{}</span>', obj.event_id)

    @admin.display(description="stream", ordering="stream_id")
    def stream_link(self, obj):
        url = reverse("admin:mcp_transport_stream_change", args=[obj.stream_id], current_app=self.admin_site.name)
        return format_html('<a href="{}">stream {}</a>', url, obj.stream_id)

    @admin.display(description="kind", ordering="kind")
    def kind_label(self, obj):
        return badge(f"event-{obj.kind}", obj.kind)

    @admin.display(description="stored", ordering="created_at")
    def stored(self, obj):
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]

    @admin.display(description="message")
    def summary(self, obj):
        return summarize(obj.payload)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        if obj.kind == Event.Kind.PRIMING:
            return format_html('<p class="mcp-muted">{}</p>', summarize(obj.payload))
        return format_html('<pre class="mcp-json">{}</pre>', pretty_json(obj.payload))
