"""A connection's view of a stream: what is stored after a point, then what comes live.

The transport asks for one of three things and gets a `Follow`: a new request's stream
(`open_request`), the session's GET stream (`follow_standalone`), or a resumption after an
event id (`resume`). Each subscribes in this process before it reads the table, so no event
falls between replay and live; a resumed stream that is still open also joins the other
workers' wake-ups, then reads once more. The Follow hands over new events in order and never
twice, reading the table again whenever a wake-up came from elsewhere or one was missed.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Protocol

from ..models import Event, Stream
from ..storage import store
from ..wakeups.bus import Listener
from . import errors
from .worker import worker

logger = logging.getLogger("mcp_transport")

FINAL = Event.Kind.FINAL
OPEN = Stream.Status.OPEN


class Terms(Protocol):
    """What the transport decided for a connection; the stream's row records both."""

    label: str  # the disconnect policy, as the admin shows it
    retry_ms: int | None


class Conflict(Exception):
    """The session's GET stream already has a connection in this process."""


class Follow:
    """One connection on one stream: `events` to send at once, then `next()` until the end."""

    def __init__(self, stream_id: int, events: list[store.StoredEvent], terms: Terms, *,
                 listener: Listener | None = None, after: int = 0, log_id=None, ended: bool = False):
        self.stream_id = stream_id
        self.events = events
        self.terms = terms
        self.listener = listener
        self._listening = listener is not None
        self.start_seq = after
        self.last_seq = max([after, *(e.seq for e in events)])
        self.log_id = log_id  # the connection's timeline row, or the future of its write
        self.complete = listener is None or ended or any(e.kind == FINAL for e in events)
        if self.complete:
            self._unlisten()
        else:
            listener.delivered = self.last_seq

    @property
    def closing(self) -> bool:
        """Something asked this connection to close (the tool, an operator, a resumption, shutdown)."""
        return self.listener.closing

    @property
    def close_retry_ms(self) -> int | None:
        return self.listener.close_retry_ms

    @property
    def close_reason(self) -> str:
        return self.listener.close_reason

    async def wait(self, timeout: float) -> bool:
        """Whether anything happened on the stream within `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):
                await self.listener.wake.wait()
        except TimeoutError:
            return False
        return True

    async def next(self) -> tuple[list[store.StoredEvent], bool]:
        """The events stored since the last call, in order and none twice; and whether the stream ended."""
        events, stale = self.listener.take()
        ended = self.listener.ended
        if ended or stale or (events and events[0].seq > self.last_seq + 1):
            events, status = await store.aevents_after(self.stream_id, self.last_seq)
            ended = ended or status != OPEN
        events = [e for e in events if e.seq > self.last_seq]
        if events:
            self.last_seq = self.listener.delivered = events[-1].seq
        return events, ended

    def stop(self, reason: str):
        """The connection ended. The timeline keeps resumed connections and connections that ended
        before their stream."""
        self._unlisten()
        if self.log_id is not None or reason not in ("completed", "ended"):
            worker.heartbeat.disconnected(self.stream_id, self.log_id, reason)

    def _unlisten(self):
        if self._listening:
            self._listening = False
            _drop(self.listener)


async def open_request(server, session, message, scope, terms: Terms, *, method: str, request_id: str,
                       tool_name: str, prime: bool) -> Follow:
    """Start a request on a new stream. A request opened here is written here: it needs no wake-ups
    from other workers (two Redis round trips per call saved) until a client resumes it elsewhere."""
    pending, priming, written = await worker.requests.start_on_new_stream(
        server, session, message, scope, method=method, request_id=request_id, tool_name=tool_name,
        prime=prime, policy=terms.label, retry_ms=terms.retry_ms,
    )
    events = ([priming] if priming else []) + written
    if written and written[-1].kind == FINAL:
        # Answered before the stream existed anywhere but here: nothing to listen for, no wake-ups.
        pending.answered = True
        return Follow(pending.id, events, terms)
    listener = worker.bus.listen(pending.id)
    listener.holds_to_end = not prime  # no priming event: nothing its client could resume from
    return Follow(pending.id, events, terms, listener=listener)


async def follow_standalone(session, terms_for: Callable[[int], Terms]) -> Follow:
    """The session's GET stream, from its last event on; Conflict if a connection here holds it.
    `terms_for(stream id)`: the connection's terms."""
    stream_id, last_seq, _ = await store.astandalone_stream(session.id)
    worker.requests.remember_standalone(session.id, stream_id)
    if worker.bus.listeners(stream_id):
        raise Conflict(stream_id)
    terms = terms_for(stream_id)
    listener = worker.bus.listen(stream_id)
    try:
        await worker.relay.join(stream_id)
        events, _, log_id = await store.aattach(stream_id, last_seq, terms.label, terms.retry_ms)
    except BaseException:
        _drop(listener)
        raise
    return Follow(stream_id, events, terms, listener=listener, after=last_seq, log_id=log_id)


async def resume(session, stream_id: int, seq: int, terms_for: Callable[[Stream], Terms]) -> Follow | None:
    """Replay what followed event `seq` of a stream of this session, then live; None if the stream
    is not this session's or no longer replayable. `terms_for(stream)`: the connection's terms,
    decided once the stream is known. A request whose worker is gone is failed first."""
    listener = worker.bus.listen(stream_id)
    try:
        found = await store.aresume_stream(session.id, stream_id, seq, errors.worker_lost)
    except BaseException:
        _drop(listener)
        raise
    if found is None:
        _drop(listener)
        return None
    stream, failed, events, status = found
    terms = terms_for(stream)
    # The replay goes out without waiting for this write; its row's id is needed only at the end.
    log_id = worker.executor.submit(store.connected, stream_id, seq, terms.label, terms.retry_ms)
    worker.relay.close_connections(stream_id, None, keep=listener, reason="replaced")
    if failed:
        logger.warning("Stream %s failed on resume: its worker's lease expired", stream_id)
        worker.relay.publish(stream_id, failed)
    ended = status != OPEN and not any(e.kind == FINAL for e in events)
    if status == OPEN and await worker.relay.join(stream_id):
        worker.bus.mark_stale(stream_id)  # a wake-up sent between the read and the join is lost
    return Follow(stream_id, events, terms, listener=listener, after=seq, log_id=log_id, ended=ended)


def _drop(listener: Listener):
    worker.bus.unlisten(listener)
    worker.relay.leave(listener.stream_id)
