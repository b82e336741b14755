"""The Streamable HTTP endpoint: one ASGI application answering POST, GET and DELETE.

A request answered with SSE runs as its own task (execution.runner); the endpoint only
holds the connection: it writes the events the task stores, in order, until the
response, or until the disconnect policy (or the tool) closes the connection early.
The client then resumes with GET + Last-Event-ID, here or on any other worker.

It is a plain ASGI application, not a Channels consumer: a connection needs no channel of its
own (wake-ups reach it through this process's bus, and other workers' through the relay's one
channel per process), and no hop to a thread before each message to close stale database
connections (every database call runs on the store's database thread, which checks its own).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from .. import auth, limits, metrics, policies, signals, tracing
from ..conf import mcp_settings
from ..eventids import format_event_id, format_event_ids, parse_event_id
from ..execution import sessions, streams
from ..execution.runner import request_key
from ..execution.worker import worker
from ..limits import LimitExceeded
from ..models import Event, Stream
from ..protocol import jsonrpc
from ..protocol.context import GRANTED_SCOPES
from ..protocol.dispatch import POLLING_VERSION, scoped_target
from ..protocol.server import get_server
from . import guards, sse
from .guards import Rejected, too_many
from .modern import ModernPost, is_modern, is_modern_get

logger = logging.getLogger("mcp_transport")

SESSION_HEADER = "mcp-session-id"
# A whole response sent at once has a length: nothing to keep out of caches and proxy buffers.
SSE_COMPLETE_HEADERS = [(b"content-type", b"text/event-stream")]
SSE_HEADERS = [*SSE_COMPLETE_HEADERS, (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
JSON_HEADERS = [(b"content-type", b"application/json")]
ALLOW = "GET, POST, DELETE"
FINAL = Event.Kind.FINAL


@dataclass
class ConnectionTerms:
    """The policies in force on one SSE connection, and how the admin shows them."""

    conn: policies.Connection
    disconnect: policies.DisconnectPolicy
    retry_ms: int | None
    label: str


class MCPEndpoint:
    """Mount with `MCPEndpoint.as_asgi(server="default")`, or use `mcp_transport.routing`."""

    @classmethod
    def as_asgi(cls, server="default"):
        """An ASGI application serving `server` (an MCPServer or its name): one instance per request."""

        async def app(scope, receive, send):
            await cls(server).serve(scope, receive, send)

        app.endpoint_class = cls
        return app

    def __init__(self, server="default"):
        self.server_ref = server
        self.body: list[bytes] = []
        self.received = 0
        self.responded = False
        self.pump: asyncio.Task | None = None
        self.cors: list = []
        self.principal = None

    async def serve(self, scope, receive, send):
        self.scope = scope
        self.send = send
        self.server = get_server(self.server_ref)
        self.headers = guards.header_map(scope)
        await worker.start()
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    await self.http_disconnect()
                    return
                if message["type"] == "http.request" and await self.http_request(message):
                    return
        finally:
            if self.pump is not None and not self.pump.done():
                self.pump.cancel()

    # ASGI messages

    async def http_request(self, message) -> bool:
        """Gather the body, then answer; -> whether this request is over (nothing is streaming)."""
        if self.responded:
            return False
        try:
            if not self.body:
                guards.check_content_length(self.headers)
            chunk = message.get("body", b"")
            self.received += len(chunk)
            if self.received > mcp_settings.MAX_REQUEST_BYTES:
                raise Rejected(413, f"Payload Too Large: the limit is {mcp_settings.MAX_REQUEST_BYTES} bytes")
            self.body.append(chunk)
            if message.get("more_body"):
                return False
            await self.handle(b"".join(self.body))
        except Rejected as exc:
            if exc.status == 413:
                limits.hit("MAX_REQUEST_BYTES", bytes=self.received, path=self.scope.get("path"))
            await self.reject(exc)
        except Exception:
            logger.exception("Unexpected error in the MCP endpoint")
            if not self.responded:
                await self.send_json(500, jsonrpc.error(None, jsonrpc.INTERNAL_ERROR, "Internal error"))
        return self.pump is None

    async def http_disconnect(self):
        if self.pump is not None and not self.pump.done():
            self.pump.cancel()
            try:
                await self.pump
            except asyncio.CancelledError:
                pass

    # Responses

    async def send_headers(self, status: int, headers: list):
        self.responded = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers + self.cors})

    async def send_body(self, body: bytes, more_body=False):
        await self.send({"type": "http.response.body", "body": body, "more_body": more_body})

    async def send_json(self, status: int, payload: dict | None, headers=()):
        body = jsonrpc.dumps(payload).encode("utf-8") if payload is not None else b""
        all_headers = (JSON_HEADERS if payload is not None else []) + list(headers)
        await self.send_headers(status, all_headers)
        await self.send_body(body)

    async def reject(self, exc: Rejected, request_id=None):
        headers = [(k.encode(), v.encode()) for k, v in exc.headers]
        await self.send_json(exc.status, jsonrpc.error(request_id, exc.code, exc.message), headers)

    def session_headers(self, session_id: str):
        return [(b"mcp-session-id", session_id.encode("ascii"))]

    # Methods

    async def handle(self, body: bytes):
        method = self.scope.get("method", "GET").upper()
        if guards.is_preflight(method, self.headers):
            guards.check_host_and_origin(self.headers)
            self.cors = guards.cors_headers(self.headers)
            await self.send_headers(204, [
                (b"access-control-allow-methods", ALLOW.encode()),
                (b"access-control-allow-headers", guards.CORS_ALLOW_HEADERS.encode()),
                (b"access-control-max-age", b"600"),
            ])
            await self.send_body(b"")
            return
        if method not in ("GET", "POST", "DELETE"):
            raise Rejected(405, f"Method Not Allowed: use {ALLOW}", headers=[("allow", ALLOW)])
        guards.check_host_and_origin(self.headers)
        self.cors = guards.cors_headers(self.headers)
        await self.authenticate()
        if method != "POST" and is_modern_get(self.headers):
            raise Rejected(405, "Method Not Allowed: MCP 2026-07-28 has no GET stream and no sessions; POST requests",
                           headers=[("allow", "POST")])
        if method == "POST":
            await self.post(body)
        elif method == "GET":
            await self.get()
        else:
            await self.delete()

    async def authenticate(self):
        """Who is calling (AUTH_BACKENDS); 401 with WWW-Authenticate when that is not good enough."""
        self.principal = None
        if not mcp_settings.AUTH_BACKENDS:
            self.scope[GRANTED_SCOPES] = None  # no authentication at all: scopes limit no one
            return
        self.scope[GRANTED_SCOPES] = frozenset()
        try:
            self.principal = await auth.authenticate(self.scope, self.headers)
        except auth.AuthenticationFailed as exc:
            raise self.unauthorized(f"Unauthorized: {exc}", error="invalid_token") from None
        if self.principal is None and mcp_settings.REQUIRE_AUTH:
            raise self.unauthorized("Unauthorized: authentication required")
        if self.principal is not None:
            self.scope["user"] = self.principal.user
            self.scope[GRANTED_SCOPES] = self.principal.scopes

    def resource_metadata_url(self) -> str | None:
        """Where OAuth clients find the authorization server (RFC 9728), when there is one."""
        if not auth.authorization_servers(self.origin):
            return None
        return f"{self.origin}{auth.metadata_path(self.scope['path'])}"

    @property
    def origin(self) -> str:
        return auth.resource_origin(self.scope, self.headers)

    def unauthorized(self, message: str, error: str | None = None, scope: str | None = None) -> Rejected:
        if scope is None:
            baseline = mcp_settings.CHALLENGE_SCOPES
            scope = " ".join(mcp_settings.SCOPES_SUPPORTED if baseline is None else baseline) or None
        challenge = auth.bearer_challenge(error=error, scope=scope, resource_metadata=self.resource_metadata_url())
        return Rejected(401, message, headers=[("www-authenticate", challenge)])

    def check_scopes(self, message):
        """A token without the scopes of the tool, prompt or resource it uses gets 403
        insufficient_scope naming the scopes to ask for (its own and the missing ones), so the
        client can ask its user for them (incremental consent); an anonymous caller gets 401."""
        item = scoped_target(self.server, message.method, message.params)
        if item is None:
            return
        granted = self.scope.get(GRANTED_SCOPES)
        missing = item.missing_scopes(granted)
        if not missing:
            return
        if self.principal is None:
            raise self.unauthorized(f"Unauthorized: {message.method} needs a token with scope {' '.join(missing)}",
                                    scope=" ".join(item.scopes))
        wanted = " ".join([*sorted(granted), *missing])
        description = f"{message.method} needs scope {' '.join(missing)}"
        challenge = auth.bearer_challenge(error="insufficient_scope", scope=wanted,
                                          resource_metadata=self.resource_metadata_url(),
                                          error_description=description)
        raise Rejected(403, f"Forbidden: insufficient_scope: {description}", headers=[("www-authenticate", challenge)])

    async def load_session(self):
        """The session named by Mcp-Session-Id; 404 for anyone but the principal who created it."""
        session_id = self.headers.get(SESSION_HEADER)
        if not session_id:
            raise Rejected(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")
        session = None
        if len(session_id) <= 64 and session_id.isascii():
            session = await sessions.load(session_id, self.server.name)
        if session is None or session.principal != self.principal_id:
            raise Rejected(404, "Session not found", code=jsonrpc.SESSION_NOT_FOUND)
        return session

    @property
    def principal_id(self) -> str:
        return self.principal.id if self.principal is not None else ""

    async def post(self, body: bytes):
        json_only = mcp_settings.JSON_RESPONSE
        guards.check_post_headers(self.headers, json_only)
        try:
            message = jsonrpc.parse(body)
        except jsonrpc.JSONRPCError as exc:
            await self.send_json(400, jsonrpc.error_from(None, exc))
            return
        if is_modern(message, self.headers):
            await ModernPost(self, message, json_only or not guards.accepts(self.headers, "text/event-stream")).answer()
            return
        try:
            # initialize is exempt: a client falling back from a newer revision may keep its header.
            if message.is_request and message.method == "initialize":
                await self.initialize(message)
                return
            guards.check_protocol_version(self.headers)
            session = await self.load_session()
            if message.is_request:
                self.check_scopes(message)
        except Rejected as exc:
            await self.reject(exc, message.id if message.is_request else None)
            return
        if message.kind == "response":
            if not await worker.requests.resolve(session.id, message.raw):
                logger.info("Response %r of session %s matches no pending request", message.id, session.id)
            await self.send_json(202, None, self.session_headers(session.id))
            return
        if message.kind == "notification":
            with tracing.notification(message.method, message.params, protocol_version=session.protocol_version,
                                      session_id=session.id, scope=self.scope):
                await self.notification(session, message)
            await self.send_json(202, None, self.session_headers(session.id))
            return
        try:
            task_tool = await worker.requests.task_call(self.server, message, self.scope)
            if task_tool is not None:
                payload = await worker.requests.start_task(self.server, session, message, self.scope, task_tool)
                await self.send_json(200, payload, self.session_headers(session.id))
                return
        except jsonrpc.JSONRPCError as exc:
            await self.send_json(200, jsonrpc.error_from(message.id, exc), self.session_headers(session.id))
            return
        if worker.requests.in_flight(session.id, message.id):
            await self.reject(Rejected(400, "Invalid Request: a request with this id is still in flight in this "
                                            "session; use a new id"), message.id)
            return
        if json_only or not self.server.dispatcher.streams(message.method):
            payload = await worker.requests.answer_now(self.server, session, message, self.scope)
            if payload is None:
                payload = jsonrpc.error(message.id, jsonrpc.REQUEST_CANCELLED, "Request cancelled")
            await self.send_json(200, payload, self.session_headers(session.id))
            return
        try:
            await self.open_request_stream(session, message)
        except LimitExceeded as exc:
            await self.reject(too_many(exc), message.id)

    async def initialize(self, message):
        if not (tracing.on and tracing.active()):
            await self.create_session(message)
            return
        span = tracing.start_request("initialize", None, message.params, request_id=message.id, scope=self.scope)
        token = tracing.use(span)
        error = (jsonrpc.INTERNAL_ERROR, "Internal error")  # unless it answers
        try:
            error = await self.create_session(message, span)
        finally:
            tracing.leave(token)
            tracing.end_request(span, *(error or (None, None)))

    async def create_session(self, message, span=None) -> tuple[int, str] | None:
        """Answer initialize: -> the JSON-RPC error it was answered with, if any."""
        try:
            result, version = self.server.dispatcher.initialize(message.params or {})
        except jsonrpc.JSONRPCError as exc:
            await self.send_json(400, jsonrpc.error_from(message.id, exc))
            return exc.code, exc.message
        limit = mcp_settings.MAX_SESSIONS_PER_PRINCIPAL
        session_id = await sessions.create(self.server.name, version, message.params or {}, self.scope.get("user"),
                                           self.principal_id, limit)
        if session_id is None:
            exc = limits.hit(f"MAX_SESSIONS_PER_PRINCIPAL ({limit}) active sessions", principal=self.principal_id)
            refused = too_many(exc)
            await self.reject(refused, message.id)
            return refused.code, refused.message
        if span is not None:
            tracing.session_started(span, version, session_id)
        await self.send_json(200, jsonrpc.result(message.id, result), self.session_headers(session_id))
        return None

    async def notification(self, session, message):
        if message.method == "notifications/cancelled":
            params = message.params or {}
            if "requestId" in params:
                await worker.requests.cancel_anywhere(session.id, params["requestId"], params.get("reason"))

    def terms(self, session, conn: policies.Connection) -> ConnectionTerms:
        """The disconnect and retry policies in force for a connection, and how to show them."""
        tool = self.server.tools.get(conn.tool) if conn.tool else None
        if tool is not None and tool.disconnect_policy is not None:
            disconnect = policies.resolve_disconnect(tool.disconnect_policy)
            label = policies.describe(tool.disconnect_policy)
        else:
            disconnect, label = policies.default_disconnect(), policies.describe(mcp_settings.DISCONNECT_POLICY)
        if tool is not None and tool.retry_ms is not None:
            retry = policies.resolve_retry(tool.retry_ms)
        else:
            retry = policies.default_retry()
        if session.protocol_version < POLLING_VERSION:
            disconnect, label = policies.Never(), f"never ({session.protocol_version} client)"
        return ConnectionTerms(conn, disconnect, retry.retry_ms(conn), label)

    async def open_request_stream(self, session, message):
        params = message.params or {}
        tool_name = params.get("name", "") if message.method == "tools/call" else ""
        # The stream keeps the name (the admin shows it); one that cannot be stored names no tool.
        tool_name = tool_name if isinstance(tool_name, str) and "\x00" not in tool_name else ""
        worker.requests.check_in_flight(session.id)
        terms = self.terms(session, policies.Connection(0, Stream.Kind.REQUEST, message.method, tool_name))
        follow = await streams.open_request(
            self.server, session, message, self.scope, terms, method=message.method,
            request_id=request_key(message.id), tool_name=tool_name,
            prime=session.protocol_version >= POLLING_VERSION,
        )
        terms.conn.stream_id = follow.stream_id
        await self.start_stream(session, follow, terms)

    async def get(self):
        guards.check_get_headers(self.headers)
        guards.check_protocol_version(self.headers)
        session = await self.load_session()
        last_event_id = self.headers.get("last-event-id")
        if last_event_id is not None:
            await self.resume(session, last_event_id.strip())
            return

        def terms_for(stream_id: int) -> ConnectionTerms:
            return self.terms(session, policies.Connection(stream_id, Stream.Kind.STANDALONE))

        try:
            follow = await streams.follow_standalone(session, terms_for)
        except streams.Conflict:
            raise Rejected(409, "Conflict: this session already has a GET stream open") from None
        await self.start_stream(session, follow, follow.terms,
                                reprime=format_event_id(follow.stream_id, follow.start_seq))

    async def resume(self, session, last_event_id: str):
        started = time.perf_counter()
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            raise Rejected(400, "Bad Request: malformed Last-Event-ID")
        stream_id, seq = parsed
        metrics.reconnects.inc()
        try:
            worker.reconnects.check(stream_id)
        except LimitExceeded as exc:
            raise too_many(exc) from None

        def terms_for(stream: Stream) -> ConnectionTerms:
            return self.terms(session, policies.Connection(
                stream_id, stream.kind, stream.method, stream.tool_name, reconnects=stream.reconnects + 1,
                resumed=True))

        span = tracing.start_replay(self.scope, session_id=session.id, stream_id=stream_id,
                                    last_event_id=last_event_id) if tracing.on and tracing.active() else None
        try:
            follow = await streams.resume(session, stream_id, seq, terms_for)
            if follow is None:
                # Not 404: to a client that sent its session id, 404 says the session is gone.
                raise Rejected(400, "Bad Request: Last-Event-ID names no event of this session")
            replayed = len(follow.events)
            await self.start_stream(session, follow, follow.terms, reprime=last_event_id)
        except BaseException as exc:
            if span is not None:
                tracing.end_replay(span, exc)
            raise
        metrics.replayed(replayed, started)
        if span is not None:
            tracing.end_replay(span, replayed=replayed)
        if signals.stream_resumed.receivers:
            await signals.stream_resumed.asend(sender=None, server=self.server.name, session_id=session.id,
                                               stream_id=stream_id, replayed=replayed)

    async def send_complete(self, session, body: bytes):
        """A whole SSE response at once."""
        await self.send_headers(200, [*SSE_COMPLETE_HEADERS, *self.session_headers(session.id),
                                      (b"content-length", str(len(body)).encode())])
        await self.send_body(body)

    async def start_stream(self, session, follow: streams.Follow, terms: ConnectionTerms, *, reprime=None):
        """Send the SSE headers and what is already there, then hand the connection to the pump."""
        polling = session.protocol_version >= POLLING_VERSION
        first = self.frames(follow.events, terms.retry_ms)
        if not first:
            first = sse.event(reprime, "", terms.retry_ms) if (reprime and polling) else sse.OPENED
        if follow.complete:
            await self.send_complete(session, first)
            self.record_end(follow, "completed")
            return
        await self.send_headers(200, SSE_HEADERS + self.session_headers(session.id))
        await self.send_body(first, more_body=True)
        terms.conn.events_sent = len(follow.events)
        self.pump = asyncio.ensure_future(self.run_pump(follow, terms, session.id))

    def record_end(self, follow: streams.Follow, reason: str, retry_ms: int | None = None):
        if retry_ms is not None and reason != "replaced":
            # A connection replaced by the client's own resumption asked nothing of the client.
            worker.reconnects.closed(follow.stream_id, retry_ms)
        follow.stop(reason)
        metrics.labeled(metrics.connections_closed, reason).inc()

    @staticmethod
    def frames(events: list, retry_ms) -> bytes:
        """One stream's events as SSE: a priming event (seq 0, first if there) carries `retry`."""
        head = b""
        if events and events[0].kind == Event.Kind.PRIMING:
            head, events = sse.event(events[0].event_id, "", retry_ms), events[1:]
        if not events:
            return head
        return head + sse.events(format_event_ids(events[0].stream_id, [e.seq for e in events]),
                                 [e.payload for e in events])

    async def run_pump(self, follow: streams.Follow, terms: ConnectionTerms, session_id: str):
        reason = "client"
        self.closed_retry_ms = None
        held = metrics.labeled(metrics.connections, "stream")
        held.inc()
        try:
            reason = await self.pump_loop(follow, terms)
        except asyncio.CancelledError:
            raise
        except Exception:
            reason = "error"
            logger.exception("SSE connection on stream %s failed", follow.stream_id)
            await self.send_body(b"", more_body=False)
        finally:
            held.dec()
            self.record_end(follow, reason, self.closed_retry_ms)
            if signals.stream_disconnected.receivers and reason != "completed":
                await signals.stream_disconnected.asend(sender=None, server=self.server.name,
                                                        session_id=session_id, stream_id=follow.stream_id,
                                                        reason=reason)

    async def pump_loop(self, follow: streams.Follow, terms: ConnectionTerms) -> str:
        """Write the stream's events as they come; returns why the connection ended."""
        keepalive = float(mcp_settings.KEEPALIVE_SECONDS)
        conn, retry_ms = terms.conn, terms.retry_ms
        while True:
            if follow.closing:
                self.closed_retry_ms = follow.close_retry_ms or retry_ms
                await self.send_body(sse.retry(self.closed_retry_ms))
                return follow.close_reason
            now = time.monotonic()
            deadline = terms.disconnect.deadline(conn)
            if deadline is not None and now >= deadline:
                self.closed_retry_ms = retry_ms
                await self.send_body(sse.retry(retry_ms))
                return "policy"
            timeout = keepalive if deadline is None else min(keepalive, deadline - now)
            if not await follow.wait(timeout):
                if deadline is None or time.monotonic() < deadline:
                    await self.send_body(sse.KEEPALIVE, more_body=True)
                continue
            events, ended = await follow.next()
            if events:
                conn.events_sent += len(events)
                conn.last_event_at = time.monotonic()
                final = any(e.kind == FINAL for e in events)
                await self.send_body(self.frames(events, retry_ms), more_body=not final)
                if final:
                    return "completed"
            if ended:
                await self.send_body(b"")
                return "ended"

    async def delete(self):
        guards.check_protocol_version(self.headers)
        session = await self.load_session()
        await sessions.end(session)
        await self.send_json(200, None)
