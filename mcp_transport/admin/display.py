"""What the admin's pages share to show a value: badges, times, ids, JSON payloads, one-line summaries."""
from __future__ import annotations

import json

from django.utils import timezone
from django.utils.html import format_html

from ..models import Session, Stream, idle_cutoff, retention_cutoff


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


# What each of a stream's states means, as the badge's tooltip.
STATE_HELP = {
    "connected now": "A connection holds this stream now; a resume would replace it.",
    "resumable": "Open, no connection: the client may resume it with Last-Event-ID.",
    "completed": "Ended with its response; replayable until its retention ends.",
    "failed": "Ended with an error response; replayable until its retention ends.",
    "cancelled": "Cancelled; replayable until its retention ends.",
    "expired": "Past EVENT_RETENTION_SECONDS, or its session ended: clients get 404; mcp_prune deletes it.",
}


def stream_badge(state: str):
    return badge(state, title=STATE_HELP.get(state, ""))


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
