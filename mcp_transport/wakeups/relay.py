"""The link between workers, over the Channels layer: wake-ups and control signals, never events.

Each process has one channel, in the group of its worker id and in the group of every
stream it holds a connection for. A wake-up only says "stream X reached seq N": the
receiver reads the rows. channels-redis may drop messages (capacity, restarts), so a
sweep compares the streams this process holds with the table every few seconds and
re-joins its groups: a lost wake-up delays an event, it never loses one.

With the in-memory layer (one process) events need no wake-ups; control signals (from
the admin, say) still go through it. A project that configures no layer (CHANNEL_LAYERS) gets
one in-memory layer for the process (`channel_layer`), so the admin served by the same process
still reaches its connections.

What a cancel or a client's answer means is not this module's business: the layer that runs
requests registers a handler for each (`Relay.on`), and the relay calls it, whether the signal
came over the channel layer or from the table of deliveries.

The messages themselves are defined in `messages`. Two senders put them on the layer: the
worker's `relay` (asynchronous, in the process serving MCP) and `Sender` (synchronous, from any
process: the admin's operations). Both store a signal's `Delivery` row before sending it.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ..conf import mcp_settings
from ..storage import store
from . import messages
from .bus import Bus
from .messages import (  # noqa: F401  (the names callers use as relay.CANCEL, relay.worker_group...)
    ALL_WORKERS, CANCEL, CLOSE, END, END_MODERN, NOTIFY, ORIGIN, RESPOND, SESSION_END, TASK, TASK_HEARD, WAKE,
    Signal,
    stream_group, worker_group,
)

logger = logging.getLogger("mcp_transport")

MAX_CONCURRENT_SENDS = 16
REJOIN_SECONDS = 300.0
REDIS_POOL_DEFAULT = 100  # redis-py 8's ConnectionPool, when a host sets no max_connections


def send_slots(layer) -> int:
    """How many group operations may be in flight at once.

    A channels-redis pool holds at most `max_connections` connections and raises, rather than
    waits, past them: a burst of sends (a thousand sessions ending at once) would lose its
    wake-ups to the sweep and break this process's own receive. So at most half the smallest
    pool, never more than MAX_CONCURRENT_SENDS; the rest of a burst waits its turn here.
    """
    limits = [host.get("max_connections") or REDIS_POOL_DEFAULT
              for host in getattr(layer, "hosts", None) or () if isinstance(host, dict)]
    return max(1, min([MAX_CONCURRENT_SENDS, *(limit // 2 for limit in limits)]))


_process_layer: list = []


def channel_layer():
    """The project's channel layer, or without one (no CHANNEL_LAYERS) an in-memory layer shared
    by this process's relay and senders: the operations of an admin served by the process that
    holds the connections work without configuration."""
    layer = get_channel_layer()
    if layer is not None:
        return layer
    if not _process_layer:
        _process_layer.append(InMemoryChannelLayer())
    return _process_layer[0]


class Relay:
    """This process's link to the others, and the way events and closes reach its own connections
    (`publish`, `close_connections`, `stream_ended`: the bus here, a signal to the rest); one per
    process, owned by the worker."""

    def __init__(self, worker_id: str, bus: Bus):
        self.worker_id = worker_id
        self.bus = bus
        # CANCEL and RESPOND: handler(session id, payload); SESSION_END: handler(session id);
        # NOTIFY: handler(server name, method, params); END_MODERN: handler(row id, reason);
        # TASK: handler(task id, action).
        self.handlers: dict[str, Callable] = {}
        self.layer = None
        self.channel: str | None = None
        self.remote = False
        self.joined: set[int] = set()
        # Streams another worker resumed: their wake-ups must go out even while one is held here.
        self.held_elsewhere: set[int] = set()
        self._started: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._slots: asyncio.Semaphore | None = None  # made on this process's loop, in _start
        # The `mcp.task` signals this process waits to hear were heard, by ref.
        self.heard: dict[str, asyncio.Future] = {}

    async def start(self):
        """Idempotent: `lifespan.startup` starts it, or under daphne (no lifespan) the first request."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        elif self._started.done():
            return
        await asyncio.shield(self._started)

    def on(self, kind: str, handler: Callable):
        """What this process does when another asks it to cancel (CANCEL), hands it a client's answer
        (RESPOND), ends a session (SESSION_END), sends a change notification (NOTIFY), ends a
        2026-07-28 request (END_MODERN) or wakes or cancels one of its tasks (TASK)."""
        self.handlers[kind] = handler

    async def _start(self):
        layer = channel_layer()
        self._slots = asyncio.Semaphore(send_slots(layer))
        self.layer = layer
        self.remote = not isinstance(layer, InMemoryChannelLayer)
        self.channel = await self.layer.new_channel(prefix="mcp")
        await self.join_worker_groups()
        self._spawn(self._receive_forever())
        if self.remote:
            self._spawn(self._sweep_forever())

    def _spawn(self, coro):
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _send(self, signal: Signal):
        """In the background, at most `send_slots` at once. What a lost message costs is its kind's
        (`messages.IF_LOST`): most only wait for the receivers' next read of the table."""
        if self.layer is None:
            return
        group, message = signal.group, {**signal.message, ORIGIN: self.worker_id}

        async def send():
            try:
                async with self._slots:
                    await self.layer.group_send(group, message)
            except Exception:
                logger.warning("Channel layer unavailable: %s to %s not sent; %s", message["type"], group,
                               messages.IF_LOST.get(message["type"], "it waits for the receivers' next sweep"))

        self._spawn(send())

    # What reaches the connections on a stream, here and on the other workers

    def publish(self, stream_id: int, events):
        """New events on a stream: hand them to this process's connections, wake the other workers'."""
        if events:
            self.bus.publish(stream_id, events)
            self.wake(stream_id, events[-1].seq, final=events[-1].kind == "final")

    def close_connections(self, stream_id: int, retry_ms: int | None, *, keep=None, reason="server"):
        self.bus.close_connections(stream_id, retry_ms, keep=keep, reason=reason)
        self.close(stream_id, retry_ms, reason)

    def stream_ended(self, stream_id: int):
        """The stream finished without a final event: its connections end, here and elsewhere."""
        self.bus.end(stream_id)
        self.end(stream_id)

    async def signal(self, signal: Signal):
        """Its `Delivery` stored first (through the database thread), if it has one; then sent."""
        if signal.delivery is not None:
            d = signal.delivery
            await store.adeliver(d.worker, d.session_id, d.kind, d.payload)
        self._send(signal)

    # What this process asks of the others

    async def join(self, stream_id: int) -> bool:
        """Receive other workers' wake-ups for the stream: -> whether this asked the channel layer."""
        if not self.remote or stream_id in self.joined:
            return False
        self.joined.add(stream_id)
        try:
            async with self._slots:
                await self.layer.group_add(stream_group(stream_id), self.channel)
        except Exception:
            logger.warning("Channel layer unavailable: joining stream %s at the next sweep", stream_id)
        return True

    def leave(self, stream_id: int):
        if stream_id in self.joined and not self.bus.listeners(stream_id):
            self.joined.discard(stream_id)

            async def discard():
                try:
                    async with self._slots:
                        await self.layer.group_discard(stream_group(stream_id), self.channel)
                except Exception:
                    pass

            self._spawn(discard())

    def wake(self, stream_id: int, seq: int, final=False):
        """Only when another worker may hold the stream: none here, or one resumed it elsewhere.
        (A wake-up skipped by a race only waits for the other worker's sweep.)"""
        if self.remote and (stream_id in self.held_elsewhere or not self.bus.listeners(stream_id)):
            self._send(messages.wake(stream_id, seq))
        if final:
            self.held_elsewhere.discard(stream_id)

    def close(self, stream_id: int, retry_ms: int | None, reason="server"):
        # A resumption replaces a connection that may be held where the stream was opened, a
        # worker that never joined the stream's group: tell every worker.
        group = ALL_WORKERS if reason == "replaced" else None  # None: the stream's group
        self._send(messages.close(stream_id, retry_ms, reason, group=group))

    def end(self, stream_id: int):
        self._send(messages.end(stream_id))

    async def cancel(self, worker: str, session_id: str, request_id, reason=None, by=None):
        """Stored first (a Delivery the worker's sweep reads), then signalled: never lost."""
        await self.signal(messages.cancel(worker, session_id, request_id, reason, by))

    def session_ended(self, session_id: str):
        self._send(messages.session_end(session_id))

    def task(self, worker: str, task_id: str, action: str):
        """A task's answers came, or it was cancelled: tell the worker running it. The row already
        says so; a lost message only waits for that worker's next read (or the lease)."""
        self._send(messages.task(worker, task_id, action))

    async def task_heard(self, worker: str, task_id: str, action: str, timeout: float) -> bool:
        """`task`, then wait until that worker says it heard (True), at most `timeout` seconds (False)."""
        if self.layer is None or self.channel is None:
            self._send(messages.task(worker, task_id, action))
            await asyncio.sleep(timeout)
            return False
        ref = uuid.uuid4().hex
        heard = self.heard[ref] = asyncio.get_running_loop().create_future()
        self._send(messages.task(worker, task_id, action, reply=(self.channel, ref)))
        try:
            await asyncio.wait_for(heard, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self.heard.pop(ref, None)

    def _say_heard(self, reply):
        channel, ref = reply

        async def send():
            try:
                async with self._slots:
                    await self.layer.send(channel, messages.task_heard(ref))
            except Exception:
                logger.warning("Channel layer unavailable: the task signal %s was heard, not said so", ref)

        self._spawn(send())

    def notify(self, server: str, method: str, params: dict | None):
        """A change notification for the other workers' listen streams (this one delivers its own)."""
        self._send(messages.notify(server, method, params))

    async def respond(self, worker: str, session_id: str, response: dict):
        """Stored first, then signalled, like a cancel."""
        await self.signal(messages.respond(worker, session_id, response))

    # What the others ask of this process

    async def join_worker_groups(self):
        """This worker's own groups: signals for it, and for every worker."""
        await self.layer.group_add(worker_group(self.worker_id), self.channel)
        await self.layer.group_add(ALL_WORKERS, self.channel)

    async def rejoin(self):
        """Group memberships live in Redis: after it restarts they are gone until re-added."""
        await self.join_worker_groups()
        for stream_id in list(self.joined):
            await self.layer.group_add(stream_group(stream_id), self.channel)

    async def _receive_forever(self):
        delay, lost = 0.1, False
        while True:
            _stop_if_cancelled()
            try:
                if lost:
                    await self.rejoin()
                    lost = False
                    logger.warning("Channel layer back: groups joined again")
                    await self.take_deliveries()
                message = await self.layer.receive(self.channel)
                delay = 0.1
            except asyncio.CancelledError:
                raise
            except Exception:
                _stop_if_cancelled()
                lost = True
                logger.warning("Channel layer unavailable; retrying in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            try:
                self.handle(message)
            except Exception:
                logger.exception("Bad channel-layer message %r", message)

    def handle(self, message: dict):
        kind = message.get("type")
        if message.get(ORIGIN) == self.worker_id and kind in (WAKE, CLOSE, END, SESSION_END, NOTIFY):
            return
        if kind == WAKE:
            self.bus.mark_stale(message["stream"], message.get("seq"))
        elif kind == CLOSE:
            if message.get("reason") == "replaced":
                self.held_elsewhere.add(message["stream"])
            self.bus.close_connections(message["stream"], message.get("retry"),
                                       reason=message.get("reason", "server"))
        elif kind == END:
            self.bus.end(message["stream"])
        elif kind == CANCEL:
            self._call(CANCEL, message["session"], messages.cancel_payload(message))
        elif kind == RESPOND:
            self._call(RESPOND, message["session"], message["response"])
        elif kind == SESSION_END:
            store.forget_session(message["session"])
            self._call(SESSION_END, message["session"])
        elif kind == NOTIFY:
            self._call(NOTIFY, message["server"], message["method"], message.get("params"))
        elif kind == END_MODERN:
            self._call(END_MODERN, message["row"], message.get("reason"))
        elif kind == TASK:
            self._call(TASK, message["task"], message.get("action"))
            if message.get("reply"):
                self._say_heard(message["reply"])
        elif kind == TASK_HEARD:
            heard = self.heard.get(message.get("ref"))
            if heard is not None and not heard.done():
                heard.set_result(True)

    def _call(self, kind: str, *args):
        handler = self.handlers.get(kind)
        if handler is not None:
            handler(*args)

    async def take_deliveries(self):
        for session_id, kind, payload in await store.atake_deliveries(self.worker_id):
            self._call(messages.DELIVERED_AS[kind], session_id, payload)

    async def _sweep_forever(self):
        """Catch up on lost wake-ups and re-join groups a restarted Redis forgot.

        A restart breaks the receive, which re-joins everything at once; the full re-join here
        (one round trip per held stream) is only the safety net, every REJOIN_SECONDS. The
        worker's own groups are re-added every round: two round trips.
        """
        loop = asyncio.get_running_loop()
        rejoined = loop.time()
        while True:
            _stop_if_cancelled()
            await asyncio.sleep(float(mcp_settings.WAKEUP_SWEEP_SECONDS))
            try:
                await self.take_deliveries()
                held = self.bus.held_streams()
                if held:
                    progress = await store.astream_progress(held)
                    for stream_id, (last_seq, status) in progress.items():
                        if last_seq > held[stream_id] or status != "open":
                            self.bus.mark_stale(stream_id, last_seq)
                if loop.time() - rejoined >= REJOIN_SECONDS:
                    rejoined = loop.time()
                    await self.rejoin()
                else:
                    await self.join_worker_groups()
            except asyncio.CancelledError:
                raise
            except Exception:
                _stop_if_cancelled()
                logger.warning("Wake-up sweep failed; retrying", exc_info=True)


def _stop_if_cancelled():
    """The relay's loops stop when their task was cancelled, even where the Redis client swallowed
    the cancellation mid-command or turned it into another error (a ConnectionError, a TimeoutError)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Sender:
    """The relay's API for a process that holds no connections and runs no requests (the admin's
    views, a shell): synchronous, each signal sent at once with `origin` set to who sends it.

    `send()` stores the signals' `Delivery` rows first, on the caller's database connection (so
    within its transaction), then puts them all on the channel layer in one `async_to_sync`.
    Which worker holds a stream's connection is known only to the workers: address closes and
    wake-ups from outside to every worker (`group=ALL_WORKERS`).
    """

    def __init__(self, origin: str, layer=None):
        self.origin = origin
        self.layer = layer if layer is not None else channel_layer()

    def send(self, *signals: Signal):
        for signal in signals:
            if signal.delivery is not None:
                d = signal.delivery
                store.deliver(d.worker, d.session_id, d.kind, d.payload)
        async_to_sync(self._send_all)(signals)

    def task_heard(self, worker: str, task_id: str, action: str, timeout: float) -> bool:
        """`Relay.task_heard`, from outside the worker: True once that worker said it heard."""
        return async_to_sync(self._task_heard)(worker, task_id, action, timeout)

    async def _task_heard(self, worker: str, task_id: str, action: str, timeout: float) -> bool:
        channel = await self.layer.new_channel(prefix="mcp-heard")
        ref = uuid.uuid4().hex
        await self._send_all([messages.task(worker, task_id, action, reply=(channel, ref))])
        try:
            async with asyncio.timeout(timeout):
                await self.layer.receive(channel)
            return True
        except TimeoutError:
            return False

    async def send_async(self, *signals: Signal):
        """`send` from an event loop, for signals that store no `Delivery` (wake-ups)."""
        await self._send_all(signals)

    async def _send_all(self, signals):
        for signal in signals:
            await self.layer.group_send(signal.group, {**signal.message, ORIGIN: self.origin})
