"""Requests in flight in this process (`Requests`): their tasks, their hosts, and the client's answers.

A request runs as its own task, apart from any connection: a disconnect ends the
connection, the task keeps going and its events keep being stored. Only
`notifications/cancelled` (or the session's end) cancels it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections import Counter, deque
from dataclasses import dataclass

from django.conf import settings

from ..conf import mcp_settings
from ..limits import StreamBudget, hit
from ..models import Stream
from ..protocol import jsonrpc, tasks
from ..protocol.context import Context
from ..protocol.dispatch import POLLING_VERSION
from ..protocol.jsonrpc import JSONRPCError
from ..storage import store
from ..storage.executor import BatchExecutor
from ..wakeups.relay import Relay
from . import errors, observe
from .task_events import TaskEventLog
from .tasks import RunningTask, Tasks

# Something a host may show the model while a 2025-11-25 task runs (the spec's provisional key).
MODEL_IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"

logger = logging.getLogger("mcp_transport")


def request_key(request_id) -> str:
    """JSON-RPC ids 1 and "1" are different requests."""
    return str(request_id) if type(request_id) is int else json.dumps(request_id)


@dataclass
class InFlight:
    task: asyncio.Task | None = None
    stream: store.PendingStream | None = None
    cancelled_by_client: bool = False
    # Set by an operator's cancel (the admin): the client gets a JSON-RPC error as the response.
    cancelled_by_operator: bool = False
    cancel_reason: str | None = None

    @property
    def stream_id(self) -> int | None:
        return self.stream.id if self.stream is not None else None


class RequestHost:
    """What a request's context reaches (protocol.context.Host): its messages, stored on its stream
    before anyone sends them; its session's subscriptions and log level; the database thread."""

    # Writes (of up to 128 messages each) a tool may have queued before `send` waits for the oldest.
    MAX_QUEUED = 16

    def __init__(self, requests: Requests, session, stream: store.PendingStream | None):
        self.requests = requests
        self.session = session
        self.stream = stream
        self.budget = StreamBudget()
        self.queued: deque[asyncio.Future] = deque()
        self.sent = 0

    async def send(self, message: dict):
        """Queue the message's write and return: it is sent once stored, in order, so a tool
        emitting many notifications shares commits instead of waiting for each."""
        if self.stream is None:
            return
        payload = jsonrpc.dumps(message)
        self.budget.spend(payload, self.stream.id)
        stored, new = self.requests.write(self.stream, [payload])
        if new:
            stored.add_done_callback(self._publish)
            self.queued.append(stored)
        while self.queued and (self.queued[0].done() or len(self.queued) > self.MAX_QUEUED):
            await self.queued.popleft()
        self.sent += 1
        if self.sent % 32 == 0:
            await asyncio.sleep(0)  # a tool that only emits must still let its events go out

    def _publish(self, stored: asyncio.Future):
        if not stored.cancelled() and stored.exception() is None:
            if not self.stream.answered:
                self.requests.relay.publish(self.stream.id, stored.result())
        elif not stored.cancelled():
            logger.error("Storing an event of stream %s failed", self.stream.id, exc_info=stored.exception())

    async def request(self, method, params, timeout):
        if self.stream is None:
            raise JSONRPCError(
                jsonrpc.INTERNAL_ERROR, "Cannot send requests to the client without an SSE stream (JSON_RESPONSE)"
            )
        request_id = f"srv~{self.requests.worker_id}~{secrets.token_hex(8)}"
        key = (self.session.id, request_key(request_id))
        future = asyncio.get_running_loop().create_future()
        pending = self.requests.pending
        pending[key] = future
        try:
            await self.send(jsonrpc.request(request_id, method, params))
            timeout = timeout if timeout is not None else mcp_settings.CLIENT_REQUEST_TIMEOUT
            response = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise JSONRPCError(jsonrpc.CLIENT_ANSWER_TIMEOUT, f"The client did not answer {method} in time") from None
        finally:
            pending.pop(key, None)
        if "error" in response:
            # Passed on as the request's own error: only as JSON-RPC allows one (an integer code, a message).
            error = response["error"]
            code, message = error.get("code"), error.get("message")
            raise JSONRPCError(code if isinstance(code, int) and not isinstance(code, bool) else jsonrpc.INTERNAL_ERROR,
                               message if isinstance(message, str) and message else f"The client failed {method}",
                               error.get("data"))
        return response.get("result") or {}

    async def close_connection(self, retry_ms):
        # A pre-2025-11-25 client may have no event id to resume from: its connection stays.
        if self.stream is not None and self.session.protocol_version >= POLLING_VERSION:
            if self.queued:
                await self.queued[-1]  # the connection sends what was sent before the close
            while not self.stream.queued:
                await asyncio.sleep(0)  # the tool's first turn: the INSERT is queued right after it
            if self.stream.id is None:
                await self.requests.executor.run(store.stream_pk, self.stream)
            self.requests.relay.close_connections(self.stream.id, retry_ms, reason="tool")

    async def notify_session(self, message: dict):
        await self.requests.send_to_session(self.session.id, message)

    async def run_sync(self, fn, *args):
        return await self.requests.executor.run(fn, *args)

    async def subscribe(self, uri: str):
        await store.asubscribe(self.session.id, uri)

    async def unsubscribe(self, uri: str):
        await store.aunsubscribe(self.session.id, uri)

    async def set_log_level(self, level: str):
        await store.aset_log_level(self.session.id, level)
        self.session.log_level = level


