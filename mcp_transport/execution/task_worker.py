"""Tasks run by Django's Tasks framework (TASK_RUNNER = "django_tasks"), in its own workers.

The web process writes the task's row and queues `run_task(task_id)` on TASK_BACKEND (for
example django_tasks_db's database backend, whose `manage.py db_worker` runs it); the web process
may then restart or deploy, the work goes on. The framework's worker claims the row (its worker
id, a lease it renews), runs the call from its start with the answers the row already holds, and
stores the outcome; a cancel is the row's status, which it reads every ANSWER_POLL_SECONDS. A
worker that dies stops renewing the lease, and the web workers' heartbeat fails the task.

Imported only with that runner: the task object is made at import, on TASK_BACKEND.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket

from ..conf import mcp_settings
from ..models import Task
from ..protocol import jsonrpc, modern, tasks
from ..protocol.context import Context
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.server import get_server
from ..storage import store
from ..wakeups import messages
from ..wakeups.relay import ALL_WORKERS, Sender
from . import errors, observe
from .answers import ANSWER_POLL_SECONDS, wait_for_answers
from .task_events import TaskEventLog
from .task_shapes import detailed, status_notification

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

logger = logging.getLogger("mcp_transport")


class WorkerHost:
    """protocol.context.Host in a Tasks worker: no connection to write to. A task's progress and
    log messages are stored against it; a 2025-11-25 task's also on its session's GET stream, whose
    reader, on whichever web worker holds it, is woken through the channel layer. Blocking code
    runs in a thread."""

    def __init__(self, task_id: str, session_id: str | None):
        self.task_id = task_id
        self.session_id = session_id
        self.wakes: set[asyncio.Task] = set()
        self.events = TaskEventLog(task_id, self._session_stream if session_id else None, self._wake)
        self.sender = Sender(f"tasks@{socket.gethostname()}-{os.getpid()}"[:100])

    async def send(self, message: dict):
        await self.events.send(message)

    async def _session_stream(self) -> int:
        stream_id, _, _ = await store.astandalone_stream(self.session_id)
        return stream_id

    def _wake(self, stream_id: int, events: list):
        if events:
            self._signal(messages.wake(stream_id, events[-1].seq, group=ALL_WORKERS),
                         f"the wake-up of stream {stream_id} waits for the workers' sweep")

    def _signal(self, signal, if_lost: str):
        sent = asyncio.ensure_future(self._send(signal, if_lost))
        self.wakes.add(sent)
        sent.add_done_callback(self.wakes.discard)

    async def _send(self, signal, if_lost: str):
        try:
            await self.sender.send_async(signal)
        except Exception:
            logger.warning("Channel layer unavailable: %s", if_lost, exc_info=True)

    async def status_changed(self):
        """What a web worker's `Tasks.changed` says when a task's status changes, said from here:
        a 2025-11-25 task's `notifications/tasks/status` on its session's GET stream, and
        `notifications/tasks` to the listen streams of every web worker. Optional in the spec,
        never relied on: the row is what answers."""
        try:
            row = await store.aget_task_by_id(self.task_id)
            if row is None:
                return
            if self.session_id:
                stream_id = self.events.stream_id or await self._session_stream()
                self._wake(stream_id, await store.aappend(stream_id, [jsonrpc.dumps(status_notification(row))]))
            self._signal(messages.notify(row.server, tasks.NOTIFICATION, detailed(row)),
                         messages.IF_LOST[messages.NOTIFY])
        except Exception:
            logger.warning("Task %s changed; it could not be said", self.task_id, exc_info=True)

    async def flush(self):
        """Every message stored, and its readers woken, before the outcome."""
        await self.events.flush()
        if self.wakes:
            await asyncio.gather(*list(self.wakes), return_exceptions=True)

    async def request(self, method, params, timeout):
        raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "A task asks the client through its own questions")

    async def close_connection(self, retry_ms):
        pass

    async def notify_session(self, message: dict):
        pass

    async def run_sync(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    async def subscribe(self, uri: str):
        raise JSONRPCError(jsonrpc.INVALID_REQUEST, "A task cannot subscribe")

    unsubscribe = subscribe
    set_log_level = subscribe


class QueuedTask:
    """protocol.tasks.TaskControl for a call that is a task from its start."""

    def __init__(self, task_id: str, host: WorkerHost):
        self.task_id = task_id
        self.host = host
        self.wake = asyncio.Event()

    async def become_task(self, status_message: str | None = None) -> bool:
        return True

    async def ask(self, requests: dict[str, dict]) -> dict[str, dict]:
        status = await store.aask_task(self.task_id, requests)
        await self.host.status_changed()
        return await wait_for_answers(self.task_id, status, requests, self.wake)


def run_task(task_id: str) -> str:
    """The Tasks framework's entry point (sync, in its worker): -> the task's final status."""
    return asyncio.run(work(task_id))


run_task = task(backend=mcp_settings.TASK_BACKEND)(run_task)


async def enqueue(task_id: str):
    await run_task.aenqueue(task_id)


async def work(task_id: str) -> str:
    worker_id = f"tasks@{socket.gethostname()}-{os.getpid()}"[:100]
    row = await asyncio.to_thread(store.claim_task, task_id, worker_id)
    if row is None:
        return "not active"
    ctx, handler = await asyncio.to_thread(_context, row)
    call = asyncio.ensure_future(observe.request(ctx.server, row.method, ctx.params, ctx,
                                                 handler(row.method, ctx.params, ctx)))
    watch = asyncio.ensure_future(_hold(task_id, worker_id, call))
    try:
        result = await call
        payload = {"result": result}
    except asyncio.CancelledError:
        return "cancelled"
    except JSONRPCError as exc:
        payload = {"error": exc.to_dict()}
    except Exception as exc:
        logger.exception("Task %s failed", task_id)
        payload = {"error": errors.internal(exc)}
    finally:
        watch.cancel()
        await ctx.host.flush()
    status = await asyncio.to_thread(_finish, row, payload)
    await ctx.host.status_changed()
    await ctx.host.flush()
    return status


def _context(row: Task):
    """The call as the task's row describes it, and the handler of its era."""
    server = get_server(row.server)
    params = json.loads(row.request)
    capabilities = json.loads(row.client_capabilities)
    session = row.session if row.session_id else None
    if session is not None:
        handler, meta = server.dispatcher.handle, None
    else:
        handler = server.modern.handle
        meta = modern.RequestMeta(modern.MODERN_VERSIONS[0], capabilities, None, None)
    host = WorkerHost(row.pk, row.session_id)
    ctx = Context(server=server, session=session, request_id=None, params=params,
                  host=host, user=row.user, modern=meta, task=QueuedTask(row.pk, host))
    return ctx, handler


async def _hold(task_id: str, worker_id: str, call: asyncio.Future):
    """Renew the lease while the call runs; stop it once the row says the task ended (a cancel)."""
    renew_every = float(mcp_settings.LEASE_SECONDS) / 3
    loop = asyncio.get_running_loop()
    renew_at = loop.time() + renew_every
    while not call.done():
        await asyncio.sleep(ANSWER_POLL_SECONDS)
        if loop.time() >= renew_at:
            renew_at = loop.time() + renew_every
            if await asyncio.to_thread(store.claim_task, task_id, worker_id) is None:
                call.cancel()
                return
        elif task_id in await asyncio.to_thread(store.ended_tasks, [task_id]):
            call.cancel()
            return


def _finish(row: Task, payload: dict) -> str:
    if "error" in payload:
        store.finish_task(row.pk, Task.Status.FAILED, error=payload["error"], message=payload["error"].get("message", ""))
        return Task.Status.FAILED
    result = tasks.inlined_result(payload["result"])
    failed = row.session_id is not None and result.get("isError") is True
    status = Task.Status.FAILED if failed else Task.Status.COMPLETED
    store.finish_task(row.pk, status, result=result, message="The tool reported an error" if failed else "")
    return status
