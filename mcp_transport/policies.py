"""When to end an SSE connection early (SEP-1699) and which `retry` to send before it.

A disconnect ends the *connection*, never the *stream*: the client comes back with
GET + Last-Event-ID and receives what it missed. Policies only apply to sessions that
negotiated 2025-11-25 or later; older clients were promised the connection stays open.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .conf import SETTING_NAME, mcp_settings


@dataclass
class Connection:
    """What a policy may know about one SSE connection."""

    stream_id: int
    kind: str  # "request" or "standalone"
    method: str = ""
    tool: str = ""
    reconnects: int = 0
    resumed: bool = False
    opened_at: float = field(default_factory=time.monotonic)
    last_event_at: float = field(default_factory=time.monotonic)
    events_sent: int = 0


class DisconnectPolicy:
    """Base policy: `deadline()` is the monotonic time at which to close, or None."""

    def deadline(self, conn: Connection) -> float | None:
        return None


class Never(DisconnectPolicy):
    pass


class AfterPriming(DisconnectPolicy):
    """Pure polling: each connection delivers what is there, then closes. It waits
    AFTER_PRIMING_GRACE_SECONDS first: a quick tool's answer then goes out on the first
    connection instead of costing its client a whole `retry` and a reconnect."""

    def __init__(self, grace: float | None = None):
        self.grace = grace

    def deadline(self, conn):
        grace = self.grace if self.grace is not None else mcp_settings.AFTER_PRIMING_GRACE_SECONDS
        return conn.opened_at + float(grace)


class AfterSeconds(DisconnectPolicy):
    def __init__(self, seconds: float | None = None):
        self.seconds = seconds

    def deadline(self, conn):
        seconds = self.seconds if self.seconds is not None else mcp_settings.DISCONNECT_AFTER_SECONDS
        return conn.opened_at + float(seconds)


class Idle(AfterSeconds):
    def deadline(self, conn):
        seconds = self.seconds if self.seconds is not None else mcp_settings.DISCONNECT_AFTER_SECONDS
        return conn.last_event_at + float(seconds)


class RetryPolicy:
    """Base retry policy: the `retry` (ms) to announce on a connection."""

    def retry_ms(self, conn: Connection) -> int:
        value = mcp_settings.RETRY_MS
        return int(value) if isinstance(value, int) else 1000


class ConstantRetry(RetryPolicy):
    def __init__(self, ms: int):
        self.ms = int(ms)

    def retry_ms(self, conn):
        return self.ms


class ExponentialRetry(RetryPolicy):
    """Grows with the reconnects of the stream: base * factor**reconnects, capped."""

    base_ms = 1000
    factor = 2.0
    max_ms = 30000

    def retry_ms(self, conn):
        return int(min(self.max_ms, self.base_ms * self.factor ** conn.reconnects))


BUILTIN_DISCONNECT = {
    "never": Never,
    "after_priming": AfterPriming,
    "after_seconds": AfterSeconds,
    "idle": Idle,
}


def describe(value) -> str:
    """A policy setting as text, for the admin: its name, dotted path or class path."""
    if isinstance(value, str):
        return value
    cls = value if isinstance(value, type) else type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve_disconnect(value) -> DisconnectPolicy:
    """A name, a dotted path, a class or an instance -> a policy instance."""
    if isinstance(value, DisconnectPolicy):
        return value
    if isinstance(value, type) and issubclass(value, DisconnectPolicy):
        return value()
    if value in BUILTIN_DISCONNECT:
        return BUILTIN_DISCONNECT[value]()
    return _import_policy(value, DisconnectPolicy)()


def resolve_retry(value) -> RetryPolicy:
    if isinstance(value, RetryPolicy):
        return value
    if isinstance(value, bool):
        raise TypeError("RETRY_MS must be an int or a dotted path")
    if isinstance(value, int):
        return ConstantRetry(value)
    if isinstance(value, type) and issubclass(value, RetryPolicy):
        return value()
    return _import_policy(value, RetryPolicy)()


@lru_cache(maxsize=None)
def _import_policy(path: str, base: type):
    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TypeError(f"{path} is not a {base.__name__} subclass")
    return cls


_defaults: dict = {}


def default_disconnect() -> DisconnectPolicy:
    if "disconnect" not in _defaults:
        _defaults["disconnect"] = resolve_disconnect(mcp_settings.DISCONNECT_POLICY)
    return _defaults["disconnect"]


def default_retry() -> RetryPolicy:
    if "retry" not in _defaults:
        _defaults["retry"] = resolve_retry(mcp_settings.RETRY_MS)
    return _defaults["retry"]


def clear_cache():
    _defaults.clear()


@receiver(setting_changed)
def _reload(*, setting, **kwargs):
    if setting == SETTING_NAME:
        clear_cache()
