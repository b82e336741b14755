"""Tasks, the MCP side: what a task looks like on the wire, and what a tool may do with its own.

A task is a tool call that answers with a handle instead of its result; the client polls the
handle (`tasks/get`), answers its questions (`tasks/update`) and may cancel it (`tasks/cancel`).
Revision 2026-07-28 has them as the extension `io.modelcontextprotocol/tasks` (SEP-2663): the
server decides, per call, whether a tool that supports tasks (`@mcp.tool(task_support=...)`)
answers with a task, for clients that declare the extension. The durable core (rows, leases,
runners) is the execution layer's; this module is the wire form and the tool's handle on it.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Protocol

from . import jsonrpc
from .jsonrpc import InvalidParams, JSONRPCError

EXTENSION = "io.modelcontextprotocol/tasks"
METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
# A task's DetailedTask, pushed on the listen streams that asked for it (`notifications.taskIds`).
NOTIFICATION = "notifications/tasks"
# Task ids one listen stream may ask about.
MAX_LISTEN_TASKS = 100
TASK_SUPPORT = ("forbidden", "optional", "required")
ACTIVE = ("working", "input_required")


class TaskControl(Protocol):
    """What the layer running a call gives a tool about its task (`ctx.task`)."""

    @property
    def task_id(self) -> str | None: ...

    async def become_task(self, status_message: str | None = None) -> bool: ...

    async def ask(self, requests: dict[str, dict]) -> dict[str, dict]: ...


def missing_extension() -> JSONRPCError:
    return JSONRPCError(jsonrpc.MISSING_CLIENT_CAPABILITY, f"This request needs the {EXTENSION} extension",
                        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def declared(capabilities: dict) -> bool:
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def is_task_id(value) -> bool:
    """A task id as this server makes them (printable ASCII, at most 64 characters): anything else
    names no task, and never reaches a query (PostgreSQL refuses a NUL in text)."""
    return isinstance(value, str) and 0 < len(value) <= 64 and value.isascii() and value.isprintable()


def task_id_param(params: dict) -> str:
    task_id = params.get("taskId")
    if not is_task_id(task_id):
        raise InvalidParams("Invalid params: 'taskId' must be a task id")
    return task_id


def listen_task_ids(value, capabilities: dict) -> list[str]:
    """`notifications.taskIds` of a `subscriptions/listen`: the task ids asked about (those that
    cannot name a task of this server left out); -32021 from a client without the extension."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > MAX_LISTEN_TASKS:
        raise InvalidParams(f"Invalid params: notifications.taskIds must be a list of at most {MAX_LISTEN_TASKS} "
                            "task ids")
    if not declared(capabilities):
        raise missing_extension()
    return list(dict.fromkeys(v for v in value if is_task_id(v)))


def unknown_task(task_id: str) -> InvalidParams:
    return InvalidParams(f"Invalid params: unknown task {task_id!r}", {"taskId": task_id})


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(task_id: str, status: str, *, created_at: datetime, updated_at: datetime, ttl_ms: int | None,
                poll_interval_ms: int, status_message: str = "") -> dict:
    """The `Task` every form shares: what a created task is, and the start of every poll's answer."""
    fields = {"taskId": task_id, "status": status, "createdAt": iso(created_at), "lastUpdatedAt": iso(updated_at),
              "ttlMs": ttl_ms, "pollIntervalMs": poll_interval_ms}
    if status_message:
        fields["statusMessage"] = status_message
    return fields


def created(fields: dict) -> dict:
    """CreateTaskResult: the task, flat, as the call's result."""
    return {"resultType": "task", **fields}


def detailed(fields: dict, *, result: dict | None = None, error: dict | None = None,
             input_requests: dict | None = None) -> dict:
    """A `tasks/get` answer (DetailedTask): what the status says is there, nothing else."""
    status = fields["status"]
    if status == "completed":
        return {**fields, "result": result or {}}
    if status == "failed":
        return {**fields, "error": error or {"code": jsonrpc.INTERNAL_ERROR, "message": "Task failed"}}
    if status == "input_required":
        return {**fields, "inputRequests": input_requests or {}}
    return fields


def inlined_result(result: dict) -> dict:
    """A tool's result as a task keeps it: what the call would have answered, without the
    envelope of the answer it did not give (`resultType`, the server's identity)."""
    kept = {k: v for k, v in result.items() if k != "resultType"}
    meta = kept.get("_meta")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/")}
        if meta:
            kept["_meta"] = meta
        else:
            kept.pop("_meta")
    return kept


# 2025-11-25 (SEP-1686, experimental in that revision): the client asks for a task (`params.task`),
# the names of two fields differ, and messages about a task say which (`related-task`).

RELATED_TASK = "io.modelcontextprotocol/related-task"
SESSION_METHODS = ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel")
SESSION_CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
LIST_PAGE = 50


def session_fields(fields: dict) -> dict:
    """The `Task` of 2025-11-25: `ttl` and `pollInterval`, in milliseconds."""
    renamed = {"ttlMs": "ttl", "pollIntervalMs": "pollInterval"}
    return {renamed.get(k, k): v for k, v in fields.items()}


def related(task_id: str, meta: dict | None = None) -> dict:
    return {**(meta or {}), RELATED_TASK: {"taskId": task_id}}


def with_related(message: dict, task_id: str) -> dict:
    """A request or notification about a task, saying which."""
    params = dict(message.get("params") or {})
    params["_meta"] = related(task_id, params.get("_meta"))
    return {**message, "params": params}


def requested_ttl(params: dict) -> int | None:
    """The `ttl` a task-augmented request asks for (ms), or None; -32602 if it is no such thing."""
    task = params.get("task")
    if not isinstance(task, dict):
        raise InvalidParams("Invalid params: 'task' must be an object")
    ttl = task.get("ttl")
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        raise InvalidParams("Invalid params: task.ttl must be a positive integer (milliseconds)")
    return ttl


def cancelled_result_error() -> JSONRPCError:
    """`tasks/result` of a cancelled task: the request it ran has no result to give."""
    return JSONRPCError(jsonrpc.REQUEST_CANCELLED, "The task was cancelled before it finished")
