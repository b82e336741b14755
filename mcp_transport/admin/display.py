"""What the admin's pages share to show a value: badges, times, ids, JSON payloads, one-line summaries."""
from __future__ import annotations

import json

from django.utils import timezone
from django.utils.html import format_html

from ..models import Cutoffs, Stream


def badge(state: str, label: str | None = None, title: str = ""):
    return format_html('<span class="mcp-badge mcp-{}" title="{}">{}</span>', state.replace(" ", "-"), title,
                       label or state)


def when(value) -> str:
    """A compact local time for list columns (the full one is on the object's page)."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def short_id(value: str, length: int = 12) -> str:
    return value if len(value) <= length else value[:length] + "…"


def stream_state(stream: Stream, cutoffs: Cutoffs) -> Stream.State:
    """A stream's state as an operator reads it: a connection counts only on a worker that is not
    stale (`Cutoffs.running_workers`, the rule `mcp_status` applies)."""
    return stream.state_at(cutoffs, alive_workers=cutoffs.running_workers)


# What each of a stream's states (`Stream.state_at`) means, as the badge's tooltip.
STATE_HELP = {
    Stream.State.CONNECTED: "A live worker holds a connection of this stream now; a resume would replace it.",
    Stream.State.RESUMABLE: "Open, no connection (or its worker is gone): the client may resume it with "
                            "Last-Event-ID.",
    Stream.State.COMPLETED: "Ended with its response; replayable while its session is active, until its "
                            "retention ends.",
    Stream.State.FAILED: "Ended with an error response; replayable while its session is active, until its "
                         "retention ends.",
    Stream.State.CANCELLED: "Cancelled; replayable while its session is active, until its retention ends.",
    Stream.State.EXPIRED: "Past EVENT_RETENTION_SECONDS, its session idle, or open when its session ended: "
                          "clients get 404; mcp_prune deletes it.",
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
        elif message["method"] == "notifications/tasks/status" and isinstance(params, dict):
            detail = f" {params.get('status', '')}" + (f": {params['statusMessage']}"
                                                        if params.get("statusMessage") else "")
        prefix = "request " if "id" in message else ""
        return f"{prefix}{message['method']}{detail}"
    if "error" in message:
        error = message.get("error") or {}
        return f"error {error.get('code')} for id {json.dumps(message.get('id'))}: {error.get('message', '')}"[:200]
    if "result" in message:
        return f"result for id {json.dumps(message.get('id'))}"
    return payload[:80]
