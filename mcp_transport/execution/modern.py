"""2026-07-28 requests on this worker: the calls in flight and the `subscriptions/listen` streams.

Nothing here is stored per message: a modern request's progress and log messages go straight to
its own connection (the revision has no resumption), and closing that connection cancels it.
What an operator must see (the listen streams, the calls running for a while) is listed in the
worker's heartbeat row instead, and the worker ends both cleanly on shutdown.

Change notifications reach listen streams on every worker: the worker where the change happened
delivers to its own and tells the others through the relay (`NOTIFY`).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from ..protocol import jsonrpc, modern
from ..protocol.context import Context
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.mrtr import Inputs
from ..storage.executor import BatchExecutor
from ..wakeups.relay import Relay

logger = logging.getLogger("mcp_transport")

ENDED = object()  # put on a listen stream's queue: the server ends it (a result, then the close)


class ModernHost:
    """protocol.context.Host for a modern request: messages to its connection, changes to every
    listener, no session to keep anything in."""

    def __init__(self, calls: "ModernRequests", server, emit):
        self.calls = calls
        self.server = server
        self.emit = emit

    async def send(self, message: dict):
        await self.emit(message)

    async def request(self, method, params, timeout):
        raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "A 2026-07-28 request asks the client through its result")

    async def close_connection(self, retry_ms):
        """No polling in this revision: closing the connection would cancel the request."""

    async def notify_session(self, message: dict):
        await self.calls.notify(self.server.name, message["method"], message.get("params"))

    async def run_sync(self, fn, *args):
        return await self.calls.executor.run(fn, *args)

    async def subscribe(self, uri: str):
        raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, "Method not found: resources/subscribe")

    unsubscribe = subscribe

    async def set_log_level(self, level: str):
        raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, "Method not found: logging/setLevel")


@dataclass
class Call:
    """A modern request running here."""

    number: int
    server: str
    method: str
    name: str
    principal: str
    started: float = field(default_factory=time.time)
    task: asyncio.Task | None = None

    def describe(self) -> dict:
        return {"id": self.number, "server": self.server, "method": self.method, "name": self.name,
                "principal": self.principal, "started": self.started}


@dataclass
class Listen:
    """One `subscriptions/listen` stream held here: what it agreed to receive, and its outbox."""

    number: int
    server: str
    listen_id: object
    agreed: dict
    principal: str
    started: float = field(default_factory=time.time)
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    sent: int = 0

    def describe(self) -> dict:
        return {"id": self.number, "server": self.server, "filter": self.agreed, "principal": self.principal,
                "started": self.started, "sent": self.sent}


class ModernRequests:
    """The modern requests and listen streams of this process; one per process, owned by the worker."""

    def __init__(self, executor: BatchExecutor, relay: Relay):
        self.executor = executor
        self.relay = relay
        self.calls: dict[int, Call] = {}
        self.listens: dict[int, Listen] = {}
        self._numbers = itertools.count(1)

    async def run(self, server, message, scope, meta: modern.RequestMeta, inputs: Inputs | None, emit,
                  principal: str = "") -> dict:
        """Run one request to its JSON-RPC response; its notifications go to `emit` on the way."""
        params = message.params or {}
        name = params.get("name", params.get("uri", ""))
        call = Call(next(self._numbers), server.name, message.method, name if isinstance(name, str) else "",
                    principal)
        call.task = asyncio.current_task()
        self.calls[call.number] = call
        user = (scope or {}).get("user")
        ctx = Context(server=server, session=None, request_id=message.id, params=params,
                      host=ModernHost(self, server, emit), user=user if getattr(user, "is_authenticated", False)
                      else None, scope=scope, modern=meta, inputs=inputs)
        try:
            return jsonrpc.result(message.id, await server.modern.handle(message.method, params, ctx))
        except JSONRPCError as exc:
            return jsonrpc.error_from(message.id, exc)
        except Exception as exc:
            logger.exception("Request %s %r failed", message.method, message.id)
            text = "Internal error" + (f": {type(exc).__name__}: {exc}" if settings.DEBUG else "")
            return jsonrpc.error(message.id, jsonrpc.INTERNAL_ERROR, text)
        finally:
            self.calls.pop(call.number, None)

    def open_listen(self, server_name: str, listen_id, agreed: dict, principal: str = "") -> Listen:
        listen = Listen(next(self._numbers), server_name, listen_id, agreed, principal)
        self.listens[listen.number] = listen
        return listen

    def close_listen(self, listen: Listen):
        self.listens.pop(listen.number, None)

    async def notify(self, server_name: str, method: str, params: dict | None = None):
        """A change: to this worker's listen streams now, to the other workers' through the relay."""
        self.deliver(server_name, method, params)
        self.relay.notify(server_name, method, params)

    def deliver(self, server_name: str, method: str, params: dict | None):
        for listen in list(self.listens.values()):
            if listen.server == server_name and modern.wants(listen.agreed, method, params):
                listen.queue.put_nowait(modern.on_listen(listen.listen_id, method, params))

    def end_listens(self):
        """Shutdown: every listen stream gets its final result and closes."""
        for listen in list(self.listens.values()):
            listen.queue.put_nowait(ENDED)

    def cancel_all(self):
        for call in list(self.calls.values()):
            if call.task is not None and not call.task.done():
                call.task.cancel()

    def snapshot(self) -> dict:
        """What the heartbeat row shows the admin: the listen streams, and the calls in flight."""
        return {"listens": [listen.describe() for listen in self.listens.values()],
                "calls": [call.describe() for call in self.calls.values()]}
