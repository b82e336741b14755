"""The project's own benchmark: `make bench` or `python -m bench` (see bench/run.py).

client.py     a minimal HTTP/1.1 + chunked + SSE client on asyncio streams, and an MCP session on it
procstat.py   CPU and RSS of a process (and of the host) from /proc
scenarios.py  calls, streams, resume, replay, burst: each returns a dict of figures
dbtool.py     the database side (run with Django set up): bulk filler rows, stored-event timings
server.py     starts the example project under daphne (pinned, fresh database) and stops it
settings.py   the Django settings the served example runs with
run.py        the command line: servers, scenarios, one markdown table, JSON and a plot
"""
