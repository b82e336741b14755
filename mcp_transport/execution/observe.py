"""A request's handler as operators see it: its tools/call metrics, its span, its signals.

`request()` wraps the handler's coroutine where it runs (the request's own task, in either era,
and a task's work): the span is current while the handler runs, so spans a tool starts are its
children. With metrics, tracing and the request signals all unused it returns the coroutine as it is.
"""
from __future__ import annotations

import asyncio
import time

from .. import metrics, signals, tracing
from ..protocol import jsonrpc


def request(server, method: str, params, ctx, handling):
    """`handling`, the handler's coroutine for `method`, observed when anything observes it."""
    counted = metrics.on and method == "tools/call"
    traced = tracing.on and tracing.active()
    if not (counted or traced or signals.request_started.receivers or signals.request_finished.receivers):
        return handling
    return _observed(server, method, params, ctx, handling, counted, traced)


def _declared(server, method: str, params) -> str | None:
    """The declared tool or prompt a request names: a span's target, a signal's tool."""
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str):
        return None
    if method == "tools/call":
        return name if name in server.tools else None
    if method == "prompts/get":
        return name if name in server.prompts else None
    return None


def _protocol_version(ctx) -> str | None:
    if ctx.modern is not None:
        return ctx.modern.version
    return getattr(ctx.session, "protocol_version", None)


async def _observed(server, method: str, params, ctx, handling, counted: bool, traced: bool):
    started = time.perf_counter()
    target = _declared(server, method, params)
    tool = target if method == "tools/call" else None
    span = token = about = None
    if traced:
        span = tracing.start_request(method, target, params, request_id=ctx.request_id,
                                     protocol_version=_protocol_version(ctx), session_id=getattr(ctx.session, "id", None),
                                     scope=ctx.scope)
        token = tracing.use(span)
    if signals.request_started.receivers or signals.request_finished.receivers:
        about = {"server": server.name, "method": method, "request_id": ctx.request_id, "tool": tool,
                 "session_id": getattr(ctx.session, "id", None), "protocol_version": _protocol_version(ctx)}
    outcome, error, raised = "error", None, None
    try:
        if about is not None and signals.request_started.receivers:
            try:
                await signals.request_started.asend(sender=None, **about)
            except BaseException:
                handling.close()  # a receiver failed: the request fails with it, its handler never runs
                raise
        result = await handling
        outcome = metrics.outcome(result)
        return result
    except jsonrpc.JSONRPCError as exc:
        error = (exc.code, exc.message)
        raise
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    except Exception as exc:
        error, raised = (jsonrpc.INTERNAL_ERROR, "Internal error"), exc
        raise
    finally:
        seconds = time.perf_counter() - started
        if counted:
            metrics.tool_called(tool or metrics.UNKNOWN_TOOL, outcome, seconds)
        if span is not None:
            tracing.leave(token)
            tracing.end_request(span, *(error or (None, None)), tool_error=outcome == "tool_error",
                                exception=raised)
        if about is not None and signals.request_finished.receivers:
            await signals.request_finished.asend(sender=None, **about, outcome=outcome, duration=seconds)
