"""OpenTelemetry spans (the `otel` extra: opentelemetry-api), named and attributed as the
OpenTelemetry semantic conventions for MCP say.

A span per MCP request and per notification a client sends (kind SERVER, `{mcp.method.name}
{target}`), a span per resumption's
replay, and a span per batch of the store's database thread that runs calls a request queued
while its span was current (linked to those requests). The project configures the SDK (its
tracer provider, sampler and exporters).

Off (`MCP_TRANSPORT["TRACING"] = False`) or without opentelemetry-api, `on` is False; until a
tracer provider is set (opentelemetry-api alone, whose spans go nowhere), `active()` is. Call
sites check `tracing.on and tracing.active()` and then skip every call here: nothing is
extracted, built or started. They read `tracing.on` as an attribute of this module, never import
it by name: `configure()` rebinds it when the setting changes.

Parents: a request's trace context in `params._meta` (`traceparent`, `tracestate`, `baggage`,
unprefixed, SEP-414) is its span's parent, and the ambient one (an HTTP instrumentation's span, or
the W3C headers of the HTTP request) is linked; without `_meta` context the ambient one is the parent.
"""
from __future__ import annotations

import contextlib
import time

from django.core.signals import setting_changed
from django.dispatch import receiver

from .conf import SETTING_NAME, mcp_settings

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError:  # the `otel` extra is not installed
    trace = None

INSTRUMENTATION = "mcp_transport"
# Requested names end up in attributes; a client may send anything, so they are cut to this.
MAX_ATTRIBUTE_CHARS = 256
PROPAGATION_KEYS = ("traceparent", "tracestate", "baggage")

# A tracer provider set after the first request is seen within this many seconds.
PROVIDER_RECHECK_SECONDS = 1.0

on = False
_tracer = None
_provider_set = False
_provider_checked = float("-inf")


def available() -> bool:
    return trace is not None


def configure():
    """Bind `on` and the tracer for the current setting (at startup, on setting_changed)."""
    global on, _tracer, _provider_checked
    try:
        wanted = mcp_settings.TRACING is True
    except Exception:  # a malformed MCP_TRANSPORT: the system checks say what is wrong
        wanted = False
    on = wanted and available()
    _tracer = trace.get_tracer(INSTRUMENTATION) if on else None
    _provider_checked = float("-inf")


def active() -> bool:
    """Whether spans are made: `on`, and a tracer provider set (once set, it stays). Until one is,
    this looks again at most every PROVIDER_RECHECK_SECONDS: it is asked several times a request."""
    global _provider_set, _provider_checked
    if not _provider_set and on:
        now = time.monotonic()
        if now - _provider_checked >= PROVIDER_RECHECK_SECONDS:
            _provider_checked = now
            _provider_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return on and _provider_set


@receiver(setting_changed)
def _reconfigure(*, setting, **kwargs):
    if setting == SETTING_NAME:
        configure()


def tracer():
    return _tracer


class _Headers:
    """The HTTP request's headers (an ASGI scope's) as a propagator's carrier."""

    @staticmethod
    def get(scope, key: str):
        wanted = key.lower().encode("latin-1")
        values = [value.decode("latin-1") for name, value in scope.get("headers", ()) if name.lower() == wanted]
        return values or None

    @staticmethod
    def keys(scope):
        return [name.decode("latin-1").lower() for name, _ in scope.get("headers", ())]


class _Meta:
    """`params._meta` as a propagator's carrier: string values of the W3C keys only."""

    @staticmethod
    def get(meta, key: str):
        value = meta.get(key)
        return [value] if isinstance(value, str) else None

    @staticmethod
    def keys(meta):
        return [key for key in PROPAGATION_KEYS if isinstance(meta.get(key), str)]


_HEADERS = _Headers()
_META = _Meta()


def _valid(ctx) -> bool:
    return trace.get_current_span(ctx).get_span_context().is_valid


def ambient_context(scope):
    """The transport's context: the current span's when one is active (an HTTP instrumentation's),
    else what the HTTP request's headers carry; None when neither has one."""
    current = otel_context.get_current()
    if _valid(current):
        return current
    if scope:
        extracted = propagate.extract(scope, getter=_HEADERS)
        if _valid(extracted):
            return extracted
    return None


def parent_and_links(params, scope):
    """-> (the parent context, the links) for a request's span (module docstring)."""
    ambient = ambient_context(scope)
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and "traceparent" in meta:
        from_meta = propagate.extract(meta, getter=_META)
        if _valid(from_meta):
            links = [Link(trace.get_current_span(ambient).get_span_context())] if ambient is not None else []
            return from_meta, links
    return (ambient if ambient is not None else otel_context.Context()), []


def _text(value) -> str:
    return value[:MAX_ATTRIBUTE_CHARS]


