"""The control messages between workers: their names, their fields, and who they go to. Defined here
once; built only by the constructors below, sent only by the relay (`relay.Relay` inside a worker,
`relay.Sender` from any other process, such as the admin), read by `relay.Relay.handle`.

type (fields) -> the group it goes to: what the receiver does

- `mcp.wake` (`stream`, `seq`) -> the stream's group, or every worker: its connections on the
  stream read the table up to `seq`.
- `mcp.close` (`stream`, `retry`: ms or None, `reason`) -> the stream's group, or every worker: its
  connections on the stream send `retry` and close; the stream goes on.
- `mcp.end` (`stream`) -> the stream's group, or the worker holding it: its connections on the
  stream end (the stream finished without a final event).
- `mcp.cancel` (`session`, `request`, `reason`, and `by` when set: "operator") -> the worker
  running the request: it is cancelled; by an operator, it ends with a JSON-RPC error.
- `mcp.respond` (`session`, `response`) -> the worker whose tool waits for the client's answer.
- `mcp.session_end` (`session`) -> every worker: the session is forgotten, its requests
  cancelled, its GET stream ended.
- `mcp.end_modern` (`row`, `reason`) -> the worker holding a 2026-07-28 request (its
  `ModernRequest` row): a listen stream ends with its result, a call with a JSON-RPC error.
- `mcp.task` (`task`, `action`: "wake" or "cancel", and `reply`: [channel, ref] when the sender
  waits) -> the worker running a task: its questions were answered (it reads them from the table),
  or it was cancelled (it stops the work); either way it forgets what it remembered of the task,
  then answers `reply`.
- `mcp.task_heard` (`ref`) -> the channel a `mcp.task` named: the worker running the task heard it.
- `mcp.notify` (`server`, `method`, `params`) -> every worker: a change notification for the
  `subscriptions/listen` streams it holds (2026-07-28; sessions get theirs through stored events).

Every message also carries `origin`: the sending worker's id (a worker ignores its own wake-ups,
closes, ends and session ends), or who else sent it (`"admin"`).

A cancel and a client's answer must not be lost with a channel-layer message (channels-redis may
drop one): they carry a `Delivery` row for their worker (`Signal.delivery`), which every sender
stores before it sends; the worker's sweep reads the rows the channel layer did not bring
(`Relay.take_deliveries`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..models import Delivery

WAKE = "mcp.wake"
CLOSE = "mcp.close"
END = "mcp.end"
CANCEL = "mcp.cancel"
RESPOND = "mcp.respond"
SESSION_END = "mcp.session_end"
NOTIFY = "mcp.notify"
END_MODERN = "mcp.end_modern"
TASK = "mcp.task"
TASK_HEARD = "mcp.task_heard"
ORIGIN = "origin"

ALL_WORKERS = "mcp.workers"
_GROUP_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def stream_group(stream_id: int) -> str:
    """The workers holding a connection on the stream that joined its wake-ups (`Relay.join`)."""
    return f"mcp.stream.{stream_id}"


def worker_group(worker: str) -> str:
    """One worker (a process: `store.WORKER`)."""
    return f"mcp.worker.{_GROUP_SAFE.sub('-', worker)}"[:99]


@dataclass(frozen=True)
class StoredDelivery:
    """The `Delivery` row a signal leaves for its worker, read by the worker's sweep if the signal is lost."""

    worker: str
    session_id: str
    kind: str  # Delivery.Kind
    payload: dict


@dataclass(frozen=True)
class Signal:
    """One control message, the group it goes to, and the row stored for it first (if it has one)."""

    group: str
    message: dict
    delivery: StoredDelivery | None = None

    @property
    def type(self) -> str:
        return self.message["type"]


# Constructors: the only places a control message is built.


def wake(stream_id: int, seq: int, *, group: str | None = None) -> Signal:
    return Signal(group or stream_group(stream_id), {"type": WAKE, "stream": stream_id, "seq": seq})


def close(stream_id: int, retry_ms: int | None, reason: str, *, group: str | None = None) -> Signal:
    return Signal(group or stream_group(stream_id),
                  {"type": CLOSE, "stream": stream_id, "retry": retry_ms, "reason": reason})


def end(stream_id: int, *, group: str | None = None) -> Signal:
    return Signal(group or stream_group(stream_id), {"type": END, "stream": stream_id})


def cancel(worker: str, session_id: str, request_id, reason: str | None = None, by: str | None = None) -> Signal:
    """Cancel a request on the worker running it; stored for that worker first (`Signal.delivery`)."""
    payload = cancel_payload({"request": request_id, "reason": reason, "by": by})
    message = {"type": CANCEL, "session": session_id, "request": request_id, "reason": reason}
    if by is not None:
        message["by"] = by
    return Signal(worker_group(worker), message, StoredDelivery(worker, session_id, Delivery.Kind.CANCEL, payload))


def respond(worker: str, session_id: str, response: dict) -> Signal:
    """A client's answer for the tool waiting for it on `worker`; stored for that worker first."""
    return Signal(worker_group(worker), {"type": RESPOND, "session": session_id, "response": response},
                  StoredDelivery(worker, session_id, Delivery.Kind.RESPONSE, response))


def session_end(session_id: str) -> Signal:
    return Signal(ALL_WORKERS, {"type": SESSION_END, "session": session_id})


def end_modern(worker: str, row_id: int, reason: str | None = None) -> Signal:
    return Signal(worker_group(worker), {"type": END_MODERN, "row": row_id, "reason": reason})


def task(worker: str, task_id: str, action: str, reply: tuple[str, str] | None = None) -> Signal:
    message = {"type": TASK, "task": task_id, "action": action}
    if reply is not None:
        message["reply"] = list(reply)
    return Signal(worker_group(worker), message)


def task_heard(ref: str) -> dict:
    return {"type": TASK_HEARD, "ref": ref}


def notify(server: str, method: str, params: dict | None) -> Signal:
    return Signal(ALL_WORKERS, {"type": NOTIFY, "server": server, "method": method, "params": params})


# What a message lost with the channel layer costs, when more than a delay until the receivers'
# next read of the table (the sweep, a task's own poll, the heartbeat).
IF_LOST = {
    NOTIFY: "the listen streams held by other workers miss this change notification",
    END_MODERN: "the request stays open; end it again",
}


# Reading them back.


def cancel_payload(message: dict) -> dict:
    """What a cancel handler gets, from a `mcp.cancel` message or a cancel `Delivery` row."""
    return {"request": message["request"], "reason": message.get("reason"), "by": message.get("by")}


# A `Delivery` row's kind -> the message type whose handler it goes to.
DELIVERED_AS = {Delivery.Kind.CANCEL: CANCEL, Delivery.Kind.RESPONSE: RESPOND}
