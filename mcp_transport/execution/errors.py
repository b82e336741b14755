"""The JSON-RPC errors a request's stream ends with when its tool did not get to answer."""
from __future__ import annotations

import json
import logging

from ..protocol import jsonrpc


def operator_cancelled(request_id, reason: str | None) -> dict:
    return jsonrpc.error(request_id, jsonrpc.REQUEST_CANCELLED, "Request cancelled by an operator",
                         {"reason": reason} if reason else None)


def worker_lost(stream) -> str:
    """For a request whose worker's lease ran out (the store writes it as the stream's last event)."""
    request_id = json.loads(stream.request_id) if stream.request_id else None
    return jsonrpc.dumps(jsonrpc.error(
        request_id, jsonrpc.INTERNAL_ERROR,
        f"The worker running this request ({stream.worker}) stopped before it finished; please retry",
        {"reason": "worker_lost", "worker": stream.worker},
    ))


def worker_shutdown(request_id, worker: str) -> str:
    return jsonrpc.dumps(jsonrpc.error(
        request_id, jsonrpc.INTERNAL_ERROR,
        f"The worker running this request ({worker}) shut down before it finished; please retry",
        {"reason": "worker_shutdown", "worker": worker},
    ))


async def response(message, handling) -> dict:
    """A request's JSON-RPC response: its handler's result (`handling`, the awaitable), the
    JSON-RPC error it raised, or, for anything else, -32603 (and the traceback in the log)."""
    try:
        return jsonrpc.result(message.id, await handling)
    except jsonrpc.JSONRPCError as exc:
        return jsonrpc.error_from(message.id, exc)
    except Exception as exc:
        logging.getLogger("mcp_transport").exception("Request %s %r failed", message.method, message.id)
        return {"jsonrpc": "2.0", "id": message.id, "error": internal(exc)}


def internal(exc: Exception) -> dict:
    """A handler that raised: the error object (its detail only with DEBUG)."""
    from django.conf import settings

    text = "Internal error" + (f": {type(exc).__name__}: {exc}" if settings.DEBUG else "")
    return {"code": jsonrpc.INTERNAL_ERROR, "message": text}


def task_stopped(reason: str) -> dict:
    """A task whose worker shut down before it finished (`reason`: "worker_shutdown")."""
    return {"code": jsonrpc.INTERNAL_ERROR, "message": "The worker running this task stopped before it finished",
            "data": {"reason": reason}}


TASK_LOST = {"code": jsonrpc.INTERNAL_ERROR, "message": "The worker running this task stopped before it finished",
             "data": {"reason": "worker_lost"}}
