"""The operators' admin: MCP sessions, streams and events, read-only, with the operations on live traffic.

Pages are view-only for everyone (nothing is added, edited or deleted by hand); what an operator
may do is a permission of the model:

| page or operation                            | permission                                   |
|----------------------------------------------|----------------------------------------------|
| see sessions / streams / events / workers    | `view_<model>` (or `change_<model>`)         |
| terminate a session                          | `mcp_transport.change_session`               |
| close a stream's live connection             | `mcp_transport.change_stream`                |
| cancel a stream's in-flight request          | `mcp_transport.change_stream`                |
| prune expired sessions and finished streams  | `mcp_transport.delete_session` and `mcp_transport.delete_stream` |

Changelists make a fixed number of queries whatever the page size: the counts shown come from
stored counters (`Stream.last_seq`) and from one grouped query for the page's rows
(`decorate()`), never from one query per row.
"""
from __future__ import annotations

import json
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from . import operations, timeline
from .conf import mcp_settings
from .models import AccessToken, Event, Session, Stream, StreamConnection, Worker, idle_cutoff, retention_cutoff
from .protocol.dispatch import SUPPORTED_VERSIONS
from .eventids import format_event_id, parse_event_id

EVENTS_PER_PAGE = 50
PAYLOAD_PREVIEW_CHARS = 20_000
SESSION_STREAMS_SHOWN = 20


# Shared pieces


def _cutoffs(now=None):
    now = now or timezone.now()
    return idle_cutoff(now), retention_cutoff(now)


def badge(state: str, label: str | None = None, title: str = ""):
    return format_html('<span class="mcp-badge mcp-{}" title="{}">{}</span>', state.replace(" ", "-"), title,
                       label or state)


def when(value) -> str:
    """A compact local time for list columns (the full one is on the object's page)."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def short_id(value: str, length: int = 12) -> str:
    return value if len(value) <= length else value[:length] + "…"


def session_state(session: Session, idle_cutoff) -> str:
    if session.terminated_at:
        return "terminated"
    return "expired" if session.last_seen_at < idle_cutoff else "active"


def stream_state(stream: Stream, idle_cutoff, retention_cutoff) -> str:
    """connected now / resumable / completed / failed / cancelled / expired, as an operator sees it."""
    session = stream.session
    gone = session.terminated_at is not None or session.last_seen_at < idle_cutoff
    if stream.status == Stream.Status.OPEN:
        if stream.connected_worker:
            return "connected now"
        return "expired" if gone else "resumable"
    if gone or (stream.finished_at and stream.finished_at < retention_cutoff):
        return "expired"
    return stream.status


STATE_HELP = {
    "connected now": "A connection holds this stream now; a resume would replace it.",
    "resumable": "Open, no connection: the client may resume it with Last-Event-ID.",
    "completed": "Ended with its response; replayable until its retention ends.",
    "failed": "Ended with an error response; replayable until its retention ends.",
    "cancelled": "Cancelled; replayable until its retention ends.",
    "expired": "Past EVENT_RETENTION_SECONDS, or its session ended: clients get 404; mcp_prune deletes it.",
}


def pretty_json(text: str, limit: int | None = None):
    """A payload pretty-printed (or as stored, if it is not JSON), possibly cut at `limit` characters."""
    if not text:
        return ""
    try:
        pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=False)
    except ValueError:
        pretty = text
    if limit is not None and len(pretty) > limit:
        return pretty[:limit] + f"\n… ({len(text)} characters in all: see the event's own page)"
    return pretty


def summarize(payload: str) -> str:
    """One line for a JSON-RPC message: its method, or result/error for its id."""
    if not payload:
        return "priming (empty data: the event id and retry)"
    try:
        message = json.loads(payload) if len(payload) < 65536 else None
    except ValueError:
        message = None
    if not isinstance(message, dict):
        return payload[:80]
    if "method" in message:
        params = message.get("params") or {}
        detail = ""
        if message["method"] == "notifications/progress" and isinstance(params, dict):
            total = params.get("total")
            detail = f" {params.get('progress')}" + (f"/{total}" if total is not None else "")
            if params.get("message"):
                detail += f" {params['message']}"
        elif message["method"] == "notifications/message" and isinstance(params, dict):
            detail = f" {params.get('level', '')}"
        prefix = "request " if "id" in message else ""
        return f"{prefix}{message['method']}{detail}"
    if "error" in message:
        error = message.get("error") or {}
        return f"error {error.get('code')} for id {json.dumps(message.get('id'))}: {error.get('message', '')}"[:200]
    if "result" in message:
        return f"result for id {json.dumps(message.get('id'))}"
    return payload[:80]


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


class DecoratedChangeList(ChangeList):
    """A changelist whose page of rows gets its counts from one query (`ModelAdmin.decorate`)."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = self.model_admin.decorate(list(self.result_list))


