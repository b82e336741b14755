"""Django signals a project may connect to (sync or async receivers; sent with `asend`).

- `session_created(server, session_id, principal, client_info)`: a 2025-11-25 `initialize`.
- `session_ended(server, session_id)`: its DELETE.
- `request_started(server, method, request_id, tool, session_id, protocol_version)` and
  `request_finished(..., outcome, duration)`: a request's handler (either era; a task's work too),
  `tool` the declared tool a `tools/call` names (else None), `outcome` one of ok, tool_error,
  error, cancelled, input_required, `duration` in seconds.
- `stream_disconnected(server, session_id, stream_id, reason)`: a 2025-11-25 SSE connection
  ended before its stream did (reason: client, policy, tool, admin, replaced, ended, error).
- `stream_resumed(server, session_id, stream_id, replayed)`: a GET with Last-Event-ID took the
  stream up again, `replayed` events sent from the table.
- `task_created(server, task_id, tool, principal)`, `task_finished(server, task_id, status)`:
  a call that became a task (either era), and its end here (completed, failed or cancelled).

Receivers run in the request's own task: keep them quick (queue slow work elsewhere). Nothing is
sent when no receiver is connected.
"""
from django.dispatch import Signal

session_created = Signal()
session_ended = Signal()
request_started = Signal()
request_finished = Signal()
stream_disconnected = Signal()
stream_resumed = Signal()
task_created = Signal()
task_finished = Signal()
