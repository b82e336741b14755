"""2026-07-28 requests on this worker: the calls in flight and the `subscriptions/listen` streams.

Nothing here is stored per message: a modern request's progress and log messages go straight to
its own connection (the revision has no resumption), and closing that connection cancels it.
What an operator must see has a `ModernRequest` row while it lasts: every listen stream, and every
call still running after RECORD_AFTER_SECONDS (a quick call costs no write). The admin can end
either (`END_MODERN` through the relay); the worker ends both cleanly on shutdown.

Change notifications reach listen streams on every worker: the worker where the change happened
delivers to its own and tells the others through the relay (`NOTIFY`).
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from .. import metrics
from ..protocol import jsonrpc, modern, tasks
from ..protocol.context import Context
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.mrtr import Inputs
from ..conf import mcp_settings
from ..limits import hit
from ..models import ModernRequest
from ..storage import store
from ..storage.executor import BatchExecutor
from ..wakeups.relay import Relay
from . import errors, observe
from .tasks import RunningTask, Tasks

logger = logging.getLogger("mcp_transport")

ENDED = object()  # put on a listen stream's queue: the server ends it (a result, then the close)
RECORD_AFTER_SECONDS = 1.0
# Notifications a listen stream may have waiting for its client before it is ended.
MAX_LISTEN_BACKLOG = 1000


def _json_id(request_id) -> str:
    return json.dumps(request_id)


def _client(meta) -> tuple[str, str]:
    info = (meta.client_info if meta is not None else None) or {}
    name, version = info.get("name", ""), info.get("version", "")
    return (name if isinstance(name, str) else "", version if isinstance(version, str) else "")


class ModernHost:
    """protocol.context.Host for a modern request: messages to its connection, changes to every
    listener, no session to keep anything in."""

    def __init__(self, calls: "ModernRequests", server, emit):
        self.calls = calls
        self.server = server
        self.emit = emit
        self.running: RunningTask | None = None

    async def send(self, message: dict):
        """To the call's connection; once the call is a task, stored against it (the extension
        sends no notifications about a task: its progress shows as the task's status message)."""
        if self.running is None or self.running.task_id is None:
            await self.emit(message)
        else:
            await self.running.events.send(message)

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
    row: asyncio.Future | None = None  # its ModernRequest id, once written
    # Why the server stopped it, if it did: the call then answers this error instead.
    stopped_with: dict | None = None



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
    ending: bool = False
    ticket: "Ticket | None" = None
    row: asyncio.Future | None = None



class Ticket:
    """One admitted request's place in its principal's count."""

    def __init__(self, counts: Counter, principal: str):
        self.counts = counts
        self.principal = principal
        self.released = False

    def release(self, *_):
        if not self.released:
            self.released = True
            self.counts[self.principal] -= 1
            if self.counts[self.principal] <= 0:
                del self.counts[self.principal]


