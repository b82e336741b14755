"""What an operator can do to live MCP traffic, from any process (the admin's views call these).

The database says what to do; the relay tells the workers (`wakeups.relay.Sender`, the control
messages of `wakeups.messages`), which act on their own connections and tasks
(`wakeups.relay.Relay.handle`). A cancel is stored for its worker before it is signalled, so a
lost channel-layer message only delays it until the worker's sweep:

- `close_connection`: `mcp.close` to every worker; the one holding the stream's connection
  sends `retry` and closes it. The request goes on, the client resumes with `Last-Event-ID`.
- `cancel_request`: `mcp.cancel` (by "operator") to the worker running the request; the tool
  is cancelled and the stream ends with a JSON-RPC error (-32800) as the response.
- `terminate_session`: the session is terminated in the table (clients get 404 and
  re-initialize), then its requests are cancelled, its connections ended and every worker
  forgets it.
- `end_modern_request`: `mcp.end_modern` to the worker holding a 2026-07-28 listen stream or
  call: the stream ends with its result (the client may listen again), the call with an error.
- `cancel_task`: the task's row is cancelled, then `mcp.task` (cancel) tells the worker running
  it to stop the work; the client's next `tasks/get` says cancelled.
- `prune`: `storage.store.prune()`, the code of `manage.py mcp_prune`.
- `complete_elicitation`: the project's own code (the view a URL elicitation led to) says the
  user is done there; the session that started it gets `notifications/elicitation/complete`,
  stored on its GET stream and woken on every worker.

These run synchronously (`async_to_sync` around the layer), in a view or a shell. Without
CHANNEL_LAYERS they reach the workers of this process only (`wakeups.relay.channel_layer`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q

from . import metrics
from .execution import errors
from .execution.worker import worker
from .models import Cutoffs, ModernRequest, Session, Stream, Task
from .protocol import elicitation, jsonrpc
from .storage import store
from .storage.executor import database_alias
from .storage.recent import WORKING_TASK_SECONDS
from .wakeups import messages
from .wakeups.relay import ALL_WORKERS, Sender

logger = logging.getLogger("mcp_transport")
ORIGIN = "admin"
OPERATOR = "operator"


@dataclass
class Outcome:
    """What an operation did, in a sentence for the operator; `done` is False when nothing applied."""

    done: bool
    message: str


def sender() -> Sender:
    """The relay, for this process."""
    return Sender(ORIGIN)


def close_connection(stream: Stream, retry_ms: int | None = None) -> Outcome:
    """Close the stream's live connection now; the client reconnects after `retry` and loses nothing.

    `retry_ms` None: the `retry` in force on that connection.
    """
    if stream.status != Stream.Status.OPEN:
        return Outcome(False, f"Stream {stream.pk} is {stream.status}: it has no connection to close.")
    # Every worker gets it and closes the connections it holds on that stream, if any: the row's
    # `connected_worker` may lag a replaced connection by a moment, the workers never do.
    sender().send(messages.close(stream.pk, retry_ms, ORIGIN, group=ALL_WORKERS))
    if stream.connected_worker:
        return Outcome(True, f"Closing the connection of stream {stream.pk} held by {stream.connected_worker}; "
                             "the client reconnects after its retry interval.")
    return Outcome(True, f"Stream {stream.pk} had no live connection recorded; any connection it has is closed.")


def cancel_request(stream: Stream, reason: str = "Cancelled by an operator") -> Outcome:
    """Cancel the request running on a stream: the tool is cancelled, the client gets an error response."""
    if stream.kind != Stream.Kind.REQUEST or not stream.request_id:
        return Outcome(False, f"Stream {stream.pk} is not a request stream: there is no request to cancel.")
    if stream.status != Stream.Status.OPEN:
        return Outcome(False, f"The request of stream {stream.pk} already ended ({stream.status}).")
    if stream.orphaned_at(Cutoffs.at()):
        # Its worker is gone: nobody would hear the cancel. Fail it now, as the lease sweep would.
        to_workers = sender()
        failed = store.fail_orphans(errors.worker_lost, stream.pk)
        if failed:
            to_workers.send(messages.wake(stream.pk, failed[-1].seq, group=ALL_WORKERS))
            return Outcome(True, f"The worker of stream {stream.pk} ({stream.worker}) is gone: "
                                 "the request ended with an error.")
        return Outcome(False, f"The request of stream {stream.pk} already ended.")
    if not stream.worker:
        return Outcome(False, f"Stream {stream.pk} records no worker running its request.")
    # Stored for its worker, then signalled: the worker's sweep brings it if the message is lost.
    sender().send(messages.cancel(stream.worker, stream.session_id, json.loads(stream.request_id), reason,
                                  by=OPERATOR))
    return Outcome(True, f"Cancelling request {stream.request_id} of stream {stream.pk} on {stream.worker}; "
                         "the client gets an error response.")


def terminate_session(session: Session) -> Outcome:
    """End a session: clients get 404 (and re-initialize), its requests are cancelled, its connections closed."""
    if session.terminated_at is not None:
        return Outcome(False, f"Session {session.pk} was already terminated.")
    open_streams = list(
        session.streams.filter(status=Stream.Status.OPEN).values_list("id", "kind", "worker", "request_id",
                                                                      "connected_worker")
    )
    to_workers = sender()
    if not store.terminate_session(session.pk, session.server):
        return Outcome(False, f"Session {session.pk} has expired: clients already get 404.")
    reason = "Session terminated by an operator"
    signals = []
    for stream_id, kind, worker, request_id, connected_worker in open_streams:
        if kind == Stream.Kind.REQUEST and worker and request_id:
            signals.append(messages.cancel(worker, session.pk, json.loads(request_id), reason))
        if connected_worker:
            signals.append(messages.end(stream_id, group=messages.worker_group(connected_worker)))
    # Every worker forgets the session (its cache of live sessions, its GET stream, its waits).
    signals.append(messages.session_end(session.pk))
    to_workers.send(*signals)
    metrics.sessions_ended.labels("operator").inc()
    return Outcome(True, f"Terminated session {session.pk} ({len(open_streams)} open stream(s) ended); "
                         "its client gets 404 and must initialize again.")


def end_modern_request(request: ModernRequest, reason: str = "Ended by an operator") -> Outcome:
    """End a 2026-07-28 listen stream (with its final result) or call (with a JSON-RPC error)."""
    if not ModernRequest.objects.filter(pk=request.pk).on_running_workers().exists():
        store.close_modern([request.pk])
        return Outcome(False, f"The worker of {request} ({request.worker}) is gone; its row was removed.")
    sender().send(messages.end_modern(request.worker, request.pk, reason))
    what = "listen stream ends" if request.kind == ModernRequest.Kind.LISTEN else "call is cancelled"
    return Outcome(True, f"Ending {request} on {request.worker}: the {what}.")


def cancel_task(task: Task, reason: str = "Cancelled by an operator") -> Outcome:
    """Cancel an active task; the worker running it stops the work."""
    if task.terminal:
        return Outcome(False, f"{task} already ended.")
    to_workers = sender()
    row = store.cancel_task(task.pk, None, None, reason)
    if row is None or row.status != Task.Status.CANCELLED:
        return Outcome(False, f"Task {task.pk} ended before the cancel ({row.status if row else 'gone'}).")
    if row.worker:
        reach_task(to_workers, row, "cancel")
    return Outcome(True, f"Cancelled task {task.pk} ({task.tool}); {row.worker or 'its worker'} stops the work.")


def reach_task(to_workers: Sender, row: Task, action: str):
    """`Tasks.reach` for an operator: once this returns, the worker running the task has heard (or
    what it remembered of the task has lapsed), so none of its polls predates the change."""
    if row.worker == store.WORKER or not row.may_be_remembered():
        to_workers.send(messages.task(row.worker, row.pk, action))
    elif not to_workers.task_heard(row.worker, row.pk, action, WORKING_TASK_SECONDS):
        logger.warning("The worker running task %s did not say it heard the %s", row.pk, action)


def prune_preview() -> dict:
    """What `prune()` would delete now: the querysets `storage.store.prune` deletes."""
    sessions = Session.objects.prunable()
    streams = Stream.objects.filter(Q(pk__in=Stream.objects.past_retention()) | Q(session__in=sessions))
    return {"sessions": sessions.count(), "streams": streams.count()}


def prune() -> Outcome:
    """`manage.py mcp_prune`: expired and terminated sessions, finished streams past their retention."""
    counts = store.prune()
    return Outcome(True, f"Pruned {counts['sessions']} session rows, {counts['streams']} stream rows "
                         f"(with their events), {counts['modern']} modern request rows of workers that are gone"
                         f", {counts['tasks']} tasks past their TTL (with their {counts['task_events']} events) and "
                         f"{counts['elicitations']} URL elicitations "
                         "of 2026-07-28 requests.")


def complete_elicitation(elicitation_id: str, server="default") -> bool:
    """The user finished the URL elicitation `elicitation_id` (a tool's `ctx.elicit_url()` or
    `ctx.require_url_elicitation()`): from now on `ctx.elicitation_completed(id)` is True for the
    client that started it, and a 2025-11-25 session that started it gets
    `notifications/elicitation/complete` (only that session, on its GET stream, on whichever worker
    holds it). False when there is no such elicitation, or it was already completed: the
    notification goes once. `server`: the MCPServer or its name. From async code in a process
    serving MCP, `await acomplete_elicitation(...)`."""
    done, stream_id, events = _store_completion(elicitation_id, getattr(server, "name", server))
    if events:
        sender().send(messages.wake(stream_id, events[-1].seq, group=ALL_WORKERS))
    return done


async def acomplete_elicitation(elicitation_id: str, server="default") -> bool:
    """`complete_elicitation`, its notification handed to this process's connections at once."""
    done, stream_id, events = await sync_to_async(_store_completion)(elicitation_id, getattr(server, "name", server))
    if events:
        worker.relay.publish(stream_id, events)
    return done


def _store_completion(elicitation_id, server_name: str) -> tuple[bool, int | None, list]:
    """Mark it completed and store the notification for its session -> (done, stream, events)."""
    try:
        elicitation.checked_id(elicitation_id)
    except ValueError:
        return False, None, []
    payload = jsonrpc.dumps(jsonrpc.notification("notifications/elicitation/complete",
                                                 {"elicitationId": elicitation_id}))
    with transaction.atomic(using=database_alias()):
        done, session_id = store.complete_elicitation(server_name, elicitation_id)
        if not done or session_id is None:
            return done, None, []
        stream_id, _, _ = store.standalone_stream(session_id)
        return True, stream_id, store.append(stream_id, [payload])
