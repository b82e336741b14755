"""Server-sent events framing. The only place that knows the wire format."""
import re

KEEPALIVE = b": keepalive\n\n"
OPENED = b": stream open\n\n"
_LINES = re.compile(r"\r\n|\r|\n")


def event(event_id: str | None, data: str, retry_ms: int | None = None) -> bytes:
    return _event_text(event_id, data, retry_ms).encode("utf-8")


def events(event_ids: list[str], datas: list[str]) -> bytes:
    """Many events without `retry` (a replay, a burst), framed and encoded at once: a replay of
    thousands of events costs a fraction of one `event` call each."""
    return "".join([
        f"id: {event_id}\ndata: {data}\n\n" if "\n" not in data and "\r" not in data
        else _event_text(event_id, data, None)
        for event_id, data in zip(event_ids, datas)
    ]).encode("utf-8")


def _event_text(event_id: str | None, data: str, retry_ms: int | None) -> str:
    parts = []
    if event_id is not None:
        parts.append(f"id: {event_id}\n")
    if retry_ms is not None:
        parts.append(f"retry: {int(retry_ms)}\n")
    for line in _LINES.split(data):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    return "".join(parts)


def retry(retry_ms: int) -> bytes:
    return f"retry: {int(retry_ms)}\n\n".encode("ascii")
