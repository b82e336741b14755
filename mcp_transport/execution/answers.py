"""A task waiting for the client's answers to its questions: what both runners share."""
from __future__ import annotations

import asyncio

from ..protocol import tasks
from ..storage import store

# How often a task waiting for answers reads them, besides the wake-up that says they came.
ANSWER_POLL_SECONDS = 1.0


async def wait_for_answers(task_id: str, status: str | None, requests: dict, wake: asyncio.Event) -> dict:
    """Read the task's answers until every one of `requests` has one: woken when they come, and
    reading anyway every ANSWER_POLL_SECONDS (a lost wake-up only waits). A task that ended meanwhile
    (cancelled) stops its work here."""
    while True:
        if status not in tasks.ACTIVE:
            raise asyncio.CancelledError(f"task {task_id} is {status}")
        status, answers = await store.atask_answers(task_id, list(requests))
        if len(answers) == len(requests):
            return answers
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), ANSWER_POLL_SECONDS)
        except asyncio.TimeoutError:
            pass
