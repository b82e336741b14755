"""Tasks, measured: `python bench/tasks.py [--db postgres|sqlite] [--quick]` (`make bench-tasks`).

trips  database round trips on the store's database thread, in a process of its own serving the
       example project in-process (no HTTP, the ASGI application called directly): to create a task
       and to read its result, through the store alone (`acreate_task`, `aget_task`, each alone in
       its batch, as a lone request has them) and through a whole 2026-07-28 request (a tools/call
       that becomes a task; tasks/get of a completed task, of a working one; an echo call beside
       them; the completed one read again, from this process's finished tasks), and to store a burst
       of a task's progress notifications (TaskEventLog, as a task's host writes them). PostgreSQL:
       libpq's trace of that thread's connection, so BEGIN, COMMIT and the connection's health check
       count as the round trips they are; every vendor: the statements Django's cursor ran
       (`execute_wrapper`). Heartbeat and wake-up sweep are pushed out of the way (LEASE_SECONDS,
       WAKEUP_SWEEP_SECONDS 600): what is counted is the request's own.
held   N tasks working at once in one daphne process: N modern tools/call of slow_compute(seconds=S)
       (each a task once TASK_GRACE_SECONDS pass), all polled while every one is still working, the
       server left alone with them a few seconds (its idle CPU), then all polled until completed,
       each with its own result; the server's RSS and CPU through it.
polls  calls/s of tasks/get (a working task; a completed one, its result inlined) against echo calls,
       in both eras: 2026-07-28 (no session) and 2025-11-25 (a session per connection, its tasks
       created with `task` and polled in that session). C connections, each back to back, the six
       kinds in turns on one server (the order rotated each repeat), each measured after a warm-up;
       the server's CPU per call. Each poll is compared with the echo call of its era.

The server is pinned to CPU 0 and this client to CPU 1 when there are two; the host's load average
at the start and the end and the CPU everything else used during each measured window are printed
with the figures (only ratios from the same run compare). Prints one markdown table; writes
test-output/bench-tasks.json. Exits 1 when a correctness figure is wrong (an error, a task not in
the state it should be); timings and counts are reported, never asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/tasks.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import procstat  # noqa: E402
from bench.client import Connection, HTTPError, MCPSession, split_url  # noqa: E402
from bench.scenarios import ms, pct, short  # noqa: E402
from bench.server import ROOT, SETTINGS, BenchServer, databases, pinning  # noqa: E402

PARTS = ("trips", "held", "polls")
# Progress notifications a task's tool sends back to back in the trips part: stored against the task.
PROGRESS_BURST = 100
OUT = ROOT / "test-output" / "bench-tasks.json"
VERSION = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"extensions": {EXTENSION: {}}}
# The param each modern method's Mcp-Name header mirrors (mcp_transport.protocol.modern.NAMED).
NAMED = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
TERMINAL = ("completed", "failed", "cancelled")
# The trips child: no heartbeat and no wake-up sweep inside the counted windows.
TRIPS_TRANSPORT = {"LEASE_SECONDS": 600, "WAKEUP_SWEEP_SECONDS": 600}
# Round trips every 2026-07-28 request may cost at most, to create a task and to read its result.
TRIPS_TARGET = 2


def log(*parts):
    print("bench-tasks:", *parts, file=sys.stderr, flush=True)


# A 2026-07-28 client on the bench's HTTP/1.1 connections


class Modern:
    """Modern requests (no session: each carries its `_meta` and the Mcp-* headers)."""

    ids = itertools.count(1)

    def __init__(self, url: str, capabilities: dict | None = None):
        self.host, self.port, self.path = split_url(url)
        self.meta = {"io.modelcontextprotocol/protocolVersion": VERSION,
                     "io.modelcontextprotocol/clientCapabilities": capabilities or {},
                     "io.modelcontextprotocol/clientInfo": {"name": "mcp-transport-bench", "version": "1"}}

    def connection(self) -> Connection:
        return Connection(self.host, self.port)

    def request(self, method: str, params: dict) -> tuple[int, bytes]:
        request_id = next(Modern.ids)
        params = {**params, "_meta": self.meta}
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                          separators=(",", ":")).encode()
        name = params.get(NAMED.get(method, ""))
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nMCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\n"
                + (f"Mcp-Name: {name}\r\n" if isinstance(name, str) else "") + "\r\n")
        return request_id, head.encode("latin-1") + body

    async def rpc(self, conn: Connection, method: str, params: dict) -> dict:
        """One request on `conn` (reopened first if it cannot be reused) -> its `result`."""
        if not conn.reusable or not conn.is_open:
            conn.abort()
            await conn.open()
        request_id, data = self.request(method, params)
        response = await conn.request(data)
        body = await conn.read_body(response)
        if response.status != 200:
            raise HTTPError(response.status, body, method)
        message, _ = MCPSession.find_response(response, body, request_id)
        if "result" not in message:
            raise RuntimeError(f"{method}: {json.dumps(message)[:200]}")
        return message["result"]


async def each(modern: Modern, items: list, parallel: int, fn, timeout: float = 60.0) -> list:
    """`await fn(conn, item)` for every item, `parallel` connections each taking the next item:
    -> the results in order (an exception where one failed)."""
    results: list = [None] * len(items)
    indices = iter(range(len(items)))

    async def worker():
        conn = modern.connection()
        try:
            for i in indices:
                try:
                    async with asyncio.timeout(timeout):
                        results[i] = await fn(conn, items[i])
                except Exception as exc:  # noqa: BLE001 (returned, counted by the caller)
                    results[i] = exc
                    conn.abort()
        finally:
            conn.abort()

    await asyncio.gather(*(worker() for _ in range(min(parallel, len(items)) or 1)))
    return results


def _errors(results: list) -> list[str]:
    return [short(r) for r in results if isinstance(r, BaseException)]


# held: N tasks working at once in one process


async def held(url: str, *, count: int, seconds: float, parallel: int, pid: int | None, idle: float = 3.0) -> dict:
    modern = Modern(url, CAPABILITIES)
    warm = await each(modern, [0], 1, lambda conn, _: modern.rpc(conn, "tools/call", {
        "name": "echo", "arguments": {"message": "warm"}}))
    await asyncio.sleep(0.5)
    rss = {"before": procstat.rss_kb(pid) if pid else None}
    starts: list[float] = [0.0] * count

    async def create(conn, i):
        starts[i] = time.monotonic()
        result = await modern.rpc(conn, "tools/call", {"name": "slow_compute",
                                                       "arguments": {"seconds": seconds, "label": f"t{i}"}})
        if result.get("resultType") != "task" or result.get("status") != "working":
            raise RuntimeError(f"not a working task: {json.dumps(result)[:160]}")
        return result["taskId"]

    t0 = time.monotonic()
    cpu = procstat.CPUWindow(pid)
    created = await each(modern, list(range(count)), parallel, create)
    create_cpu = cpu.stop()
    create_s = time.monotonic() - t0
    task_ids = [r for r in created if isinstance(r, str)]
    earliest_due = min(starts) + seconds
    rss["created"] = procstat.rss_kb(pid) if pid else None

    async def get(conn, task_id):
        return await modern.rpc(conn, "tasks/get", {"taskId": task_id})

    t1 = time.monotonic()
    cpu = procstat.CPUWindow(pid)
    polled = await each(modern, task_ids, parallel, get)
    sweep_cpu = cpu.stop()
    sweep_end = time.monotonic()
    working = sum(1 for r in polled if isinstance(r, dict) and r.get("status") == "working")
    all_at_once = working == count and sweep_end < earliest_due

    # Alone with them: what N working tasks cost the process while nobody asks.
    hold = max(0.0, min(idle, earliest_due - time.monotonic() - 1.0))
    cpu = procstat.CPUWindow(pid)
    await asyncio.sleep(hold)
    idle_cpu = cpu.stop() if hold else {}
    rss["held"] = procstat.rss_kb(pid) if pid else None

    # Then every one polled until it ended, each with its own result.
    await asyncio.sleep(max(0.0, earliest_due - time.monotonic()))
    outcome: dict[str, dict] = {}
    pending = list(task_ids)
    deadline = time.monotonic() + seconds + 120
    sweeps = 0
    poll_errors: list[str] = _errors(polled)
    while pending and time.monotonic() < deadline:
        sweeps += 1
        results = await each(modern, pending, parallel, get)
        poll_errors += _errors(results)
        for task_id, result in zip(pending, results):
            if isinstance(result, dict) and result.get("status") in TERMINAL:
                outcome[task_id] = result
        pending = [t for t in pending if t not in outcome]
        if pending:
            await asyncio.sleep(0.5)
    all_done = time.monotonic()
    rss["completed"] = procstat.rss_kb(pid) if pid else None
    wrong = 0
    for i, task_id in enumerate(created):
        if not isinstance(task_id, str):
            continue
        result = outcome.get(task_id)
        expected = [{"type": "text", "text": f"Computed t{i} in {seconds:g}s"}]
        if result is None or result.get("status") != "completed" or result.get("result", {}).get("content") != expected:
            wrong += 1
    create_errors = _errors(created)
    per_task = (rss["held"] - rss["before"]) / count if pid and rss["held"] and count else None
    return {
        "scenario": "held",
        "tasks": count,
        "seconds": seconds,
        "parallel": parallel,
        "created": len(task_ids),
        "create_s": round(create_s, 2),
        "create_cpu_ms_per_task": (round(1000 * create_cpu["server_cpu_s"] / count, 3)
                                   if create_cpu.get("server_cpu_s") is not None and count else None),
        "create_host_other_cpu_pct": create_cpu.get("host_other_cpu_pct"),
        "working_in_sweep": working,
        "sweep_s": round(sweep_end - t1, 2),
        "poll_cpu_ms": (round(1000 * sweep_cpu["server_cpu_s"] / len(task_ids), 3)
                        if sweep_cpu.get("server_cpu_s") is not None and task_ids else None),
        "all_working_at_once": all_at_once,
        "idle_window_s": round(hold, 1),
        "idle_server_cpu_pct": idle_cpu.get("server_cpu_pct"),
        "idle_host_other_cpu_pct": idle_cpu.get("host_other_cpu_pct"),
        "completed": count - wrong - len(create_errors),
        "wrong": wrong,
        "sweeps_to_complete": sweeps,
        "all_done_after_due_s": round(all_done - (max(starts) + seconds), 2),
        "rss_kb": rss,
        "kb_per_task": round(per_task, 2) if per_task is not None else None,
        "server_rss_kb": rss["held"],
        "errors": len(create_errors) + len(poll_errors) + len(_errors(warm)),
        "error_samples": (create_errors + poll_errors)[:5],
    }


# polls: tasks/get against echo


class Sessions:
    """2025-11-25 requests on the same HTTP/1.1 connections: each connection holds a session of its
    own (initialized on its first request), as a 1.x client does."""

    def __init__(self, url: str):
        self.url = url
        self.host, self.port, _ = split_url(url)
        self.sessions: dict[Connection, MCPSession] = {}

    def connection(self) -> Connection:
        return Connection(self.host, self.port)

    async def rpc(self, conn: Connection, method: str, params: dict) -> dict:
        if not conn.reusable or not conn.is_open:
            conn.abort()
            await conn.open()
        session = self.sessions.get(conn)
        if session is None:
            session = self.sessions[conn] = MCPSession(self.url)
            await session.initialize(conn)
        message, _, _ = await session.rpc(conn, method, params)
        if "result" not in message:
            raise RuntimeError(f"{method}: {json.dumps(message)[:200]}")
        return message["result"]


async def _calls(modern: Modern | Sessions, conns: list[Connection], make, check, *, duration: float, warmup: float,
                 pid: int | None) -> dict:
    """Each connection back to back with `make(i, n)` -> (method, params); figures over the window."""
    latencies: list[float] = []
    counts = {"in_window": 0, "wrong": 0, "errors": 0}
    samples: list[str] = []
    start = time.monotonic()
    window = (start + warmup, start + warmup + duration)

    async def worker(i: int, conn: Connection):
        n = 0
        while time.monotonic() < window[1]:
            n += 1
            method, params = make(i, n)
            t0 = time.monotonic()
            try:
                async with asyncio.timeout(10):
                    result = await modern.rpc(conn, method, params)
            except Exception as exc:  # noqa: BLE001 (counted; the loop goes on)
                counts["errors"] += 1
                samples.append(short(exc))
                conn.abort()
                if counts["errors"] > 1000:
                    return
                await asyncio.sleep(0.01)
                continue
            t1 = time.monotonic()
            if not check(i, n, result):
                counts["wrong"] += 1
                samples.append(f"wrong: {json.dumps(result)[:120]}")
            elif window[0] <= t1 <= window[1]:
                counts["in_window"] += 1
                latencies.append(t1 - t0)

    tasks = [asyncio.ensure_future(worker(i, c)) for i, c in enumerate(conns)]
    await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
    cpu = procstat.CPUWindow(pid)
    await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
    figures = cpu.stop()
    await asyncio.gather(*tasks)
    latencies.sort()
    calls = counts["in_window"]
    return {
        "calls": calls,
        "calls_per_s": round(calls / duration, 1),
        "p50_ms": ms(pct(latencies, 50)),
        "p99_ms": ms(pct(latencies, 99)),
        "server_cpu_pct": figures.get("server_cpu_pct"),
        "host_other_cpu_pct": figures.get("host_other_cpu_pct"),
        "server_cpu_ms_per_call": (round(1000 * figures["server_cpu_s"] / calls, 3)
                                   if figures.get("server_cpu_s") is not None and calls else None),
        "errors": counts["errors"],
        "wrong": counts["wrong"],
        "error_samples": samples[:3],
    }


async def polls(url: str, *, concurrency: int, duration: float, warmup: float, repeats: int,
                pid: int | None) -> dict:
    modern = Modern(url, CAPABILITIES)
    conns = [modern.connection() for _ in range(concurrency)]
    legacy = Sessions(url)
    legacy_conns = [legacy.connection() for _ in range(concurrency)]

    async def start(conn, seconds):
        return (await modern.rpc(conn, "tools/call", {"name": "slow_compute",
                                                      "arguments": {"seconds": seconds, "label": "poll"}}))["taskId"]

    async def start_in_session(conn, seconds):
        i = legacy_conns.index(conn)
        return (await legacy.rpc(conn, "tools/call", {"name": "slow_compute", "task": {"ttl": 3_600_000},
                                                      "arguments": {"seconds": seconds, "label": f"s{i}"}}
                                 ))["task"]["taskId"]

    working = await each(modern, [3600] * concurrency, concurrency, start)
    finished = await each(modern, [0.6] * concurrency, concurrency, start)
    # A session's tasks are polled on the connection that holds that session.
    session_working = await asyncio.gather(*(start_in_session(c, 3600) for c in legacy_conns), return_exceptions=True)
    session_finished = await asyncio.gather(*(start_in_session(c, 0.6) for c in legacy_conns), return_exceptions=True)
    setup_errors = _errors(working) + _errors(finished) + _errors(session_working) + _errors(session_finished)
    for _ in range(100):  # the 0.6 s tasks end a tenth of a second after they became tasks
        states = await each(modern, finished, concurrency, lambda conn, t: modern.rpc(conn, "tasks/get",
                                                                                     {"taskId": t}))
        states += await asyncio.gather(*(legacy.rpc(c, "tasks/get", {"taskId": t})
                                         for c, t in zip(legacy_conns, session_finished)), return_exceptions=True)
        if all(isinstance(s, dict) and s.get("status") in TERMINAL for s in states):
            break
        await asyncio.sleep(0.2)
    # name -> (client, its connections, the request, the check of its result, the kind it is compared with)
    kinds = {
        "echo": (modern, conns,
                 lambda i, n: ("tools/call", {"name": "echo", "arguments": {"message": f"c{i}n{n}"}}),
                 lambda i, n, r: r.get("content") == [{"type": "text", "text": f"c{i}n{n}"}], None),
        "tasks/get working": (modern, conns, lambda i, n: ("tasks/get", {"taskId": working[i]}),
                              lambda i, n, r: r.get("status") == "working" and r.get("taskId") == working[i], "echo"),
        "tasks/get completed": (modern, conns, lambda i, n: ("tasks/get", {"taskId": finished[i]}),
                                lambda i, n, r: r.get("status") == "completed" and r.get("result", {}).get(
                                    "content") == [{"type": "text", "text": "Computed poll in 0.6s"}], "echo"),
        "2025-11-25 echo": (legacy, legacy_conns,
                            lambda i, n: ("tools/call", {"name": "echo", "arguments": {"message": f"s{i}n{n}"}}),
                            lambda i, n, r: r.get("content") == [{"type": "text", "text": f"s{i}n{n}"}], None),
        "2025-11-25 tasks/get working": (
            legacy, legacy_conns, lambda i, n: ("tasks/get", {"taskId": session_working[i]}),
            lambda i, n, r: r.get("status") == "working" and r.get("taskId") == session_working[i],
            "2025-11-25 echo"),
        "2025-11-25 tasks/get completed": (
            legacy, legacy_conns, lambda i, n: ("tasks/get", {"taskId": session_finished[i]}),
            lambda i, n, r: r.get("status") == "completed" and r.get("taskId") == session_finished[i],
            "2025-11-25 echo"),
    }
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    names = list(kinds)
    if not setup_errors:
        for repeat in range(repeats):
            for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                client, connections, make, check, _ = kinds[name]
                log(f"polls: {name}, C={concurrency}, {duration:g} s (+{warmup:g} s warm-up), repeat {repeat + 1}")
                runs[name].append(await _calls(client, connections, make, check, duration=duration, warmup=warmup,
                                               pid=pid))
    cancel = await each(modern, [t for t in working if isinstance(t, str)], concurrency,
                        lambda conn, t: modern.rpc(conn, "tasks/cancel", {"taskId": t}))
    cancel += await asyncio.gather(*(legacy.rpc(c, "tasks/cancel", {"taskId": t})
                                     for c, t in zip(legacy_conns, session_working) if isinstance(t, str)),
                                   return_exceptions=True)
    for conn in conns + legacy_conns:
        conn.abort()

    def median(name, key):
        values = [r[key] for r in runs[name] if r.get(key) is not None]
        return statistics.median(values) if values else None

    summary = {name: {"calls_per_s": median(name, "calls_per_s"),
                      "calls_per_s_runs": [r["calls_per_s"] for r in runs[name]],
                      "server_cpu_ms_per_call": median(name, "server_cpu_ms_per_call"),
                      "cpu_ms_per_call_runs": [r["server_cpu_ms_per_call"] for r in runs[name]],
                      "p50_ms": median(name, "p50_ms"), "p99_ms": median(name, "p99_ms"),
                      "host_other_cpu_pct_max": max((r["host_other_cpu_pct"] or 0 for r in runs[name]),
                                                    default=None)}
               for name in names}
    for name, (*_, base) in kinds.items():
        if base is None:
            continue
        got, echo = summary[name]["calls_per_s"], summary[base]["calls_per_s"]
        summary[name]["compared_with"] = base
        summary[name]["x_echo_calls_per_s"] = round(got / echo, 3) if got and echo else None
        cpu, echo_cpu = summary[name]["server_cpu_ms_per_call"], summary[base]["server_cpu_ms_per_call"]
        summary[name]["x_echo_cpu_per_call"] = round(cpu / echo_cpu, 3) if cpu and echo_cpu else None
    errors = setup_errors + _errors(cancel) + [s for rs in runs.values() for r in rs for s in r["error_samples"]]
    return {
        "scenario": "polls",
        "concurrency": concurrency,
        "duration_s": duration,
        "warmup_s": warmup,
        "repeats": repeats,
        "kinds": summary,
        "runs": runs,
        "errors": len(setup_errors) + len(_errors(cancel)) + sum(r["errors"] for rs in runs.values() for r in rs),
        "wrong": sum(r["wrong"] for rs in runs.values() for r in rs),
        "error_samples": errors[:5],
    }


# trips: the database thread's round trips, in a process of its own


MARK = "bench-mark:"


class Probe:
    """What the database thread's connection sends: Django's statements (execute_wrapper) and, on
    PostgreSQL, every message (libpq's trace), with marks between the counted windows."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="mcp-bench-trace-", suffix=".log")
        os.close(fd)
        self.statements: list[str] = []
        self.pgconn = None

    def _wrapper(self, execute, sql, params, many, context):
        self.statements.append(params[0] if sql == "SELECT %s" and params and str(params[0]).startswith(MARK)
                               else sql)
        return execute(sql, params, many, context)

    def install(self):
        from django.db import connections
        from mcp_transport.storage.executor import database_alias

        db = connections[database_alias()]
        db.ensure_connection()
        db.execute_wrappers.append(self._wrapper)
        if db.vendor == "postgresql":
            from psycopg import pq

            self.fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
            self.pgconn = db.connection.pgconn
            self.pgconn.trace(self.fd)
            self.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def uninstall(self):
        from django.db import connections
        from mcp_transport.storage.executor import database_alias

        connections[database_alias()].execute_wrappers.remove(self._wrapper)
        if self.pgconn is not None:
            self.pgconn.untrace()  # flushes the trace

    def mark(self, name: str):
        from django.db import connections
        from mcp_transport.storage.executor import database_alias

        with connections[database_alias()].cursor() as cursor:
            cursor.execute("SELECT %s", [name])

    def round_trips(self) -> list[str]:
        """Each round trip (what the client sent until the server was ready again), named by its statement."""
        trips, current = [], None
        for line in Path(self.path).read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            side, kind, rest = parts[0], parts[2], parts[3] if len(parts) > 3 else ""
            if side == "F" and current is None and kind in ("Query", "Parse", "Bind"):
                current = _name_trip(kind, rest)
            elif side == "B" and kind == "ReadyForQuery":
                trips.append(current or "?")
                current = None
        return trips

    def close(self):
        try:
            os.remove(self.path)
        except OSError:
            pass


def _name_trip(kind: str, rest: str) -> str:
    text = rest.strip()
    if kind == "Parse":  # "name" "sql" ...
        text = text.split('" "', 1)[1] if '" "' in text else text
    elif kind == "Bind":  # "" "prepared name" ...: a prepared statement
        return "prepared " + text.split('" "', 1)[1].split('"', 1)[0] if '" "' in text else "prepared"
    text = text.strip('"').replace('\\"', '"')
    if MARK in text:
        return MARK + text.split(MARK, 1)[1].split("'", 1)[0]
    return " ".join(text.split())


def _split(items: list[str]) -> dict[str, list[str]]:
    """Items between marks: mark name -> what came after it (until the next mark)."""
    windows: dict[str, list[str]] = {}
    current = None
    for item in items:
        if item.startswith(MARK):
            current = item[len(MARK):]
            windows[current] = []
        elif current is not None:
            windows[current].append(item)
    return windows


def _kind(statement: str) -> str:
    s = statement.upper()
    if s in ("BEGIN", "COMMIT", "ROLLBACK"):
        return s
    if s == "SELECT 1":
        return "health check"
    for verb in ("INSERT", "UPDATE", "DELETE", "SELECT"):
        if s.startswith(verb):
            table = s.split(" INTO " if verb == "INSERT" else " FROM " if verb != "UPDATE" else "UPDATE ", 1)
            name = table[1].split()[0].strip('"') if len(table) > 1 and table[1].split() else "?"
            return f"{verb} {name.lower()}"
    return statement[:40]


async def _trips_child(repeats: int) -> dict:
    from example_project.asgi import application
    from mcp_transport.execution.task_events import TaskEventLog
    from mcp_transport.storage import store
    from mcp_transport.storage.executor import Operation, executor
    from mcp_transport.testing import ModernCommunicator

    client = ModernCommunicator(application, capabilities=CAPABILITIES)
    assert (await client.call_tool("echo", {"message": "warm"})).result["content"]  # starts the worker
    await asyncio.sleep(1.0)  # its first heartbeat (the next one is LEASE_SECONDS / 3 away)
    probe = Probe()
    mark = Operation(probe.mark, own_transaction=True)  # alone, in no transaction: one statement
    await executor.run(probe.install)
    fields = dict(server="default", principal="", method="tools/call", tool="slow_compute",
                  request={"name": "slow_compute", "arguments": {}}, client_capabilities=CAPABILITIES,
                  ttl_ms=60_000, poll_interval_ms=1000)
    names: list[str] = []

    async def window(name: str, action):
        names.append(name)
        await executor.run(mark, MARK + name)
        await action()
        await asyncio.sleep(0.05)  # anything the request left queued lands in its window
        await executor.run(mark, MARK + "-")  # what comes next is no window's

    async def wait_until(task_id, statuses):
        # From the table, not through tasks/get: the read counted next is the first of a finished task.
        for _ in range(200):
            got = await store.aget_task_by_id(task_id)
            if got.status in statuses:
                return got
            await asyncio.sleep(0.05)
        raise RuntimeError(f"task {task_id} never reached {statuses}")

    checks = []
    for i in range(repeats):
        task_id = f"bench-{i}"

        async def create(task_id=task_id):
            await store.acreate_task(task_id, **fields)

        async def get(task_id=task_id):
            checks.append((await store.aget_task(task_id, "default", "")) is not None)

        await window(f"store create_task {i}", create)
        await window(f"store get_task {i}", get)

        async def progress(task_id=task_id):
            events = TaskEventLog(task_id)
            for step in range(1, PROGRESS_BURST + 1):
                await events.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": "bench", "progress": step, "total": PROGRESS_BURST}})
            await events.flush()
            row = await store.aget_task(task_id, "default", "")
            checks.append(row.status_message == f"{PROGRESS_BURST} of {PROGRESS_BURST}")

        await window(f"store task events x{PROGRESS_BURST} {i}", progress)

    for i in range(repeats):
        async def echo(i=i):
            result = (await client.call_tool("echo", {"message": f"e{i}"})).result
            checks.append(result["content"] == [{"type": "text", "text": f"e{i}"}])

        created = {}

        async def call(created=created):
            result = (await client.call_tool("slow_compute", {"seconds": 1.0, "label": "trip"})).result
            checks.append(result["resultType"] == "task")
            created["id"] = result["taskId"]

        await window(f"http echo {i}", echo)
        await window(f"http tools/call -> task {i}", call)

        async def poll_working(created=created):
            result = (await client.request("tasks/get", {"taskId": created["id"]})).result
            checks.append(result["status"] == "working")

        await window(f"http tasks/get working {i}", poll_working)
        await wait_until(created["id"], TERMINAL)

        async def read(created=created):
            result = (await client.request("tasks/get", {"taskId": created["id"]})).result
            checks.append(result["status"] == "completed"
                          and result["result"]["content"] == [{"type": "text", "text": "Computed trip in 1s"}])

        await window(f"http tasks/get completed {i}", read)
        await window(f"http tasks/get completed again {i}", read)
    await executor.run(mark, MARK + "end")
    await executor.run(probe.uninstall)
    statements = _split(probe.statements)
    trips = _split(probe.round_trips()) if probe.pgconn is not None else {}
    probe.close()
    from django.db import connection

    groups: dict[str, dict] = {}
    for name in names:
        group = name.rsplit(" ", 1)[0]
        entry = groups.setdefault(group, {"statements": [], "round_trips": [], "health_checks": 0, "seen": {}})
        entry["statements"].append(len(statements.get(name, [])))
        if trips:
            own = [t for t in trips.get(name, []) if _kind(t) != "health check"]
            entry["health_checks"] += len(trips.get(name, [])) - len(own)
            entry["round_trips"].append(len(own))
            key = ", ".join(_kind(t) for t in own) or "none"
            entry["seen"][key] = entry["seen"].get(key, 0) + 1
        else:
            key = ", ".join(_kind(s) for s in statements.get(name, [])) or "none"
            entry["seen"][key] = entry["seen"].get(key, 0) + 1
    for entry in groups.values():
        for key in ("statements", "round_trips"):
            values = entry.pop(key)
            entry[key] = ({"median": statistics.median(values), "min": min(values), "max": max(values)}
                          if values else None)
    return {"scenario": "trips", "vendor": connection.vendor, "repeats": repeats, "groups": groups,
            "wrong": checks.count(False), "errors": 0, "exact_round_trips": bool(trips)}


def trips_child(repeats: int) -> int:
    import django

    django.setup()
    result = asyncio.run(_trips_child(repeats))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # the worker's threads and connections go with the process


def trips(dbs, repeats: int) -> dict:
    env = dbs.new()
    try:
        child_env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "PYTHONUNBUFFERED": "1",
                     "MCP_BENCH_TRANSPORT": json.dumps(TRIPS_TRANSPORT), **env}
        done = subprocess.run([sys.executable, "-m", "bench.tasks", "--trips-child", str(repeats)], cwd=ROOT,
                              env=child_env, capture_output=True, text=True, timeout=600)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            return {"scenario": "trips", "error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}"}
        return json.loads(lines[-1])
    finally:
        dbs.drop(env)


