"""The operators' admin: MCP sessions, streams and events, read-only, with the operations on live traffic.

Pages are view-only for everyone (nothing is added, edited or deleted by hand); what an operator
may do is a permission of the model:

| page or operation                            | permission                                   |
|----------------------------------------------|----------------------------------------------|
| see sessions / streams / events / workers    | `view_<model>` (or `change_<model>`)         |
| terminate a session                          | `mcp_transport.change_session`               |
| close a stream's live connection             | `mcp_transport.change_stream`                |
| cancel a stream's in-flight request          | `mcp_transport.change_stream`                |
| prune expired sessions and finished streams  | `mcp_transport.delete_session` and `mcp_transport.delete_stream` |
| end a 2026-07-28 listen stream or call       | `mcp_transport.change_modernrequest`         |
| cancel a task                                | `mcp_transport.change_task`                  |

Changelists make a fixed number of queries whatever the page size: the counts shown come from
stored counters (`Stream.last_seq`) and from one grouped query for the page's rows
(`decorate()`), never from one query per row.

Where things are: one module per page (`sessions`, `streams`, `events`, `workers`, `tokens`,
`modern`: the 2026-07-28 listen streams and long calls, `tasks`, `elicitations`: URL
elicitations and whether their page completed them);
`base` the view-only ModelAdmin they share (date-times to the second), `actions` how a page
runs an operation (confirmation, report, history), `counts` the per-page counts, `display`
badges, times and payloads, `timeline` the stream and task pages' SVG (and which stored events
are a task's). What each state means (session, stream, worker) is decided in
`mcp_transport.models`, shared with `manage.py mcp_status` and the metrics.
"""
# Importing the page modules registers them (Django's admin autodiscovery imports this package).
from . import elicitations, events, modern, sessions, streams, tasks, tokens, workers  # noqa: F401