class ModernRequests:
    """The modern requests and listen streams of this process; one per process, owned by the worker."""

    def __init__(self, executor: BatchExecutor, relay: Relay, tasks_here: Tasks):
        self.executor = executor
        self.relay = relay
        self.tasks = tasks_here
        self.calls: dict[int, Call] = {}
        self.listens: dict[int, Listen] = {}
        self._numbers = itertools.count(1)
        self.per_principal: Counter[str] = Counter()

    def admit(self, principal: str) -> "Ticket":
        """MAX_REQUESTS_PER_PRINCIPAL: calls and listen streams in flight per authenticated principal,
        counted on this worker. The ticket is released once, whichever way the request ends (even
        one cancelled before it started)."""
        limit = mcp_settings.MAX_REQUESTS_PER_PRINCIPAL
        if principal and limit and self.per_principal[principal] >= limit:
            raise hit(f"MAX_REQUESTS_PER_PRINCIPAL ({limit}) requests in flight", principal=principal)
        self.per_principal[principal] += 1
        return Ticket(self.per_principal, principal)

    async def run(self, server, message, scope, meta: modern.RequestMeta, inputs: Inputs | None, emit,
                  principal: str = "", ticket: Ticket | None = None) -> dict:
        """Run one request (`admit`ted) to its JSON-RPC response; its notifications go to `emit` on the way."""
        params = message.params or {}
        name = params.get("name", params.get("uri", ""))
        call = Call(next(self._numbers), server.name, message.method, name if isinstance(name, str) else "",
                    principal)
        call.task = asyncio.current_task()
        self.calls[call.number] = call
        timer = asyncio.get_running_loop().call_later(RECORD_AFTER_SECONDS, self._record_call, call, message, meta)
        user = (scope or {}).get("user")
        ctx = Context(server=server, session=None, request_id=message.id, params=params,
                      host=ModernHost(self, server, emit), user=user if getattr(user, "is_authenticated", False)
                      else None, scope=scope, modern=meta, inputs=inputs)
        try:
            if message.method in tasks.METHODS:
                if not tasks.declared(meta.capabilities):
                    raise tasks.missing_extension()
                result = await observe.request(server, message.method, params, ctx,
                                               self.tasks.handle(server, message.method, params, principal,
                                                                 ctx.granted_scopes))
                return jsonrpc.result(message.id, server.modern.complete(message.method, result))
            running = await self.may_become_task(server, message, ctx, principal)
            if running is None:
                return await self.outcome(server, message, ctx)
            ctx.task = ctx.host.running = running
            running.user_id = getattr(ctx.user, "pk", None)
            if inputs is not None:
                running.prior_answers = {key: answer for key, (_, answer) in inputs.answered.items()}
            return await self.tasks.run_call(running, self.outcome(server, message, ctx))
        except JSONRPCError as exc:
            return jsonrpc.error_from(message.id, exc)
        except asyncio.CancelledError:
            if call.stopped_with is None:
                raise
            return {**call.stopped_with, "id": message.id}
        except Exception as exc:
            logger.exception("Request %s %r failed", message.method, message.id)
            return {"jsonrpc": "2.0", "id": message.id, "error": errors.internal(exc)}
        finally:
            timer.cancel()
            self.calls.pop(call.number, None)
            if ticket is not None:
                ticket.release()
            self._forget(call.row)

    @staticmethod
    async def outcome(server, message, ctx) -> dict:
        """The request's JSON-RPC response (its handler's result, or its error)."""
        params = message.params or {}
        return await errors.response(message, observe.request(
            server, message.method, params, ctx, server.modern.handle(message.method, params, ctx)))

    async def may_become_task(self, server, message, ctx, principal: str) -> RunningTask | None:
        """A call of a tool that supports tasks, from a client that accepts them: it may become one.
        A tool that requires tasks, called by a client that does not, is refused (-32021)."""
        if message.method != "tools/call":
            return None
        name = (message.params or {}).get("name")
        tool = server.tools.get(name) if isinstance(name, str) else None
        if tool is None or tool.task_support == "forbidden":
            return None
        if tool.restricted and not await ctx.host.run_sync(tool.allowed, ctx.user):
            return None  # the call answers "Unknown tool", as for anyone it is hidden from
        if not tasks.declared(ctx.modern.capabilities):
            if tool.task_support == "required":
                raise tasks.missing_extension()
            return None
        return RunningTask(self.tasks, server, message, ctx.modern.capabilities, principal, tool.name)

    def _record_call(self, call: Call, message, meta):
        client_name, client_version = _client(meta)
        call.row = asyncio.ensure_future(store.aopen_modern(
            ModernRequest.Kind.CALL, call.server, call.method, call.name, _json_id(message.id), call.principal,
            client_name, client_version))
        call.row.add_done_callback(_log_failure)

    def _forget(self, row: asyncio.Future | None):
        """Delete a request's row once it is written (a write still queued is waited for)."""
        if row is None:
            return

        async def close():
            try:
                row_id = await row
            except Exception:
                return
            await store.aclose_modern([row_id])

        asyncio.ensure_future(close()).add_done_callback(_log_failure)

    def open_listen(self, server_name: str, listen_id, agreed: dict, principal: str = "", meta=None,
                    ticket: Ticket | None = None) -> Listen:
        """A listen stream (`admit`ted: its ticket), held until `close_listen`."""
        listen = Listen(next(self._numbers), server_name, listen_id, agreed, principal)
        listen.ticket = ticket
        self.listens[listen.number] = listen
        metrics.listen_streams_opened.inc()
        metrics.labeled(metrics.connections, "listen").inc()
        client_name, client_version = _client(meta)
        listen.row = asyncio.ensure_future(store.aopen_modern(
            ModernRequest.Kind.LISTEN, server_name, "subscriptions/listen", "", _json_id(listen_id), principal,
            client_name, client_version, agreed))
        listen.row.add_done_callback(_log_failure)
        return listen

    def close_listen(self, listen: Listen, *_):
        if self.listens.pop(listen.number, None) is not None:
            metrics.labeled(metrics.connections, "listen").dec()
            if listen.ticket is not None:
                listen.ticket.release()
            self._forget(listen.row)

    def end_recorded(self, row_id: int, reason: str | None = None) -> bool:
        """An operator ends a request by its row (the admin): a listen stream gets its final result,
        a call is cancelled and answered with a JSON-RPC error."""
        for listen in list(self.listens.values()):
            if _row_id(listen.row) == row_id:
                listen.queue.put_nowait(ENDED)
                return True
        for call in list(self.calls.values()):
            if _row_id(call.row) == row_id and call.task is not None and not call.task.done():
                call.stopped_with = errors.operator_cancelled(None, reason or "Ended by an operator")
                call.task.cancel()
                return True
        return False

    async def notify(self, server_name: str, method: str, params: dict | None = None):
        """A change: to this worker's listen streams now, to the other workers' through the relay."""
        self.deliver(server_name, method, params)
        self.relay.notify(server_name, method, params)

    def deliver(self, server_name: str, method: str, params: dict | None):
        """To this worker's listen streams that asked for it. A stream whose client does not read
        (MAX_LISTEN_BACKLOG notifications waiting) is ended instead: it may listen again."""
        for listen in list(self.listens.values()):
            if listen.server != server_name or listen.ending or not modern.wants(listen.agreed, method, params):
                continue
            if listen.queue.qsize() >= MAX_LISTEN_BACKLOG:
                logger.warning("Listen stream %r of %s ended: its client left %s notifications unread",
                               listen.listen_id, listen.principal or "an anonymous client", MAX_LISTEN_BACKLOG)
                listen.ending = True
                listen.queue.put_nowait(ENDED)
                continue
            listen.queue.put_nowait(modern.on_listen(listen.listen_id, method, params))

    def end_listens(self):
        """Shutdown: every listen stream gets its final result and closes."""
        for listen in list(self.listens.values()):
            listen.queue.put_nowait(ENDED)

    def stop_calls(self, worker_id: str):
        """Shutdown, past its grace: the calls still running answer a worker_shutdown error."""
        for call in list(self.calls.values()):
            if call.task is not None and not call.task.done():
                call.stopped_with = json.loads(errors.worker_shutdown(None, worker_id))
                call.task.cancel()



def _row_id(row: asyncio.Future | None) -> int | None:
    if row is None or not row.done() or row.cancelled() or row.exception() is not None:
        return None
    return row.result()


def _log_failure(future: asyncio.Future):
    if not future.cancelled() and future.exception() is not None:
        logger.warning("Recording a modern request failed", exc_info=future.exception())