# Reporting


def correctness(result: dict) -> list[str]:
    if "error" in result:
        return [f"{result['scenario']}: {result['error']}"]
    problems = []
    if result.get("errors"):
        problems.append(f"{result['scenario']}: {result['errors']} errors {result.get('error_samples')}")
    if result.get("wrong"):
        problems.append(f"{result['scenario']}: {result['wrong']} wrong answers")
    if result["scenario"] == "held" and not result["all_working_at_once"]:
        problems.append(f"held: {result['working_in_sweep']} of {result['tasks']} working in the sweep, or the sweep "
                        "ended after the first was due")
    return problems


def _n(value, digits=0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if digits else f"{round(value):,}"


def rows(result: dict) -> list[list[str]]:
    name = result["scenario"]
    if "error" in result:
        return [[name, "-", "-", f"FAILED: {result['error']}"]]
    if name == "trips":
        out = []
        unit = "round trips" if result["exact_round_trips"] else "statements"
        for group, entry in result["groups"].items():
            figure = entry["round_trips"] if result["exact_round_trips"] else entry["statements"]
            seen = "; ".join(f"{k} (x{v})" for k, v in entry["seen"].items())
            extra = f"; health checks in these windows: {entry['health_checks']}" if entry["health_checks"] else ""
            target = ""
            if group in ("store create_task", "store get_task", "http tools/call -> task",
                         "http tasks/get completed"):
                met = figure["max"] <= TRIPS_TARGET
                target = f"; target <= {TRIPS_TARGET}: {'met' if met else 'NOT met'}"
            out.append(["trips", group, f"{_n(figure['median'], 1)} {unit} (min {figure['min']}, max {figure['max']})",
                        f"{seen}{extra}{target}"])
        return out
    if name == "held":
        rss = result["rss_kb"]
        what = f"{result['tasks']:,} x slow_compute({result['seconds']:g} s), {result['parallel']} connections"
        return [["held", what,
                 f"{result['working_in_sweep']:,} working at once; {result['completed']:,} completed",
                 f"created in {result['create_s']} s ({_n(result['create_cpu_ms_per_task'], 2)} ms CPU each), "
                 f"polled in {result['sweep_s']} s ({_n(result['poll_cpu_ms'], 2)} ms CPU each); idle with them "
                 f"{_n(result['idle_server_cpu_pct'], 1)} % of a core over {result['idle_window_s']} s; RSS "
                 f"{_n((rss['before'] or 0) / 1024)} -> {_n((rss['held'] or 0) / 1024)} MB "
                 f"({_n(result['kb_per_task'], 1)} KB per task), {_n((rss['completed'] or 0) / 1024)} MB after; "
                 f"all polled completed {result['all_done_after_due_s']} s after the last was due; "
                 f"{result['errors']} errors"]]
    if name == "polls":
        out = []
        for kind, s in result["kinds"].items():
            ratio = ""
            if "x_echo_calls_per_s" in s:
                base = s["compared_with"]
                ratio = (f"; x{_n(s['x_echo_calls_per_s'], 2)} {base}'s calls/s, x{_n(s['x_echo_cpu_per_call'], 2)} "
                         f"its CPU per call; target >= {base}'s calls/s: "
                         f"{'met' if (s['x_echo_calls_per_s'] or 0) >= 1 else 'NOT met'}")
            out.append(["polls", f"{kind}, C={result['concurrency']}",
                        f"{_n(s['calls_per_s'])} calls/s (median of {result['repeats']})",
                        f"runs {' / '.join(_n(v) for v in s['calls_per_s_runs'])}; p50 / p99 {_n(s['p50_ms'], 2)} / "
                        f"{_n(s['p99_ms'], 2)} ms; {_n(s['server_cpu_ms_per_call'], 3)} ms server CPU per call; "
                        f"others used up to {_n(s['host_other_cpu_pct_max'])} % of a CPU{ratio}"])
        return out
    return []


def table(results: list[dict]) -> str:
    lines = ["| part | what | figure | details |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for r in results for row in rows(r)]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python bench/tasks.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--quick", action="store_true", help="small numbers, short runs (a smoke run)")
    parser.add_argument("--trip-repeats", type=int, help="trips: windows of each kind (default 20; quick 3)")
    parser.add_argument("--tasks", type=int, help="held: tasks at once (default 1000; quick 20)")
    parser.add_argument("--seconds", type=float, help="held: slow_compute's seconds (default 20; quick 4)")
    parser.add_argument("--parallel", type=int, default=200, help="held: connections creating and polling")
    parser.add_argument("--concurrency", type=int, default=16, help="polls: connections back to back")
    parser.add_argument("--duration", type=float, help="polls: seconds measured per run (default 8; quick 1)")
    parser.add_argument("--warmup", type=float, help="polls: seconds before measuring (default 1; quick 0.3)")
    parser.add_argument("--repeats", type=int, help="polls: runs of each kind, in turns (default 3; quick 1)")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--json", default=str(OUT))
    parser.add_argument("--trips-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = dict(trip_repeats=(3, 20), tasks=(20, 1000), seconds=(4.0, 20.0), duration=(1.0, 8.0),
                    warmup=(0.3, 1.0), repeats=(1, 3))
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if args.quick else full)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if set(args.parts) - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(set(args.parts) - set(PARTS)))}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.trips_child is not None:
        return trips_child(args.trips_child)
    from bench.run import git_revision, raise_fd_limit

    raise_fd_limit(4096 + 2 * args.tasks)
    server_cpu, client_cpu = (None, None) if args.no_pin else pinning()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    meta = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git": git_revision(), "db": args.db, "cpus": os.cpu_count(), "server_cpu": server_cpu,
            "client_cpu": client_cpu, "loadavg_start": os.getloadavg(), "args": vars(args)}
    results: list[dict] = []
    dbs = databases(args.db)
    try:
        if "trips" in args.parts:
            log(f"trips: {args.trip_repeats} windows of each kind, {args.db}")
            results.append(trips(dbs, args.trip_repeats))
        for part in ("held", "polls"):
            if part not in args.parts:
                continue
            server = BenchServer(dbs, None, server_cpu).start()
            try:
                if part == "held":
                    log(f"held: {args.tasks} x slow_compute({args.seconds:g} s), {args.parallel} connections")
                    result = asyncio.run(held(server.url, count=args.tasks, seconds=args.seconds,
                                              parallel=args.parallel, pid=server.pid,
                                              idle=1.0 if args.quick else 3.0))
                else:
                    result = asyncio.run(polls(server.url, concurrency=args.concurrency, duration=args.duration,
                                               warmup=args.warmup, repeats=args.repeats, pid=server.pid))
            except Exception as exc:  # noqa: BLE001 (reported; the other parts still run)
                result = {"scenario": part, "error": short(exc)}
            finally:
                server.stop()
            problems = [line for line in server.logs().splitlines()
                        if line.strip() and not line.startswith("SIGTERM: closing connections")]
            result["server_log_problems"] = problems[:20]
            if not problems:
                server.remove_log()
            results.append(result)
    finally:
        dbs.close()
    meta["loadavg_end"] = os.getloadavg()
    print(f"\n### Tasks bench: {meta['git']}, {args.db}, {meta['started']}, load average "
          f"{meta['loadavg_start'][0]:.2f} at the start, {meta['loadavg_end'][0]:.2f} at the end\n")
    print(table(results))
    problems = [p for r in results for p in correctness(r)]
    for r in results:
        if r.get("server_log_problems"):
            problems.append(f"{r['scenario']}: the server logged {r['server_log_problems'][:3]}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str))
    if problems:
        print("\nProblems:\n" + "\n".join(f"- {p}" for p in problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