def request_attributes(method: str, params, *, request_id, protocol_version, session_id, scope) -> dict:
    attributes = {"mcp.method.name": method, "network.transport": "tcp", "network.protocol.name": "http"}
    name = params.get("name") if isinstance(params, dict) else None
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if isinstance(name, str):
            attributes["gen_ai.tool.name"] = _text(name)
    elif method == "prompts/get" and isinstance(name, str):
        attributes["gen_ai.prompt.name"] = _text(name)
    elif method.startswith("resources/") and isinstance(params, dict) and isinstance(params.get("uri"), str):
        attributes["mcp.resource.uri"] = _text(params["uri"])
    if request_id is not None:
        attributes["jsonrpc.request.id"] = _text(request_id if isinstance(request_id, str) else str(request_id))
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if session_id:
        attributes["mcp.session.id"] = session_id
    if scope:
        if scope.get("http_version"):
            attributes["network.protocol.version"] = scope["http_version"]
        server, client = scope.get("server"), scope.get("client")
        if server and server[0] is not None:
            attributes["server.address"] = str(server[0])
            if server[1] is not None:
                attributes["server.port"] = int(server[1])
        if client and client[0] is not None:
            attributes["client.address"] = str(client[0])
            if client[1] is not None:
                attributes["client.port"] = int(client[1])
    return attributes


def start_request(method: str, target: str | None, params, *, request_id=None, protocol_version=None,
                  session_id=None, scope=None):
    """A request's span, started (not made current: the caller does, in the request's task).
    `target`: a declared tool's or prompt's name, for the span's name; never a name a client made up."""
    parent, links = parent_and_links(params, scope)
    span = _tracer.start_span(f"{method} {target}" if target else method, context=parent, kind=SpanKind.SERVER,
                              links=links)
    if span.is_recording():
        span.set_attributes(request_attributes(method, params, request_id=request_id,
                                               protocol_version=protocol_version, session_id=session_id,
                                               scope=scope))
    return span


@contextlib.contextmanager
def notification(method: str, params, *, protocol_version=None, session_id=None, scope=None):
    """A notification the server received: a SERVER span over its handling, as a request's but
    with no request id (nothing answers it)."""
    if not (on and active()):
        yield
        return
    span = start_request(method, None, params, protocol_version=protocol_version, session_id=session_id,
                         scope=scope)
    token, failed = use(span), None
    try:
        yield
    except Exception as exc:
        failed = exc
        raise
    finally:
        leave(token)
        end_request(span, exception=failed)


def end_request(span, error_code: int | None = None, error_message: str | None = None, tool_error=False,
                exception: BaseException | None = None):
    """End a request's span: a JSON-RPC error (its code), an exception no code was given for (its
    class), a tool's error result, or success."""
    if span.is_recording():
        if error_code is not None:
            span.set_attributes({"error.type": str(error_code), "rpc.response.status_code": str(error_code)})
            span.set_status(Status(StatusCode.ERROR, error_message))
            if exception is not None:
                span.record_exception(exception)
        elif exception is not None:
            span.set_attribute("error.type", type(exception).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
            span.record_exception(exception)
        elif tool_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
    span.end()


def session_started(span, protocol_version: str, session_id: str):
    """An initialize span's outcome: the version agreed and the session it created."""
    if span.is_recording():
        span.set_attributes({"mcp.protocol.version": protocol_version, "mcp.session.id": session_id})


def use(span):
    """Make `span` current in this task: -> the token for `leave`."""
    return otel_context.attach(trace.set_span_in_context(span))


def leave(token):
    otel_context.detach(token)


def start_replay(scope, *, session_id: str, stream_id: int, last_event_id: str):
    """A resumption's span (GET with Last-Event-ID), a child of the HTTP request's context."""
    parent = ambient_context(scope)
    span = _tracer.start_span("mcp.sse.replay", context=parent if parent is not None else otel_context.Context(),
                              kind=SpanKind.SERVER)
    if span.is_recording():
        span.set_attributes({"mcp.session.id": session_id, "mcp_transport.stream.id": stream_id,
                             "mcp_transport.last_event_id": _text(last_event_id)})
    return span


def end_replay(span, failed: BaseException | None = None, replayed: int = 0):
    """End a resumption's span: its replayed events, or why it failed (a refusal's HTTP status)."""
    if span.is_recording():
        if failed is None:
            span.set_attribute("mcp_transport.replayed_events", replayed)
        else:
            status = getattr(failed, "status", None)
            span.set_attribute("error.type", str(status) if status else type(failed).__qualname__)
            span.set_status(Status(StatusCode.ERROR, getattr(failed, "message", None) or None))
    span.end()


def current_link():
    """A link to the span current here (a request queuing a database call), or None."""
    span_context = trace.get_current_span().get_span_context()
    return Link(span_context) if span_context.is_valid else None


def start_batch(calls: int, operations: list[str], links: list):
    """A batch of the database thread's: its own trace, linked to the requests whose calls it runs."""
    span = _tracer.start_span("mcp_transport.db.batch", context=otel_context.Context(), kind=SpanKind.INTERNAL,
                              links=links)
    if span.is_recording():
        span.set_attributes({"mcp_transport.batch.calls": calls, "mcp_transport.batch.operations": operations})
    return span
