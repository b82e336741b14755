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
import base64
import json
import logging
import uuid
from datetime import datetime

from .. import metrics, signals
from ..conf import mcp_settings
from ..models import Task
from ..protocol import jsonrpc, tasks
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.context import check_answer
from ..protocol.mrtr import check_response
from ..storage import store
from ..storage.recent import WORKING_TASK_SECONDS
from ..wakeups.relay import Relay
from . import errors
from .answers import ANSWER_POLL_SECONDS, wait_for_answers
from .task_events import TaskEventLog
from .task_shapes import detailed, status_notification, task_fields

logger = logging.getLogger("mcp_transport")


class RunningTask:
    """One call that may become a task (protocol.tasks.TaskControl), and its work once it is one."""

    def __init__(self, tasks_here: "Tasks", server, message, capabilities: dict, principal: str, tool: str, *,
                 session_id: str | None = None, ttl_ms: int | None = None):
        self.tasks_here = tasks_here
        self.server = server
        self.message = message
        self.capabilities = capabilities
        self.principal = principal
        self.tool = tool
        # A 2025-11-25 task belongs to its session too (the form of its answers, its notifications).
        self.session_id = session_id
        self.ttl_ms = ttl_ms
        self.user_id = None
        # Answers the call already had (2026-07-28: its MRTR rounds): the task starts with them.
        self.prior_answers: dict = {}
        self.runner = mcp_settings.TASK_RUNNER
        self.task_id: str | None = None
        self.created: asyncio.Future = asyncio.get_running_loop().create_future()
        self.creating: asyncio.Task | None = None
        self.work: asyncio.Task | None = None
        self.wake = asyncio.Event()
        self.stopped_for: str | None = None
        self.events: TaskEventLog | None = None  # once it is a task

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
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            # Another runner runs the call again from this: its progress goes to the same token.
            request["_meta"] = {"progressToken": meta["progressToken"]}
        ttl = mcp_settings.TASK_TTL_SECONDS
        ttl_ms = int(ttl * 1000) if ttl is not None else None
        if self.ttl_ms is not None:
            ttl_ms = self.ttl_ms if ttl_ms is None else min(self.ttl_ms, ttl_ms)
        try:
            row = await store.acreate_task(
                str(uuid.uuid4()), server=self.server.name, principal=self.principal, method=self.message.method,
                tool=self.tool, request=request, client_capabilities=self.capabilities, ttl_ms=ttl_ms,
                poll_interval_ms=int(mcp_settings.TASK_POLL_INTERVAL_MS), session_id=self.session_id,
                user_id=self.user_id, runner=self.runner, answers=self.prior_answers)
        except BaseException as exc:
            if not self.created.done():
                self.created.set_exception(exc)
            raise
        if status_message:
            row.status_message = status_message
        self.task_id = row.pk
        self.events = TaskEventLog(row.pk)
        metrics.tasks_created.inc()
        if self.runner == "process":
            self.tasks_here.running[row.pk] = self
        self.created.set_result(task_fields(row))
        if signals.task_created.receivers:
            await signals.task_created.asend(sender=None, server=self.server.name, task_id=row.pk, tool=self.tool,
                                             principal=self.principal)

    async def ask(self, requests: dict[str, dict]) -> dict[str, dict]:
        """Questions from the running task: they wait in its row until `tasks/update` (or, on a
        2025-11-25 session, the client's answers on a `tasks/result` stream) answer them."""
        status = await store.aask_task(self.task_id, requests)
        await self.tasks_here.changed(self.task_id)
        return await wait_for_answers(self.task_id, status, requests, self.wake)