class TaskHost(RequestHost):
    """A 2025-11-25 task's host: no stream of its own (the call answered with the task); its
    notifications are stored against the task and on the session's GET stream, saying which task
    they are about."""

    def __init__(self, requests: "Requests", session, task_id: str):
        super().__init__(requests, session, None)
        self.task_id = task_id
        self.events = TaskEventLog(task_id, lambda: requests.standalone_stream(session.id), requests.relay.publish)

    async def send(self, message: dict):
        await self.events.send(message)


class Requests:
    """The requests this process runs, the client answers they wait for, and the sessions' GET
    streams it knows; one per process, owned by the worker (`execution.worker`)."""

    def __init__(self, worker_id: str, executor: BatchExecutor, relay: Relay):
        self.worker_id = worker_id
        self.executor = executor
        self.relay = relay
        self.tasks: Tasks | None = None  # the worker's, set once it has both
        self.inflight: dict[tuple[str, str], InFlight] = {}
        self.pending: dict[tuple[str, str], asyncio.Future] = {}
        self.standalone: dict[str, int] = {}
        self.streams_in_flight: Counter[str] = Counter()

    def remember_standalone(self, session_id: str, stream_id: int):
        self.standalone[session_id] = stream_id

    async def standalone_stream(self, session_id: str) -> int:
        """The id of the session's standalone GET stream (created if missing)."""
        stream_id = self.standalone.get(session_id)
        if stream_id is None:
            stream_id, _, _ = await store.astandalone_stream(session_id)
            self.standalone[session_id] = stream_id
        return stream_id

    async def send_to_session(self, session_id: str, message: dict):
        """Store a server-initiated message on the session's standalone GET stream and wake its reader."""
        stream_id = await self.standalone_stream(session_id)
        self.relay.publish(stream_id, await store.aappend(stream_id, [jsonrpc.dumps(message)]))

    def make_context(self, server, session, message, stream, scope=None) -> Context:
        user = _user(scope)
        return Context(
            server=server, session=session, request_id=message.id, params=message.params,
            host=RequestHost(self, session, stream), user=user, scope=scope,
        )

    async def _answer(self, server, session, message, stream, scope) -> tuple[dict, str]:
        ctx = self.make_context(server, session, message, stream, scope)
        try:
            params = message.params or {}
            if message.method in tasks.SESSION_METHODS:
                handling = self.tasks.handle_session(server, session, message.method, params, session.principal, ctx)
            else:
                handling = server.dispatcher.handle(message.method, params, ctx)
            result = await observe.request(server, message.method, params, ctx, handling)
            return jsonrpc.result(message.id, result), Stream.Status.COMPLETED
        except JSONRPCError as exc:
            return jsonrpc.error_from(message.id, exc), Stream.Status.COMPLETED
        except Exception as exc:
            logger.exception("Request %s %r failed", message.method, message.id)
            text = "Internal error" + (f": {type(exc).__name__}: {exc}" if settings.DEBUG else "")
            return jsonrpc.error(message.id, jsonrpc.INTERNAL_ERROR, text), Stream.Status.FAILED

    async def _run_on_stream(self, server, session, message, stream: store.PendingStream, scope, inflight: InFlight):
        try:
            payload, status = await self._answer(server, session, message, stream, scope)
        except asyncio.CancelledError:
            if inflight.cancelled_by_operator:
                error = errors.operator_cancelled(message.id, inflight.cancel_reason)
                await self._finish(stream, [jsonrpc.dumps(error)], Stream.Status.CANCELLED)
                return
            if inflight.cancelled_by_client:
                await self._finish(stream, [], Stream.Status.CANCELLED)
                return
            raise
        await self._finish(stream, [jsonrpc.dumps(payload)], status)

    async def _finish(self, stream: store.PendingStream, payloads: list[str], status: str):
        """The stream's last write, and the wake-up that sends it."""
        events = await self.write(stream, payloads, status)[0]
        if stream.id is None or stream.answered:
            return
        if events:
            self.relay.publish(stream.id, events)
        else:
            self.relay.stream_ended(stream.id)

    def write(self, stream: store.PendingStream, payloads: list[str], finish: str | None = None):
        """Queue a write on a request's stream: -> (future of its events, whether it is a new write).

        Before the stream's INSERT is queued the write waits on the stream and goes with it;
        notifications in a row share one write.
        """
        if not stream.queued:
            if not finish and stream.early and not stream.early[-1][1]:
                stream.early[-1][0].extend(payloads)
                return stream.early[-1][2], False
            future = asyncio.get_running_loop().create_future()
            stream.early.append((list(payloads), finish, future))
            return future, True
        if finish:
            if payloads:
                return self.executor.submit(store.append, stream, payloads, finish=finish), True
            return self.executor.submit(_finish_without_message, stream, finish), True
        return self.executor.submit_items(store.append, stream, payloads)

    async def start_on_new_stream(self, server, session, message, scope=None, **stream_fields):
        """Open a request stream and run the request on it.

        The request's task gets one turn of the loop before the stream's INSERT is queued: what it
        wrote by then (a quick request's whole answer) is stored in the same statements.
        -> (the stream, its priming event or None, the events written by then, in order).
        """
        stream = store.PendingStream()
        task = self.start_on_stream(server, session, message, stream, scope)
        await asyncio.sleep(0)
        early, stream.early = stream.early, []
        stream.queued = True
        try:
            _, priming, stored = await self.executor.submit(
                store.open_request_stream, session.id, pending=stream,
                writes=[(payloads, finish) for payloads, finish, _ in early], **stream_fields,
            )
        except BaseException:
            task.cancel()
            for _, _, future in early:
                future.cancel()
            raise
        for (_, _, future), events in zip(early, stored):
            if not future.done():
                future.set_result(events)
        return stream, priming, [e for events in stored for e in events]

    def start_on_stream(self, server, session, message, stream: store.PendingStream, scope=None) -> asyncio.Task:
        """Run a request in its own task; its response becomes the stream's final event."""
        key = (session.id, request_key(message.id))
        inflight = InFlight(stream=stream)
        task = asyncio.get_running_loop().create_task(
            self._run_on_stream(server, session, message, stream, scope, inflight)
        )
        inflight.task = task
        self.inflight[key] = inflight
        counts = self.streams_in_flight
        counts[session.id] += 1

        def done(_):
            if self.inflight.get(key) is inflight:
                del self.inflight[key]
            counts[session.id] -= 1
            if not counts[session.id]:
                del counts[session.id]

        task.add_done_callback(done)
        return task

    async def task_call(self, server, message, scope):
        """For a `tools/call` on a session: the tool when the call is to run as a task (the client
        asked, the tool allows it); None for a plain call. -32601 where the two disagree, as the
        spec asks; a hidden tool is left to the plain path ("Unknown tool")."""
        if message.method != "tools/call":
            return None
        params = message.params or {}
        name = params.get("name")
        tool = server.tools.get(name) if isinstance(name, str) else None
        if tool is None or tool.restricted and not await self.executor.run(tool.allowed, _user(scope)):
            return None
        augmented = "task" in params
        if augmented and tool.task_support == "forbidden":
            raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"Tool {tool.name} does not run as a task")
        if not augmented and tool.task_support == "required":
            raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"Tool {tool.name} runs only as a task: call it with 'task'")
        return tool if augmented else None

    async def start_task(self, server, session, message, scope, tool) -> dict:
        """A task-augmented `tools/call` (2025-11-25): the task is written, its work starts here,
        and the call is answered with it at once."""
        params = message.params or {}
        running = RunningTask(self.tasks, server, message, session.client_capabilities or {}, session.principal,
                              tool.name, session_id=session.id, ttl_ms=tasks.requested_ttl(params))
        ctx = self.make_context(server, session, message, None, scope)
        running.user_id = getattr(ctx.user, "pk", None)
        await running.become_task()
        ctx.host = TaskHost(self, session, running.task_id)
        ctx.task = running
        await self.tasks.adopt(running, asyncio.ensure_future(self._task_outcome(server, message, ctx)))
        fields = running.created.result()
        return jsonrpc.result(message.id, {"task": tasks.session_fields(fields),
                                           "_meta": {MODEL_IMMEDIATE_RESPONSE: f"Started task {running.task_id}."}})

    @staticmethod
    async def _task_outcome(server, message, ctx) -> dict:
        params = message.params or {}
        return await errors.response(message, observe.request(
            server, message.method, params, ctx, server.dispatcher.handle(message.method, params, ctx)))

    async def answer_now(self, server, session, message, scope=None) -> dict | None:
        """Run a request to completion for a JSON answer; None if the client cancelled it."""
        key = (session.id, request_key(message.id)) if session is not None else None
        inflight = InFlight()
        task = asyncio.ensure_future(self._answer(server, session, message, None, scope))
        inflight.task = task
        if key:
            self.inflight[key] = inflight
        try:
            payload, _ = await task
            return payload
        except asyncio.CancelledError:
            if inflight.cancelled_by_operator:
                return errors.operator_cancelled(message.id, inflight.cancel_reason)
            if inflight.cancelled_by_client:
                return None
            raise
        finally:
            if key and self.inflight.get(key) is inflight:
                del self.inflight[key]

    def in_flight(self, session_id: str, request_id) -> bool:
        """Whether a request of this session with this id runs here (ids must not be reused until answered)."""
        inflight = self.inflight.get((session_id, request_key(request_id)))
        return inflight is not None and inflight.task is not None and not inflight.task.done()

    def check_in_flight(self, session_id: str):
        """MAX_STREAMS_PER_SESSION, counted on this worker (no query on the hot path)."""
        limit = mcp_settings.MAX_STREAMS_PER_SESSION
        if limit and self.streams_in_flight[session_id] >= limit:
            raise hit(f"MAX_STREAMS_PER_SESSION ({limit}) requests in flight", session=session_id)

    def running_streams(self) -> dict[tuple[str, str], int]:
        """(session id, request key) -> stream id, for the requests running here on a stream."""
        return {key: f.stream_id for key, f in self.inflight.items()
                if f.stream_id is not None and f.task is not None and not f.task.done()}

    def cancel(self, session_id: str, request_id, reason: str | None = None, by: str | None = None) -> bool:
        """Cancel a request running here. `by="operator"` (the admin): it ends with a JSON-RPC error;
        otherwise (`notifications/cancelled`, the session's end) without a response."""
        inflight = self.inflight.get((session_id, request_key(request_id)))
        if inflight is None or inflight.task is None or inflight.task.done():
            return False
        by = "operator" if by == "operator" else "client"
        logger.info("Request %r of session %s cancelled by the %s: %s", request_id, session_id, by, reason or "-")
        if by == "operator":
            inflight.cancelled_by_operator = True
            inflight.cancel_reason = reason
        else:
            inflight.cancelled_by_client = True
        inflight.task.cancel()
        return True

    def cancel_delivered(self, session_id: str, payload: dict):
        """A cancel another process sent (over the channel layer, or stored for this worker)."""
        self.cancel(session_id, payload["request"], payload.get("reason"), by=payload.get("by"))

    def cancel_session(self, session_id: str):
        """The session ended: cancel its requests and wake its connections so they close."""
        for (sid, _), inflight in list(self.inflight.items()):
            if sid == session_id and inflight.task is not None:
                inflight.cancelled_by_client = True
                inflight.task.cancel()
                if inflight.stream_id is not None:
                    self.relay.stream_ended(inflight.stream_id)
        for (sid, _), future in list(self.pending.items()):
            if sid == session_id and not future.done():
                future.cancel()
        standalone = self.standalone.pop(session_id, None)
        if standalone is not None:
            self.relay.stream_ended(standalone)

    def resolve_here(self, session_id: str, response: dict) -> bool:
        """Hand a client's answer to the task of this process waiting for it."""
        future = self.pending.get((session_id, request_key(response.get("id"))))
        if future is None or future.done():
            return False
        future.set_result(response)
        return True

    async def resolve(self, session_id: str, response: dict) -> bool:
        """The client answered one of our requests: hand it to the waiting task, here or on its worker."""
        if self.resolve_here(session_id, response):
            return True
        request_id = response.get("id")
        parts = request_id.split("~") if isinstance(request_id, str) else []
        if len(parts) == 3 and parts[0] == "srv" and parts[1] != self.worker_id:
            await self.relay.respond(parts[1], session_id, response)
            return True
        return False

    async def cancel_anywhere(self, session_id: str, request_id, reason=None):
        """`notifications/cancelled`: cancel here, or tell the worker that runs the request."""
        if self.cancel(session_id, request_id, reason):
            return
        worker = await store.arequest_worker(session_id, request_key(request_id))
        if worker and worker != self.worker_id:
            await self.relay.cancel(worker, session_id, request_id, reason)

    async def notify_subscribers(self, server_name: str, uri: str):
        message = jsonrpc.notification("notifications/resources/updated", {"uri": uri})
        for session_id in await store.asubscribed_sessions(server_name, uri):
            await self.send_to_session(session_id, message)

    async def broadcast(self, server_name: str, method: str):
        message = jsonrpc.notification(method)
        for session_id in await store.aactive_session_ids(server_name):
            await self.send_to_session(session_id, message)


def _user(scope):
    user = (scope or {}).get("user")
    return user if getattr(user, "is_authenticated", False) else None


def _finish_without_message(stream, status) -> list:
    store.finish(stream, status)
    return []
