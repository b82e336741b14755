"""Server-sent events framing. The only place that knows the wire format."""
import re

KEEPALIVE = b": keepalive\n\n"
OPENED = b": stream open\n\n"
_LINES = re.compile(r"\r\n|\r|\n")


def event(event_id: str | None, data: str, retry_ms: int | None = None) -> bytes:
    parts = []
    if event_id is not None:
        parts.append(f"id: {event_id}\n")
    if retry_ms is not None:
        parts.append(f"retry: {int(retry_ms)}\n")
    for line in _LINES.split(data):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    return "".join(parts).encode("utf-8")


def retry(retry_ms: int) -> bytes:
    return f"retry: {int(retry_ms)}\n\n".encode("ascii")