class OperatorAdmin(admin.ModelAdmin):
    """View-only pages; operations check their own permission (see the module docstring)."""

    show_full_result_count = False

    class Media:
        css = {"all": ("mcp_transport/admin.css",)}

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def decorate(self, rows):
        return rows

    def get_changelist(self, request, **kwargs):
        return DecoratedChangeList

    def check_operation(self, request, permission: str):
        if not request.user.has_perm(permission):
            raise PermissionDenied

    def report(self, request, outcome: operations.Outcome, obj=None):
        self.message_user(request, outcome.message, messages.SUCCESS if outcome.done else messages.WARNING)
        if outcome.done and obj is not None:
            self.log_change(request, obj, outcome.message)

    def run_operation(self, request, objects, operation):
        for obj in objects:
            try:
                self.report(request, operation(obj), obj)
            except operations.NoChannelLayer as exc:
                self.message_user(request, str(exc), messages.ERROR)
                return

    def confirm_page(self, request, *, title, question, objects, action=None, submit, danger=True):
        """An intermediate page: POSTs back with `confirm=yes` (to the action or to this URL)."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "media": self.media,
            "title": title,
            "question": question,
            "objects": objects,
            "action": action,
            "submit": submit,
            "danger": danger,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/mcp_transport/confirm.html", context)

    def object_operation_view(self, request, object_id, *, permission, operation, title, question, submit,
                              applies=lambda obj: True, danger=True):
        """`<id>/<operation>/`: GET asks for confirmation, POST does it, then back to the object's page."""
        self.check_operation(request, permission)
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        back = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk],
                       current_app=self.admin_site.name)
        if request.method == "POST":
            self.run_operation(request, [obj], operation)
            return HttpResponseRedirect(back)
        if not applies(obj):
            self.message_user(request, f"Nothing to do: {title.lower()} does not apply to {obj}.", messages.WARNING)
            return HttpResponseRedirect(back)
        return self.confirm_page(request, title=title, question=question, objects=[obj], submit=submit,
                                 danger=danger)

    def confirmed_action(self, request, queryset, *, operation, title, question, submit, danger=True):
        """A changelist action with a confirmation page first."""
        if request.POST.get("confirm") == "yes":
            self.run_operation(request, list(queryset), operation)
            return None
        return self.confirm_page(request, title=title, question=question, objects=list(queryset[:200]),
                                 action=request.POST.get("action"), submit=submit, danger=danger)


# Sessions


class SessionStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("expired", "Expired (idle)"), ("terminated", "Terminated")]

    def queryset(self, request, queryset):
        if self.value() in ("active", "expired", "terminated"):
            return getattr(queryset, self.value())()
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
    list_display = ("session_id", "client", "protocol_version", "user", "created", "last_seen", "state",
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
        return badge(session_state(obj, _cutoffs()[0]))

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
            idle, retention = _cutoffs()
            extra_context.update(
                session_streams=[(s, stream_state(s, idle, retention)) for s in streams],
                session_stream_total=session.stream_total,
                session_events=session.event_total,
                can_terminate=request.user.has_perm("mcp_transport.change_session")
                and session_state(session, idle) == "active",
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


# Streams


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

    def queryset(self, request, queryset):
        value = self.value()
        if value == "active":
            return queryset.open()
        if value == "resumable":
            return queryset.resumable()
        if value == "connected":
            return queryset.open().exclude(connected_worker="")
        if value == "expired":
            idle, retention = _cutoffs()
            return queryset.filter(Q(finished_at__lt=retention) | Q(session__terminated_at__isnull=False)
                                   | Q(session__last_seen_at__lt=idle))
        return queryset


@admin.register(Stream)
class StreamAdmin(OperatorAdmin):
    list_display = ("id", "session_link", "kind_label", "state", "held_by", "opened", "last_event", "events",
                    "reconnects", "policy")
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
        return decorate_streams(rows)

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
        value = stream_state(obj, *_cutoffs())
        return badge(value, title=STATE_HELP.get(value, ""))

    @admin.display(description="held by", ordering="connected_worker")
    def held_by(self, obj):
        if obj.connected_worker and obj.status == Stream.Status.OPEN:
            return format_html('<span class="mcp-mono">{}</span>', obj.connected_worker)
        return "—"

    @admin.display(description="opened", ordering="created_at")
    def opened(self, obj):
        return when(obj.created_at)

    @admin.display(description="last event", ordering="last_seq")
    def last_event(self, obj):
        primed = getattr(obj, "primed", True)
        if timeline.event_count(obj, primed) == 0:
            return "—"
        when = obj.last_event_at or obj.created_at
        return format_html('<span class="mcp-mono">{}</span> <span class="mcp-muted">{}</span>',
                           format_event_id(obj.pk, obj.last_seq),
                           timezone.localtime(when).strftime("%H:%M:%S"))

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
        expired = obj.status == Stream.Status.OPEN and obj.lease_expires_at < timezone.now()
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
        state = stream_state(stream, *_cutoffs())
        return {
            "stream_state": state,
            "timeline_svg": mark_safe(timeline.svg(stream, stream.primed)),
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


# Events


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


# Workers


@admin.register(Worker)
class WorkerAdmin(OperatorAdmin):
    list_display = ("id", "host", "pid", "started_at", "heartbeat_at", "alive", "holding", "running")
    fields = ("id", "host", "pid", "started_at", "heartbeat_at", "stopping", "alive")
    readonly_fields = fields
    ordering = ("-heartbeat_at",)

    def decorate(self, rows):
        ids = [w.pk for w in rows]
        open_streams = Stream.objects.open().order_by()
        held = dict(open_streams.filter(connected_worker__in=ids).values("connected_worker")
                    .annotate(n=Count("id")).values_list("connected_worker", "n"))
        running = dict(open_streams.filter(worker__in=ids, kind=Stream.Kind.REQUEST).values("worker")
                       .annotate(n=Count("id")).values_list("worker", "n"))
        for worker in rows:
            worker.held, worker.running_count = held.get(worker.pk, 0), running.get(worker.pk, 0)
        return rows

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



class AccessTokenForm(forms.ModelForm):
    expires_in_days = forms.IntegerField(min_value=1, required=False, help_text="Empty: never expires")
    scopes_text = forms.CharField(required=False, label="Scopes", help_text="Space-separated")

    class Meta:
        model = AccessToken
        fields = ["user", "name"]


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """Bearer tokens: created here (shown once), revoked here; never edited, never shown again."""

    list_display = ("prefix_display", "user", "name", "scopes_display", "state", "created_at", "expires_at",
                    "last_used_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    readonly_fields = ("prefix", "user", "name", "scopes", "created_at", "expires_at", "revoked_at", "last_used_at")
    actions = ["revoke"]
    form = AccessTokenForm

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj):
        return f"{obj.prefix}…"

    @admin.display(description="scopes")
    def scopes_display(self, obj):
        return " ".join(obj.scopes or [])

    @admin.display(description="state")
    def state(self, obj):
        if obj.revoked_at:
            return badge("failed", "revoked")
        return badge("completed", "usable") if obj.usable else badge("expired", "expired")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "name", "scopes_text", "expires_in_days"]
        return list(self.readonly_fields)

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        from .auth import create_token

        days = form.cleaned_data.get("expires_in_days")
        row, token = create_token(
            form.cleaned_data["user"], name=form.cleaned_data.get("name", ""),
            scopes=(form.cleaned_data.get("scopes_text") or "").split(),
            expires_in=timedelta(days=days) if days else None,
        )
        obj.pk = row.pk
        self.message_user(
            request, format_html("Token created. Copy it now, it is not shown again: <code>{}</code>", token),
            messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens", permissions=["delete"])
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")
