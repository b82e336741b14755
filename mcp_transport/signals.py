"""Django signals a project may connect to (sync or async receivers; sent with `asend`).

- `session_created(server, session_id, principal, client_info)`: a 2025-11-25 `initialize`.
- `session_ended(server, session_id)`: its DELETE.
- `task_created(server, task_id, tool, principal)`, `task_finished(server, task_id, status)`:
  a call that became a task (either era), and its end here (completed, failed or cancelled).

Receivers run in the request's own task: keep them quick (queue slow work elsewhere). Nothing is
sent when no receiver is connected.
"""
from django.dispatch import Signal

session_created = Signal()
session_ended = Signal()
task_created = Signal()
task_finished = Signal()
