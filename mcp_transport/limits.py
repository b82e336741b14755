"""Limits that keep one client from taking the server down: each a setting (0 = none), each logged when hit."""
from __future__ import annotations

import logging
import math
import time

from . import metrics
from .conf import mcp_settings
from .protocol.jsonrpc import LIMIT_EXCEEDED, JSONRPCError

logger = logging.getLogger("mcp_transport.limits")


class LimitExceeded(JSONRPCError):
    """A limit was hit: HTTP 429 for a request, or a JSON-RPC error ending the stream."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(LIMIT_EXCEEDED, f"Limit exceeded: {message}")
        self.retry_after = retry_after


def hit(message: str, **context) -> LimitExceeded:
    logger.warning("Limit hit: %s %s", message, " ".join(f"{k}={v}" for k, v in context.items()))
    return LimitExceeded(message)


class StreamBudget:
    """Events and bytes one stream may carry; past them it ends with a JSON-RPC error."""

    def __init__(self):
        self.events = 0
        self.bytes = 0

    def spend(self, payload: str, stream_id: int):
        self.events += 1
        self.bytes += len(payload)
        if mcp_settings.MAX_EVENTS_PER_STREAM and self.events > mcp_settings.MAX_EVENTS_PER_STREAM:
            raise hit(f"this stream reached MAX_EVENTS_PER_STREAM ({mcp_settings.MAX_EVENTS_PER_STREAM})",
                      stream=stream_id)
        if mcp_settings.MAX_BYTES_PER_STREAM and self.bytes > mcp_settings.MAX_BYTES_PER_STREAM:
            raise hit(f"this stream reached MAX_BYTES_PER_STREAM ({mcp_settings.MAX_BYTES_PER_STREAM})",
                      stream=stream_id)


class ReconnectGuard:
    """Clients must wait `retry` after a server-initiated close. A few early returns are tolerated
    (some clients reconnect at once after their first close); past MAX_EARLY_RECONNECTS, 429.

    Kept per process: with several workers each counts what it sees.
    """

    def __init__(self):
        self._closed: dict[int, tuple[float, int]] = {}

    def closed(self, stream_id: int, retry_ms: int):
        strikes = self._closed.get(stream_id, (0.0, 0))[1]
        self._closed[stream_id] = (time.monotonic() + retry_ms / 1000, strikes)
        if len(self._closed) > 100000:
            now = time.monotonic()
            self._closed = {k: v for k, v in self._closed.items() if v[0] > now - 60}

    def check(self, stream_id: int):
        allowed_at, strikes = self._closed.get(stream_id, (0.0, 0))
        remaining = allowed_at - time.monotonic()
        if remaining <= 0:
            return
        strikes += 1
        self._closed[stream_id] = (allowed_at, strikes)
        if strikes > mcp_settings.MAX_EARLY_RECONNECTS:
            metrics.early_reconnects.labels("refused").inc()
            exc = hit("reconnected before the retry interval, too often", stream=stream_id, strikes=strikes)
            exc.retry_after = max(1, math.ceil(remaining))
            raise exc
        metrics.early_reconnects.labels("tolerated").inc()