class Tasks:
    """This process's tasks; one per process, owned by the worker."""

    def __init__(self, relay: Relay, send_to_session):
        self.relay = relay
        # How a 2025-11-25 task's notifications reach its session (`runner.Requests.send_to_session`).
        self.send_to_session = send_to_session
        # How a task's changes reach the 2026-07-28 listen streams on every worker
        # (`modern.ModernRequests.notify`, set by the worker).
        self.notify_listens = None
        self.running: dict[str, RunningTask] = {}
        # The `tasks/result` streams held here, by task: woken when the task changes.
        self.waiters: dict[str, set[asyncio.Event]] = {}

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
            fields = await asyncio.shield(running.created)
        except JSONRPCError as exc:
            work.cancel()
            return jsonrpc.error_from(running.message.id, exc)
        await self.adopt(running, work)
        return jsonrpc.result(running.message.id, tasks.created(fields))

    async def adopt(self, running: RunningTask, work: asyncio.Task):
        """The task's work goes on here (its outcome stored when it ends), or, with the
        django_tasks runner, this process stops it and the Tasks framework runs the call again,
        from the start, in its own worker (the answers it had go with it)."""
        if running.runner == "process":
            running.work = work
            work.add_done_callback(lambda done: asyncio.ensure_future(self._finish(running, done)))
            return
        work.cancel()
        from .task_worker import enqueue

        try:
            await enqueue(running.task_id)
        except Exception as exc:
            logger.exception("Task %s could not be queued", running.task_id)
            await store.afinish_task(running.task_id, Task.Status.FAILED, error=errors.internal(exc),
                                     message="It could not be queued")

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
                result = tasks.inlined_result(payload["result"])
                # 2025-11-25 counts a tool's error result as a failed task; the extension, as completed.
                failed = running.session_id is not None and result.get("isError") is True
                await store.afinish_task(task_id, Task.Status.FAILED if failed else Task.Status.COMPLETED,
                                         result=result, message="The tool reported an error" if failed else "")
        except Exception:
            logger.exception("Storing the outcome of task %s failed", task_id)
        finally:
            self.running.pop(task_id, None)
            row = await self.changed(task_id)
            if signals.task_finished.receivers:
                await signals.task_finished.asend(sender=None, server=running.server.name, task_id=task_id,
                                                  status=row.status if row else None)

    async def changed(self, task_id: str) -> Task | None:
        """The task changed: `notifications/tasks/status` on its session's GET stream (2025-11-25),
        `notifications/tasks` on the listen streams that asked for it, on every worker (2026-07-28).
        Both optional in the spec, never relied on: the task's row is what answers. -> the row."""
        try:
            row = await store.aget_task_by_id(task_id)
        except Exception:
            logger.warning("Task %s changed; it could not be read to say so", task_id, exc_info=True)
            return None
        if row is None:
            return None
        if row.session_id:
            try:
                await self.send_to_session(row.session_id, status_notification(row))
            except Exception:
                logger.warning("The status notification of task %s was not stored", task_id, exc_info=True)
        if self.notify_listens is not None:
            await self.notify_listens(row.server, tasks.NOTIFICATION, detailed(row))
        return row

    async def visible(self, server, principal: str, granted, task_ids: list[str]) -> list[str]:
        """The tasks among these that `principal` may see (a listen stream's `taskIds`): one read. An
        anonymous session's tasks are that session's alone."""
        rows = await asyncio.gather(*(store.aget_task(task_id, server.name, principal) for task_id in task_ids))
        return [row.id for row in rows
                if row is not None and (principal or row.session_id is None) and usable(server, row, granted)]

    async def _read(self, server, task_id: str, principal: str, granted):
        """The task if this caller may see it: its principal's, with the scopes its tool needs."""
        row = await store.aget_task(task_id, server.name, principal)
        if row is None or not usable(server, row, granted):
            raise tasks.unknown_task(task_id)
        return row

    # The task methods, on any worker

    async def handle(self, server, method: str, params: dict, principal: str, granted) -> dict:
        task_id = tasks.task_id_param(params)
        if method == "tasks/get":
            return detailed(await self._read(server, task_id, principal, granted))
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict):
                raise jsonrpc.InvalidParams("Invalid params: 'inputResponses' must be an object")
            row = await self._read(server, task_id, principal, granted)
            pending = json.loads(row.input_requests)
            for key, response in responses.items():
                if key in pending:
                    check_response(key, pending[key].get("method", ""), response)
            row = await store.aanswer_task(task_id, server.name, principal, responses)
            if row is not None and not row.terminal:
                await self.reach(row, "wake")
                if any(key in pending for key in responses):
                    await self.changed(task_id)
            return {}
        if scoped(server, granted):
            await self._read(server, task_id, principal, granted)
        row = await store.acancel_task(task_id, server.name, principal, "Cancelled by the client")
        if row is None:
            raise tasks.unknown_task(task_id)
        if row.status == Task.Status.CANCELLED:
            await self.reach(row, "cancel")
            await self.changed(task_id)
        return {}

    # The 2025-11-25 task methods, on a session

    async def _session_task(self, server, session, task_id: str, principal: str, granted) -> Task:
        row = await self._read(server, task_id, principal, granted)
        if not principal and row.session_id != session.id:
            raise tasks.unknown_task(task_id)
        return row

    async def handle_session(self, server, session, method: str, params: dict, principal: str, ctx) -> dict:
        if method == "tasks/list":
            return await self.list_for_session(server, session, params, principal, ctx.granted_scopes)
        task_id = tasks.task_id_param(params)
        row = await self._session_task(server, session, task_id, principal, ctx.granted_scopes)
        if method == "tasks/get":
            return tasks.session_fields(task_fields(row))
        if method == "tasks/cancel":
            if row.terminal:
                raise jsonrpc.InvalidParams(f"Cannot cancel task {task_id}: it is already {row.status}")
            row = await store.acancel_task(task_id, server.name, principal, "Cancelled by the client")
            await self.reach(row, "cancel")
            await self.changed(task_id)
            return tasks.session_fields(task_fields(row))
        return await self.result_for_session(server, row, principal, ctx)

    async def result_for_session(self, server, row: Task, principal: str, ctx) -> dict:
        """`tasks/result`: waits for the end, asking the client on this stream the questions the
        task waits on (its answers go to the task, wherever it runs); then exactly what the call
        would have answered, saying which task it was."""
        task_id, asked = row.pk, {}
        wake = asyncio.Event()
        self.waiters.setdefault(task_id, set()).add(wake)
        try:
            while not row.terminal:
                for key, request in json.loads(row.input_requests).items():
                    if key not in asked:
                        asked[key] = asyncio.ensure_future(self._ask_on_stream(server, row, principal, key, request,
                                                                               ctx))
                wake.clear()
                try:
                    await asyncio.wait_for(wake.wait(), ANSWER_POLL_SECONDS)
                except asyncio.TimeoutError:
                    pass
                row = await store.aget_task_by_id(task_id)
                if row is None:
                    raise tasks.unknown_task(task_id)
        finally:
            self.waiters.get(task_id, set()).discard(wake)
            if not self.waiters.get(task_id):
                self.waiters.pop(task_id, None)
            for question in asked.values():
                question.cancel()
        if row.status == Task.Status.CANCELLED:
            raise tasks.cancelled_result_error()
        if row.result:
            result = json.loads(row.result)
            return {**result, "_meta": tasks.related(task_id, result.get("_meta"))}
        error = json.loads(row.error) if row.error else errors.TASK_LOST
        raise JSONRPCError(error.get("code", jsonrpc.INTERNAL_ERROR), error.get("message", ""), error.get("data"))

    async def _ask_on_stream(self, server, row: Task, principal: str, key: str, request: dict, ctx):
        params = tasks.with_related({"params": request.get("params") or {}}, row.pk)["params"]
        method = request.get("method", "")
        try:
            answer = check_answer(f"the client's {method} result", method,
                                  await ctx.host.request(method, params, None))
        except JSONRPCError as exc:
            logger.info("The client answered question %s of task %s with an error: %s", key, row.pk, exc.message)
            return
        updated = await store.aanswer_task(row.pk, server.name, principal, {key: answer})
        if updated is not None and not updated.terminal:
            await self.reach(updated, "wake")
            await self.changed(row.pk)

    async def list_for_session(self, server, session, params: dict, principal: str, granted) -> dict:
        after = None
        cursor = params.get("cursor")
        if cursor is not None:
            try:
                created_at, task_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
                after = (datetime.fromisoformat(created_at), tasks.task_id_param({"taskId": task_id}))
            except Exception:
                raise jsonrpc.InvalidParams("Invalid params: unknown cursor") from None
        rows = await store.alist_tasks(server.name, principal, session.id, after, tasks.LIST_PAGE + 1)
        result = {"tasks": [tasks.session_fields(task_fields(row)) for row in rows[:tasks.LIST_PAGE]
                            if usable(server, row, granted)]}
        if len(rows) > tasks.LIST_PAGE:
            last = rows[tasks.LIST_PAGE - 1]
            result["nextCursor"] = base64.urlsafe_b64encode(
                json.dumps([last.created_at.isoformat(), last.pk]).encode()).decode("ascii")
        return result

    async def reach(self, row: Task, action: str):
        """The task's row changed here: tell the worker running it, and return once that worker has
        heard, when it may answer polls from memory (`storage.recent.WorkingTasks`): from then on
        none of its answers predates the change (unheard, past WORKING_TASK_SECONDS its memory lapsed)."""
        if row.pk in self.running:
            self.on_signal(row.pk, action)
        elif row.worker == self.relay.worker_id or (row.worker and not row.may_be_remembered()):
            self.relay.task(row.worker, row.pk, action)
        elif row.worker:
            await self.relay.task_heard(row.worker, row.pk, action, WORKING_TASK_SECONDS)

    def on_signal(self, task_id: str, action: str):
        """A task of this process was answered ("wake") or cancelled ("cancel") on some worker."""
        store.forget_task(task_id)
        for waiter in self.waiters.get(task_id, ()):
            waiter.set()
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


def usable(server, row, granted) -> bool:
    """A task is its tool's: a token without the scopes that tool needs no longer sees it (as
    tools/list no longer shows the tool), and learns nothing of it."""
    tool = server.tools.get(row.tool)
    return tool is None or not tool.missing_scopes(granted)


def scoped(server, granted) -> bool:
    """Whether any task of this server could be hidden from this caller by its scopes."""
    return granted is not None and any(tool.scopes for tool in server.tools.values())
