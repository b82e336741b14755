"""Tasks on this worker: calls that became tasks, and the task methods any worker answers.

A call of a tool that supports tasks, from a client that accepts them, starts as a plain call.
It becomes a task when the tool says so (`ctx.continue_as_task()`) or when it has not finished
after TASK_GRACE_SECONDS: the task's row is written (durable: any worker can answer `tasks/get`
from then on), the client gets the handle, and the tool goes on in this process. A quick call
never becomes a task; questions asked before the task exists are input_required results (MRTR),
questions asked after wait in the task (`tasks/get` shows them, `tasks/update` answers them).

The table decides: a cancel marks the row cancelled first, then tells the worker running the
work to stop it; the work's outcome is stored only if the row is still active. The worker
renews its tasks' leases with its heartbeat; a task whose lease ran out (its worker died) ends
`failed`, never stuck `working`.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid

from ..conf import mcp_settings
from ..models import Task
from ..protocol import jsonrpc, tasks
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.mrtr import check_response
from ..storage import store
from ..wakeups.relay import Relay
from . import errors

logger = logging.getLogger("mcp_transport")

# How often a task waiting for answers reads them, besides the wake-up that says they came.
ANSWER_POLL_SECONDS = 1.0


def _fields(row: Task) -> dict:
    return tasks.task_fields(row.pk, row.status, created_at=row.created_at, updated_at=row.updated_at,
                             ttl_ms=row.ttl_ms, poll_interval_ms=row.poll_interval_ms,
                             status_message=row.status_message)


def detailed(row: Task) -> dict:
    return tasks.detailed(_fields(row), result=json.loads(row.result) if row.result else None,
                          error=json.loads(row.error) if row.error else None,
                          input_requests=json.loads(row.input_requests))


class RunningTask:
    """One call that may become a task (protocol.tasks.TaskControl), and its work once it is one."""

    def __init__(self, tasks_here: "Tasks", server, message, meta, principal: str, tool: str):
        self.tasks_here = tasks_here
        self.server = server
        self.message = message
        self.meta = meta
        self.principal = principal
        self.tool = tool
        self.task_id: str | None = None
        self.created: asyncio.Future = asyncio.get_running_loop().create_future()
        self.creating: asyncio.Task | None = None
        self.work: asyncio.Task | None = None
        self.wake = asyncio.Event()
        self.stopped_for: str | None = None

    async def become_task(self, status_message: str | None = None) -> bool:
        if self.creating is None:
            self.creating = asyncio.ensure_future(self._create(status_message or ""))
        await asyncio.shield(self.creating)
        return True

    def start_soon(self):
        """The grace ran out: become a task (unless the call is one, or finished, already)."""
        if self.creating is None and (self.work is None or not self.work.done()):
            self.creating = asyncio.ensure_future(self._create(""))

    async def _create(self, status_message: str):
        params = self.message.params or {}
        request = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState", "task")}
        ttl = mcp_settings.TASK_TTL_SECONDS
        try:
            row = await store.acreate_task(
                str(uuid.uuid4()), server=self.server.name, principal=self.principal, method=self.message.method,
                tool=self.tool, request=request, client_capabilities=self.meta.capabilities,
                ttl_ms=int(ttl * 1000) if ttl is not None else None,
                poll_interval_ms=int(mcp_settings.TASK_POLL_INTERVAL_MS))
        except BaseException as exc:
            if not self.created.done():
                self.created.set_exception(exc)
            raise
        if status_message:
            row.status_message = status_message
        self.task_id = row.pk
        self.tasks_here.running[row.pk] = self
        self.created.set_result(tasks.created(_fields(row)))

    async def ask(self, requests: dict[str, dict]) -> dict[str, dict]:
        """Questions from the running task: they wait in its row until `tasks/update` answers them."""
        status = await store.aask_task(self.task_id, requests)
        while True:
            if status not in tasks.ACTIVE:
                raise asyncio.CancelledError(f"task {self.task_id} is {status}")
            status, answers = await store.atask_answers(self.task_id, list(requests))
            if len(answers) == len(requests):
                return answers
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), ANSWER_POLL_SECONDS)
            except asyncio.TimeoutError:
                pass


class Tasks:
    """This process's tasks; one per process, owned by the worker."""

    def __init__(self, relay: Relay):
        self.relay = relay
        self.running: dict[str, RunningTask] = {}

    # A call that may become a task

    async def run_call(self, running: RunningTask, outcome) -> dict:
        """Run a call (`outcome`: a coroutine -> its JSON-RPC response) that may become a task:
        -> its response, or the created task's."""
        work = running.work = asyncio.ensure_future(outcome)
        grace = asyncio.get_running_loop().call_later(float(mcp_settings.TASK_GRACE_SECONDS), running.start_soon)
        try:
            await asyncio.wait({work, running.created}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if running.creating is None:
                work.cancel()
            raise
        finally:
            grace.cancel()
        if running.creating is None:
            return work.result()
        try:
            created = await asyncio.shield(running.created)
        except JSONRPCError as exc:
            work.cancel()
            return jsonrpc.error_from(running.message.id, exc)
        work.add_done_callback(lambda done: asyncio.ensure_future(self._finish(running, done)))
        return jsonrpc.result(running.message.id, created)

    async def _finish(self, running: RunningTask, work: asyncio.Task):
        task_id = running.task_id
        try:
            if work.cancelled():
                if running.stopped_for:
                    await store.afinish_task(task_id, Task.Status.FAILED,
                                             error=errors.task_stopped(running.stopped_for), message=running.stopped_for)
                return
            payload = work.result()
            if "error" in payload:
                await store.afinish_task(task_id, Task.Status.FAILED, error=payload["error"],
                                         message=payload["error"].get("message", ""))
            else:
                await store.afinish_task(task_id, Task.Status.COMPLETED, result=tasks.inlined_result(payload["result"]))
        except Exception:
            logger.exception("Storing the outcome of task %s failed", task_id)
        finally:
            self.running.pop(task_id, None)

    # The task methods, on any worker

    async def handle(self, server, method: str, params: dict, principal: str) -> dict:
        task_id = tasks.task_id_param(params)
        if method == "tasks/get":
            row = await store.aget_task(task_id, server.name, principal)
            if row is None:
                raise tasks.unknown_task(task_id)
            return detailed(row)
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict):
                raise jsonrpc.InvalidParams("Invalid params: 'inputResponses' must be an object")
            row = await store.aget_task(task_id, server.name, principal)
            if row is None:
                raise tasks.unknown_task(task_id)
            pending = json.loads(row.input_requests)
            for key, response in responses.items():
                if key in pending:
                    check_response(key, pending[key].get("method", ""), response)
            row = await store.aanswer_task(task_id, server.name, principal, responses)
            if row is not None and not row.terminal:
                self.signal(row.worker, task_id, "wake")
            return {}
        row = await store.acancel_task(task_id, server.name, principal, "Cancelled by the client")
        if row is None:
            raise tasks.unknown_task(task_id)
        if row.worker:
            self.signal(row.worker, task_id, "cancel")
        return {}

    def signal(self, worker_id: str, task_id: str, action: str):
        if task_id in self.running:
            self.on_signal(task_id, action)
        else:
            self.relay.task(worker_id, task_id, action)

    def on_signal(self, task_id: str, action: str):
        """A task of this process was answered ("wake") or cancelled ("cancel") on some worker."""
        running = self.running.get(task_id)
        if running is None:
            return
        if action == "cancel" and running.work is not None:
            running.work.cancel()
        running.wake.set()

    async def sweep(self):
        """The tasks running here that the table says ended (a cancel whose message was lost): stop them."""
        for task_id in await store.aended_tasks(list(self.running)):
            self.on_signal(task_id, "cancel")

    def stop_all(self, reason: str):
        """Shutdown, past its grace: the tasks still running here end `failed` with `reason`."""
        for running in list(self.running.values()):
            if running.work is not None and not running.work.done():
                running.stopped_for = reason
                running.work.cancel()
