"""The project's own benchmark: `make bench` or `python -m bench` (see bench/run.py), and the
side-by-side run with the official SDKs: `make yardstick` (see bench/yardstick.py).

client.py     a minimal HTTP/1.1 + chunked + SSE client on asyncio streams, and an MCP session on it
procstat.py   CPU and RSS of a process (and of the host) from /proc
scenarios.py  calls, streams, resume, replay, burst, growth: each returns a dict of figures
dbtool.py     the database side (run with Django set up): bulk filler rows, stored-event timings
server.py     starts the example project under daphne (pinned, fresh database) and stops it
settings.py   the Django settings the served example runs with
floor.py      the bare ASGI app: what the server underneath costs
run.py        the command line: servers, scenarios, one markdown table, JSON and a plot
anchors/      the official Python and TypeScript SDKs serving the same tools, and their installer
yardstick.py  this project beside the anchors and the floor, interleaved repeats, one summary
store_cost.py the database thread's cost per request, without HTTP
tasks.py      tasks: round trips to create and read one, 1,000 held at once, tasks/get against echo
"""
