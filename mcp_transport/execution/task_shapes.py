"""A task's row as the wire shows it: the fields every form shares, and a `tasks/get` answer.

Used where tasks run (the web process, a Tasks framework worker) and where they are answered.
"""
from __future__ import annotations

import json

from ..models import Task
from ..protocol import jsonrpc, tasks
from ..storage.records import TaskView


def task_fields(row: Task | TaskView) -> dict:
    return tasks.task_fields(row.pk, row.status, created_at=row.created_at, updated_at=row.updated_at,
                             ttl_ms=row.ttl_ms, poll_interval_ms=row.poll_interval_ms,
                             status_message=row.status_message)


def status_notification(row: Task | TaskView) -> dict:
    """`notifications/tasks/status` for a 2025-11-25 task's session."""
    return jsonrpc.notification("notifications/tasks/status", tasks.session_fields(task_fields(row)))


def detailed(row: Task | TaskView) -> dict:
    return tasks.detailed(task_fields(row), result=json.loads(row.result) if row.result else None,
                          error=json.loads(row.error) if row.error else None,
                          input_requests=json.loads(row.input_requests))
