"""Wake-ups for connections holding a stream.

The database has every event; a wake-up only says "stream X has new events" (and, in
process, carries them so the connection need not read them back). A connection that
misses a wake-up still finds the events in the table on its next read.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict

from ..storage.store import StoredEvent


class Listener:
    """One SSE connection's inbox for one stream."""

    def __init__(self, stream_id: int):
        self.stream_id = stream_id
        self.events: list[StoredEvent] = []
        self.close_retry_ms: int | None = None
        self.closing = False
        # A connection its client cannot resume (a session before 2025-11-25 has no priming event
        # to resume from): a shutdown lets it run to its stream's end instead of closing it.
        self.holds_to_end = False
        self.ended = False
        self.close_reason = ""
        # Set when events may be in the table that `events` does not hold (a remote wake-up).
        self.stale = False
        self.delivered = -1
        self.wake = asyncio.Event()

    def close(self, retry_ms: int | None, reason: str):
        self.closing = True
        self.close_reason = reason
        self.close_retry_ms = retry_ms
        self.wake.set()

    def take(self) -> tuple[list[StoredEvent], bool]:
        """The events handed over since the last take, and whether the table must be read too."""
        events, self.events = self.events, []
        stale, self.stale = self.stale, False
        self.wake.clear()
        return events, stale


class Bus:
    """This process's connections, by the stream they hold; one per process, owned by the worker."""

    def __init__(self):
        self._listeners: dict[int, set[Listener]] = defaultdict(set)

    def listen(self, stream_id: int) -> Listener:
        listener = Listener(stream_id)
        self._listeners[stream_id].add(listener)
        return listener

    def unlisten(self, listener: Listener):
        group = self._listeners.get(listener.stream_id)
        if group is not None:
            group.discard(listener)
            if not group:
                del self._listeners[listener.stream_id]

    def listeners(self, stream_id: int) -> set[Listener]:
        return self._listeners.get(stream_id, set())

    def publish(self, stream_id: int, events: list[StoredEvent]):
        for listener in self._listeners.get(stream_id, ()):
            listener.events.extend(events)
            listener.wake.set()

    def mark_stale(self, stream_id: int, seq: int | None = None):
        """Events up to `seq` were stored elsewhere: connections behind it read them from the table."""
        for listener in self._listeners.get(stream_id, ()):
            if seq is None or listener.delivered < seq:
                listener.stale = True
                listener.wake.set()

    def held_streams(self) -> dict[int, int]:
        """stream id -> the lowest seq delivered by this process's connections on it."""
        return {sid: min(listener.delivered for listener in group)
                for sid, group in self._listeners.items() if group}

    def end(self, stream_id: int):
        """The stream finished without a final event on it (cancelled, terminated)."""
        for listener in self._listeners.get(stream_id, ()):
            listener.ended = True
            listener.wake.set()

    def close_connections(self, stream_id: int, retry_ms: int | None, *, keep: Listener | None = None,
                          reason="server"):
        """Ask the connections on a stream to close (sending `retry` first); the stream goes on.

        `reason` (tool, admin, replaced, shutdown...) is recorded in the stream's timeline.
        """
        for listener in list(self._listeners.get(stream_id, ())):
            if listener is not keep:
                listener.close(retry_ms, reason)

    def close_all(self, retry_ms: int | None, reason: str):
        """Every connection but those that hold to their stream's end."""
        for group in list(self._listeners.values()):
            for listener in list(group):
                if not listener.holds_to_end:
                    listener.close(retry_ms, reason)
