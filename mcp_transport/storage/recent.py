"""What this process remembers from the database for a few seconds, so hot reads skip it.

All are this process's (the worker holds them); the database stays the source of truth: an
entry lives seconds at most, and what ends it early (a DELETE, a prune) forgets it here at once
and reaches the other workers through the relay.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Generic, TypeVar

from django.utils import timezone

from ..models import Session
from .orm import TOUCH_EVERY
from .records import TaskView

# Sessions seen in the last seconds, so a burst of requests costs one lookup.
SESSION_CACHE_SECONDS = 2.0
MAX_SESSIONS = 10_000
# Finished tasks read in the last seconds, so that polls of a task that has ended cost no database
# read: a completed, failed or cancelled task never changes again, it only goes (pruned past its
# TTL, deleted by an operator). An entry never outlives the task's expiry.
FINISHED_TASK_SECONDS = 5.0
MAX_FINISHED_TASKS = 10_000
# Active tasks this process runs, as it last read them, so that polls answered by the process
# running a task read no row either. An entry is answered from for at most this long after the
# read (or the check, `WorkingTasks.checked`) it came from began: a change made elsewhere reaches
# this process at once (`execution.tasks.Tasks.reach`), or waits this long before it is acknowledged.
WORKING_TASK_SECONDS = 1.0
MAX_WORKING_TASKS = 10_000

V = TypeVar("V")


class _Expiring(Generic[V]):
    """key -> (until, value) on the monotonic clock; past `limit` entries the expired go, then all."""

    limit: int

    def __init__(self):
        self.entries: dict[str, tuple[float, V]] = {}

    def _get(self, key: str, now: float) -> V | None:
        hit = self.entries.get(key)
        if hit is None:
            return None
        if hit[0] > now:
            return hit[1]
        del self.entries[key]
        return None

    def _put(self, key: str, until: float, value: V, now: float):
        if len(self.entries) >= self.limit and key not in self.entries:
            for stale in [k for k, (until_, _) in self.entries.items() if until_ <= now]:
                del self.entries[stale]
            if len(self.entries) >= self.limit:
                self.entries.clear()
        self.entries[key] = (until, value)

    def forget(self, key: str):
        self.entries.pop(key, None)

    def clear(self):
        self.entries.clear()


class RecentSessions(_Expiring[tuple[float, Session]]):
    """Sessions by id, each with when its `last_seen_at` is next written (monotonic)."""

    limit = MAX_SESSIONS

    def get(self, session_id: str, server: str) -> tuple[Session, bool] | None:
        """-> (session, whether its last_seen_at is due a write now), or None (ask the database)."""
        now = time.monotonic()
        hit = self._get(session_id, now)
        if hit is None or hit[1].server != server:
            return None
        touch_at, session = hit
        if now < touch_at:
            return session, False
        until = self.entries[session_id][0]
        self.entries[session_id] = (until, (now + touch_every(), session))
        return session, True

    def put(self, session: Session):
        now = time.monotonic()
        age = (timezone.now() - session.last_seen_at).total_seconds()
        self._put(session.id, now + SESSION_CACHE_SECONDS, (now + touch_every() - age, session), now)


class FinishedTasks(_Expiring[TaskView]):
    limit = MAX_FINISHED_TASKS

    def get(self, task_id: str) -> TaskView | None:
        return self._get(task_id, time.monotonic())

    def put(self, task: TaskView):
        """Remember a terminal task (others are not remembered)."""
        if not task.terminal:
            return
        now = time.monotonic()
        until = now + FINISHED_TASK_SECONDS
        if task.expires_at is not None:
            until = min(until, now + _seconds_until(task.expires_at))
        if until > now:
            self._put(task.id, until, task, now)


class WorkingTasks:
    """The active tasks this process runs, as read: the one memory of a row that can still change.

    A poll answered from an entry must not predate any change acknowledged to anyone, so:
    - an entry is answered from only until WORKING_TASK_SECONDS after the read it came from began
      (`begin`, `read`), or after a later check of it against its row (`checked`), and only while
      this process's lease on its tasks holds (`leased`): past the lease another worker may fail them;
    - a change written through the store in this process forgets the entry when it starts and again
      when it commits, and spoils the reads under way (they were begun before it), so none of them
      puts the old row back;
    - a change written by another process is acknowledged only once this process has forgotten the
      entry (`Tasks.reach`, through the relay) or WORKING_TASK_SECONDS after it committed.
    Only entries answered from since the last check are checked again; the rest lapse.
    Writers may be on other threads (the database thread, the admin's): a lock guards the maps.
    """

    def __init__(self, worker: str):
        self.worker = worker
        self.lock = threading.Lock()
        # task id -> [answered from until (monotonic), the task, answered from since the last check]
        self.entries: dict[str, list] = {}
        # Reads under way, by task: [how many, whether a change since the first of them spoiled them].
        self.reads: dict[str, list] = {}
        self.leased_until = float("-inf")

    def get(self, task_id: str) -> TaskView | None:
        hit = self.entries.get(task_id)
        if hit is None:
            return None
        now = time.monotonic()
        if now < hit[0] and now < self.leased_until:
            hit[2] = True
            return hit[1]
        return None

    def begin(self, task_id: str) -> float:
        """A read of the row starts: -> its start, for `read`."""
        with self.lock:
            self.reads.setdefault(task_id, [0, False])[0] += 1
        return time.monotonic()

    def read(self, task_id: str, started: float, task: TaskView | None):
        """The read begun at `started` ended with `task`: remembered if this process runs it and no
        change came while it was under way."""
        with self.lock:
            pending = self.reads[task_id]
            pending[0] -= 1
            spoiled = pending[1]
            if not pending[0]:
                del self.reads[task_id]
            if spoiled or task is None or task.terminal or task.worker != self.worker:
                return
            until = started + WORKING_TASK_SECONDS
            if task.expires_at is not None:
                until = min(until, time.monotonic() + _seconds_until(task.expires_at))
            if len(self.entries) >= MAX_WORKING_TASKS and task_id not in self.entries:
                self.entries.clear()
            self.entries[task_id] = [until, task, False]

    def forget(self, task_id: str):
        """The row changes (or changed): the entry goes, and the reads under way may not put it back."""
        with self.lock:
            self.entries.pop(task_id, None)
            pending = self.reads.get(task_id)
            if pending is not None:
                pending[1] = True

    def due(self) -> dict[str, TaskView]:
        """The entries answered from since the last check, to check against their rows: -> {task
        id: the entry's task}."""
        now = time.monotonic()
        with self.lock:
            due = {}
            for task_id, hit in list(self.entries.items()):
                if hit[2]:
                    hit[2] = False
                    due[task_id] = hit[1]
                elif hit[0] <= now:
                    del self.entries[task_id]
            return due

    def checked(self, started: float, seen: dict[str, TaskView], rows: dict[str, TaskView]):
        """`seen` (from `due`) was compared with `rows`, read after `started`: an entry still equal to
        its row is good until WORKING_TASK_SECONDS after `started`; one that differs goes."""
        with self.lock:
            for task_id, task in seen.items():
                hit = self.entries.get(task_id)
                if hit is None or hit[1] is not task:
                    continue  # forgotten or read again meanwhile
                if rows.get(task_id) == task:
                    hit[0] = max(hit[0], started + WORKING_TASK_SECONDS)
                else:
                    del self.entries[task_id]

    def leased(self, until: float):
        """This process's leases on its tasks were renewed: they hold until `until` (monotonic)."""
        self.leased_until = until

    def clear(self):
        with self.lock:
            self.entries.clear()
            for pending in self.reads.values():
                pending[1] = True


class Recent:
    """This process's short memory of the store."""

    def __init__(self, worker: str):
        self.sessions = RecentSessions()
        self.finished_tasks = FinishedTasks()
        self.working_tasks = WorkingTasks(worker)

    def clear(self):
        """Forget everything (rows were deleted under it: a prune, a test's flush)."""
        self.sessions.clear()
        self.finished_tasks.clear()
        self.working_tasks.clear()


def touch_every() -> float:
    return TOUCH_EVERY.total_seconds()


def _seconds_until(moment: datetime) -> float:
    return (moment - timezone.now()).total_seconds()
