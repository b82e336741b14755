"""What this process remembers from the database for a few seconds, so hot reads skip it.

Both are this process's (the worker holds them); the database stays the source of truth: an
entry lives seconds at most, and what ends it early (a DELETE, a prune) forgets it here at once
and reaches the other workers through the relay.
"""
from __future__ import annotations

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


class Recent:
    """This process's short memory of the store."""

    def __init__(self):
        self.sessions = RecentSessions()
        self.finished_tasks = FinishedTasks()

    def clear(self):
        """Forget everything (rows were deleted under it: a prune, a test's flush)."""
        self.sessions.clear()
        self.finished_tasks.clear()


def touch_every() -> float:
    return TOUCH_EVERY.total_seconds()


def _seconds_until(moment: datetime) -> float:
    return (moment - timezone.now()).total_seconds()
