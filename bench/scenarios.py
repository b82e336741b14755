"""The bench scenarios. Each is a coroutine that drives one MCP endpoint and returns a dict of figures.

calls    C sessions, each calling the `echo` tool back to back for a duration; `era="modern"`: C
         stateless 2026-07-28 clients instead, calling `echo` (JSON answers) or `progress(3)` with
         a progress token (SSE answers)
streams  S sessions, each holding its standalone GET stream: memory per session and stream
resume   `progress` with K notifications; the POST stream is dropped after the first one and the
         rest is read with GET + Last-Event-ID, while the tool runs (`live`) or after (`after`)
replay   one stream of N stored events replayed with GET + Last-Event-ID, in turns from two servers:
         one whose events table holds about N rows, one with about a million
burst    `progress` with N notifications and no delay: events stored and delivered per second
growth   per-call CPU of `calls` as the server holds more: a million stored events (against a fresh
         server), a thousand sessions holding GET streams (against none), and the same streams
         on the bare app (bench/floor.py), the floor

Every loop is bounded in count and in time; every connection is closed before a scenario returns.
`pid` (the server's) is only read, in /proc, for CPU and RSS.
"""
from __future__ import annotations

import asyncio
import math
import statistics
import time

from . import procstat
from .client import Connection, HTTPError, MCPSession, ModernClient, SSEParser, message_of

SETUP_PARALLEL = 50


def pct(values: list[float], p: float) -> float | None:
    """The p-th percentile (nearest rank) of sorted values."""
    if not values:
        return None
    k = min(len(values) - 1, max(0, math.ceil(p / 100 * len(values)) - 1))
    return values[k]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


async def bounded(parallel: int, coros):
    """Run coroutines with at most `parallel` at once; returns their results (exceptions included)."""
    semaphore = asyncio.Semaphore(parallel)

    async def one(coro):
        async with semaphore:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros), return_exceptions=True)


async def open_session(url: str, timeout: float = 10) -> tuple[MCPSession, Connection]:
    session = MCPSession(url)
    conn = session.connection()
    try:
        async with asyncio.timeout(timeout):
            await conn.open()
            await session.initialize(conn)
    except BaseException:
        conn.abort()
        raise
    return session, conn


async def end_session(session: MCPSession, conn: Connection | None, timeout: float = 10) -> int | None:
    """DELETE the session (on `conn` if it is still usable) and close the connection."""
    try:
        async with asyncio.timeout(timeout):
            if conn is None or not conn.reusable or not conn.is_open:
                if conn is not None:
                    conn.abort()
                conn = await session.connection().open()
            return await session.delete(conn)
    except (OSError, TimeoutError, HTTPError, ValueError):
        return None
    finally:
        if conn is not None:
            conn.abort()


# calls

PROGRESS_COUNT = 3  # tool="progress": progress(3, delay=0) with a token, so that the answer streams


async def open_modern(url: str, timeout: float = 10) -> tuple[ModernClient, Connection]:
    """A 2026-07-28 client and a connection for it (there is no session to open)."""
    client = ModernClient(url)
    conn = client.connection()
    try:
        await conn.open(timeout)
    except BaseException:
        conn.abort()
        raise
    return client, conn


async def close_modern(client: ModernClient, conn: Connection | None):
    if conn is not None:
        await conn.close()


def answered(message: dict, others: list, response, text: str, tool: str, era: str) -> bool:
    """Whether a tools/call answer is right: the echoed text, or `done 3` after progress 1, 2, 3
    for this call's token; in the 2026-07-28 era also `resultType: complete` and no session id."""
    result = message.get("result")
    if not isinstance(result, dict):
        return False
    if era == "modern" and (result.get("resultType") != "complete" or "mcp-session-id" in response.headers):
        return False
    expected = text
    if tool == "progress":
        expected = f"done {PROGRESS_COUNT}"
        progress = [m["params"].get("progress") for m in others
                    if m.get("method") == "notifications/progress" and isinstance(m.get("params"), dict)
                    and m["params"].get("progressToken") == text]
        if progress != list(range(1, PROGRESS_COUNT + 1)):
            return False
    try:
        return result["content"][0]["text"] == expected
    except (KeyError, IndexError, TypeError):
        return False


async def calls(url: str, *, concurrency: int = 16, duration: float = 10.0, warmup: float = 1.0,
                pid: int | None = None, call_timeout: float = 10.0, max_calls: int = 10_000_000,
                era: str = "legacy", tool: str = "echo") -> dict:
    """C clients each calling a tool back to back; figures over `duration` after `warmup`: the
    calls completed in that window, their latencies, the server's CPU and RSS.

    era     `legacy`: C 2025-11-25 sessions (initialize first, DELETE at the end);
            `modern`: C connections of a 2026-07-28 client, each call stateless with its envelope
    tool    `echo`: echo(message), answered with the message (JSON, or SSE where the server streams
            every answer); `progress`: progress(3, delay=0) with a progress token, answered with
            three notifications and `done 3` on an SSE stream
    """
    if era not in ("legacy", "modern") or tool not in ("echo", "progress"):
        raise ValueError(f"calls: era {era!r}, tool {tool!r}")
    if era == "modern":
        opened = await bounded(SETUP_PARALLEL, [open_modern(url) for _ in range(concurrency)])
    else:
        opened = await bounded(SETUP_PARALLEL, [open_session(url) for _ in range(concurrency)])
    clients = [r for r in opened if not isinstance(r, BaseException)]
    setup_errors = [short(r) for r in opened if isinstance(r, BaseException)]
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counts = {"ok": 0, "in_window": 0, "wrong": 0}
    modes: set[str] = set()
    wrong_samples: list[str] = []
    start = time.monotonic()
    window = {"start": start + warmup, "end": start + warmup + duration}
    stop = asyncio.Event()

    async def worker(index: int, client, conn: Connection):
        n = 0
        while not stop.is_set() and n < max_calls and time.monotonic() < window["end"] + call_timeout:
            n += 1
            text = f"w{index}c{n}"
            if tool == "echo":
                request_id, data = client.tool_call("echo", {"message": text})
            else:
                request_id, data = client.tool_call("progress", {"count": PROGRESS_COUNT, "delay": 0},
                                                    progress_token=text)
            t0 = time.monotonic()
            try:
                async with asyncio.timeout(call_timeout):
                    if not conn.reusable or not conn.is_open:
                        conn.abort()
                        conn = await client.connection().open()
                    response = await conn.request(data)
                    body = await conn.read_body(response)
                    t1 = time.monotonic()
                    if response.status != 200:
                        raise HTTPError(response.status, body, "tools/call")
                    message, others = client.find_response(response, body, request_id)
            except Exception as exc:  # noqa: BLE001 (counted, and the loop goes on)
                key = short(exc)
                errors[key] = errors.get(key, 0) + 1
                conn.abort()
                if sum(errors.values()) > 1000:
                    stop.set()
                await asyncio.sleep(0.01)
                continue
            modes.add("sse" if response.is_sse else "json")
            if not answered(message, others, response, text, tool, era):
                counts["wrong"] += 1
                if len(wrong_samples) < 3:
                    wrong_samples.append(f"wrong answer: {str(message)[:160]} (+{len(others)} messages)")
                continue
            counts["ok"] += 1
            if window["start"] <= t1 <= window["end"]:  # completions in the window (edges cancel out)
                counts["in_window"] += 1
                latencies.append(t1 - t0)
        return client, conn

    tasks = [asyncio.ensure_future(worker(i, s, c)) for i, (s, c) in enumerate(clients)]
    rss_before = procstat.rss_kb(pid) if pid else None
    await asyncio.sleep(max(0.0, window["start"] - time.monotonic()))
    cpu = procstat.CPUWindow(pid)
    await asyncio.sleep(max(0.0, window["end"] - time.monotonic()))
    figures = cpu.stop()
    rss_after = procstat.rss_kb(pid) if pid else None
    stop.set()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    ended = [d for d in done if not isinstance(d, BaseException)]
    if era == "modern":
        await asyncio.gather(*(close_modern(s, c) for s, c in ended))
        deleted = None
    else:
        deletes = await bounded(SETUP_PARALLEL, [end_session(s, c) for s, c in ended])
        deleted = sum(1 for d in deletes if d == 200)
    latencies.sort()
    calls_per_s = counts["in_window"] / duration if duration else None
    return {
        "scenario": "calls",
        "era": era,
        "tool": tool,
        "concurrency": concurrency,
        "sessions": len(clients),
        "mode": "/".join(sorted(modes)) or None,
        "duration_s": duration,
        "warmup_s": warmup,
        "calls": counts["in_window"],
        "calls_total": counts["ok"],
        "calls_per_s": round(calls_per_s, 1) if calls_per_s is not None else None,
        "p50_ms": ms(pct(latencies, 50)),
        "p90_ms": ms(pct(latencies, 90)),
        "p99_ms": ms(pct(latencies, 99)),
        "max_ms": ms(latencies[-1]) if latencies else None,
        **figures,
        "server_cpu_ms_per_call": (round(1000 * figures["server_cpu_s"] / counts["in_window"], 3)
                                   if figures.get("server_cpu_s") is not None and counts["in_window"] else None),
        "server_rss_kb": rss_after,
        "server_rss_kb_before": rss_before,
        "errors": sum(errors.values()) + len(setup_errors),
        "wrong_results": counts["wrong"],
        "error_samples": (setup_errors + sorted(errors) + wrong_samples)[:5],
        "deleted": deleted,
    }


# streams

async def _hold(session: MCPSession, conn: Connection, state: dict, timeout: float):
    """Open the GET stream (on `conn`, opened here if it is not) and read it until it ends; `state`
    says what happened."""
    try:
        async with asyncio.timeout(timeout):
            if not conn.is_open:
                await conn.open()
            response = await session.open_get(conn)
            if not response.is_sse:
                raise HTTPError(response.status, b"", "GET (not SSE)")
            state["opened"] = True
            state["first"].set()
            while True:
                piece = await conn.read_some(response)
                if piece is None:
                    state["ended"] = time.monotonic()
                    return
    except (OSError, TimeoutError, HTTPError, ValueError) as exc:
        state["error"] = short(exc)
        state["ended"] = time.monotonic()
    finally:
        state["first"].set()


async def _sessions_for_gets(url: str, count: int) -> tuple[list, list[str]]:
    """`count` sessions, each with a new connection for its GET: -> ((session, connection)s, errors).

    Each GET on a connection of its own, as an SDK client opens it: the server (Twisted: after
    60 s) may close a keep-alive connection left idle while thousands of others are set up."""
    opened = await bounded(SETUP_PARALLEL, [open_session(url) for _ in range(count)])
    ok = [r for r in opened if not isinstance(r, BaseException)]
    await asyncio.gather(*(conn.close() for _, conn in ok))
    errors = [short(r) for r in opened if isinstance(r, BaseException)]
    return [(session, session.connection()) for session, _ in ok], errors


async def _open_gets(sessions: list, timeout: float, hold_timeout: float) -> tuple[list[dict], list]:
    """A GET stream held for each (session, connection), at most SETUP_PARALLEL opening at once,
    within `timeout`: -> (their states, the tasks holding them)."""
    states = [{"first": asyncio.Event(), "opened": False} for _ in sessions]
    holders = []
    deadline = time.monotonic() + timeout
    for start in range(0, len(sessions), SETUP_PARALLEL):
        batch = range(start, min(start + SETUP_PARALLEL, len(sessions)))
        for i in batch:
            session, conn = sessions[i]
            holders.append(asyncio.ensure_future(_hold(session, conn, states[i], hold_timeout)))
        try:
            await asyncio.wait_for(asyncio.gather(*(states[i]["first"].wait() for i in batch)),
                                   max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
    return states, holders


async def streams(url: str, *, count: int = 1000, hold: float = 5.0, pid: int | None = None,
                  timeout: float = 120.0, warm: int = 10) -> dict:
    """S sessions each holding a GET stream; KB per session and stream from the server's VmRSS."""
    t_start = time.monotonic()
    # A few sessions and streams first, so one-time costs (imports, caches) are not counted.
    for _ in range(warm):
        session, conn = await open_session(url)
        state = {"first": asyncio.Event(), "opened": False}
        task = asyncio.ensure_future(_hold(session, conn, state, 30))
        await state["first"].wait()
        await end_session(session, None)
        await asyncio.wait([task], timeout=5)
        task.cancel()
        conn.abort()
    await asyncio.sleep(0.5)
    rss = {"before": procstat.rss_kb(pid) if pid else None}
    fds_before = procstat.open_fds(pid) if pid else None

    sessions, setup_errors = await _sessions_for_gets(url, count)
    await asyncio.sleep(0.5)
    rss["sessions"] = procstat.rss_kb(pid) if pid else None

    # A safety bound only: the first streams wait for all the others to open, then the hold.
    states, holders = await _open_gets(sessions, timeout, 3 * timeout + hold)
    open_s = time.monotonic() - t_start
    await asyncio.sleep(0.5)
    rss["streams_open"] = procstat.rss_kb(pid) if pid else None
    fds_open = procstat.open_fds(pid) if pid else None
    n_open = sum(1 for s in states if s["opened"] and "ended" not in s)
    cpu = procstat.CPUWindow(pid)
    await asyncio.sleep(hold)
    idle_cpu = cpu.stop()
    rss["end_of_hold"] = procstat.rss_kb(pid) if pid else None
    held = sum(1 for s in states if s["opened"] and "ended" not in s)

    # DELETE each session: its GET stream must end.
    t_delete = time.monotonic()
    statuses = await bounded(SETUP_PARALLEL, [end_session(session, None) for session, _ in sessions])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any("ended" not in s for s in states if s["opened"]):
        await asyncio.sleep(0.05)
    ended_on_delete = sum(1 for s in states if s["opened"] and s.get("ended", 0) >= t_delete and "error" not in s)
    for task in holders:
        task.cancel()
    await asyncio.gather(*holders, return_exceptions=True)
    for _, conn in sessions:
        conn.abort()
    await asyncio.sleep(1.0)
    rss["after_close"] = procstat.rss_kb(pid) if pid else None

    def per(delta_kb, n):
        return round(delta_kb / n, 2) if delta_kb is not None and n else None

    peak = max(rss["streams_open"] or 0, rss["end_of_hold"] or 0) if pid else None
    errors = setup_errors + [s["error"] for s in states if "error" in s and s.get("ended", 0) < t_delete]
    return {
        "scenario": "streams",
        "streams": count,
        "sessions": len(sessions),
        "opened": n_open,
        "held": held,
        "all_held": held == count,
        "ended_on_delete": ended_on_delete,
        "deleted": sum(1 for s in statuses if s == 200),
        "hold_s": hold,
        "setup_s": round(open_s, 2),
        "rss_kb": rss,
        "server_fds": {"before": fds_before, "streams_open": fds_open},
        "kb_per_session": per(None if not pid else rss["sessions"] - rss["before"], len(sessions)),
        "kb_per_stream": per(None if not pid else peak - rss["sessions"], n_open),
        "kb_per_session_plus_stream": per(None if not pid else peak - rss["before"], n_open),
        "server_rss_kb": peak,
        "idle_server_cpu_pct": idle_cpu.get("server_cpu_pct"),
        "errors": len(errors),
        "error_samples": errors[:5],
    }


# resume

def _seq(event_id: str | None) -> tuple[int, int] | None:
    if not event_id:
        return None
    stream, _, seq = event_id.rpartition("-")
    try:
        return int(stream), int(seq)
    except ValueError:
        return None


def id_regressed(previous: tuple[int, int], position: tuple[int, int], has_data: bool) -> bool:
    """Event ids must grow; an event without data (a priming event, or the re-priming a resumed
    connection opens with) may repeat the last id, as it carries nothing new."""
    return position < previous or (position == previous and has_data)


async def _resume_once(url: str, session: MCPSession, mode: str, count: int, delay: float, token: str,
                       timeout: float, after_margin: float, max_reconnects: int = 5) -> dict:
    request_id, data = session.tool_call("progress", {"count": count, "delay": delay}, progress_token=token)
    seen: list = []
    ids: list[tuple[int, int]] = []
    out = {"responses": 0, "reconnects": 0, "id_regressions": 0, "error": None}

    def on_event(event, first_only: bool) -> bool:
        """True to stop reading this connection."""
        position = _seq(event.id)
        if position is not None:
            if ids and id_regressed(ids[-1], position, bool(event.data)):
                out["id_regressions"] += 1
            ids.append(position)
        message = message_of(event)
        if message is None:
            return False
        if message.get("method") == "notifications/progress" and \
                (message.get("params") or {}).get("progressToken") == token:
            seen.append(message["params"].get("progress"))
            return first_only
        if message.get("id") == request_id and ("result" in message or "error" in message):
            out["responses"] += 1
            return True
        return False

    last_id = None
    t_first = None  # the first bytes of a resumed connection

    async def read(conn, response, first_only: bool):
        """One connection's events, until `on_event` says stop or the server ends the response."""
        nonlocal last_id, t_first
        parser = SSEParser()
        while (piece := await conn.read_some(response)) is not None:
            if t_first is None and not first_only:
                t_first = time.monotonic()
            for event in parser.feed(piece):
                if event.id is not None:
                    last_id = event.id
                if on_event(event, first_only):
                    return

    # 1. The POST stream, dropped right after the first notification; events after it in the same
    #    read count as never delivered.
    conn = session.connection()
    t_post = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            await conn.open()
            response = await conn.request(data)
            if response.status != 200 or not response.is_sse:
                body = await conn.read_body(response)
                raise HTTPError(response.status, body, "tools/call (expected an SSE stream)")
            await read(conn, response, first_only=True)
    except (OSError, TimeoutError, HTTPError, ValueError) as exc:
        out["error"] = short(exc)
    finally:
        conn.abort()  # the disconnect
    out["first_event_ms"] = ms(time.monotonic() - t_post)
    if mode == "after":
        await asyncio.sleep(count * delay + after_margin)

    # 2. Resume with GET + Last-Event-ID until the response (reconnecting if the server ends early).
    t_reconnect = time.monotonic()
    deadline = t_reconnect + timeout + count * delay
    while out["responses"] == 0 and out["reconnects"] < max_reconnects and time.monotonic() < deadline \
            and last_id is not None:
        if out["reconnects"]:
            await asyncio.sleep(0.05)
        out["reconnects"] += 1
        conn = session.connection()
        try:
            async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                await conn.open()
                response = await session.open_get(conn, last_id)
                await read(conn, response, first_only=False)
        except (OSError, TimeoutError, HTTPError, ValueError) as exc:
            out["error"] = short(exc)
        finally:
            conn.abort()
    t_end = time.monotonic()
    expected = set(range(1, count + 1))
    unique = set(seen)
    out.update(
        received=len(seen),
        lost=len(expected - unique),
        duplicated=len(seen) - len(unique),
        out_of_order=sum(1 for a, b in zip(seen, seen[1:]) if b < a),
        reconnect_to_first_ms=ms(None if t_first is None else t_first - t_reconnect),
        reconnect_to_done_ms=ms(t_end - t_reconnect) if out["responses"] else None,
    )
    if out["responses"]:
        out["error"] = None
    return out


async def resume(url: str, *, count: int = 50, delays=(0.02, 0.001, 0.0), modes=("live", "after"),
                 repeats: int = 20, timeout: float = 30.0, after_margin: float = 0.3) -> dict:
    """Drop the POST stream after its first notification, resume with GET + Last-Event-ID."""
    session, conn = await open_session(url)
    results = []
    try:
        for delay in delays:
            for mode in modes:
                runs = []
                for rep in range(repeats):
                    token = f"{mode}-{delay}-{rep}"
                    runs.append(await _resume_once(url, session, mode, count, delay, token, timeout, after_margin))
                done = sorted(r["reconnect_to_done_ms"] for r in runs if r["reconnect_to_done_ms"] is not None)
                results.append({
                    "mode": mode,
                    "delay": delay,
                    "runs": len(runs),
                    "lost": sum(r["lost"] for r in runs),
                    "duplicated": sum(r["duplicated"] for r in runs),
                    "out_of_order": sum(r["out_of_order"] for r in runs),
                    "id_regressions": sum(r["id_regressions"] for r in runs),
                    "missing_response": sum(1 for r in runs if not r["responses"]),
                    "extra_reconnects": sum(max(0, r["reconnects"] - 1) for r in runs),
                    "reconnect_to_done_ms_p50": statistics.median(done) if done else None,
                    "reconnect_to_done_ms_max": done[-1] if done else None,
                    "errors": sorted({r["error"] for r in runs if r["error"]})[:3],
                })
    finally:
        await end_session(session, conn)
    totals = {key: sum(r[key] for r in results)
              for key in ("lost", "duplicated", "out_of_order", "id_regressions", "missing_response")}
    return {"scenario": "resume", "count": count, "repeats": repeats, "results": results,
            **{f"{k}_total": v for k, v in totals.items()}, "ok": not any(totals.values())}


def _per_call(runs: list[dict], **extra) -> dict:
    """The median of `calls` runs: CPU per call, calls/s; errors summed."""
    cpu = [r["server_cpu_ms_per_call"] for r in runs if r["server_cpu_ms_per_call"] is not None]
    return {
        **extra,
        "calls_per_s": statistics.median(r["calls_per_s"] or 0 for r in runs) if runs else None,
        "cpu_ms_per_call": statistics.median(cpu) if cpu else None,
        "cpu_ms_per_call_runs": cpu,
        "errors": sum(r["errors"] + r["wrong_results"] for r in runs),
        "server_rss_kb": runs[-1]["server_rss_kb"] if runs else None,
    }


def _compared(without: dict, with_: dict) -> dict:
    a, b = without["cpu_ms_per_call"], with_["cpu_ms_per_call"]
    return {"without": without, "with": with_, "ratio": round(b / a, 3) if a and b else None,
            "ok": without["errors"] == 0 and with_["errors"] == 0}


async def _close_gets(sessions: list, holders: list):
    await bounded(SETUP_PARALLEL, [end_session(session, None) for session, _ in sessions])
    for task in holders:
        task.cancel()
    await asyncio.gather(*holders, return_exceptions=True)
    for _, conn in sessions:
        conn.abort()


async def _held_in_turns(url: str, pid: int | None, held: int, rounds: int, measure, timeout: float) -> dict:
    """`measure` on one server in turns: with `held` sessions holding their GET streams (opened
    before, closed after) and with none. Same process, so only the open streams differ."""
    runs: dict[str, list] = {"without": [], "with": []}
    kept, setup_errors = [], []
    for round_ in range(rounds):
        for holding in (False, True) if round_ % 2 else (True, False):
            if not holding:
                runs["without"].append(await measure(url, pid))
                continue
            sessions, errors = await _sessions_for_gets(url, held)
            setup_errors += errors
            states, holders = await _open_gets(sessions, timeout, 3 * timeout)
            try:
                runs["with"].append(await measure(url, pid))
                kept.append(sum(1 for s in states if s["opened"] and "ended" not in s))
            finally:
                await _close_gets(sessions, holders)
    out = _compared(_per_call(runs["without"], held=0), _per_call(runs["with"], held=min(kept, default=0)))
    out["setup_errors"] = setup_errors[:5]
    out["ok"] = out["ok"] and not setup_errors and kept == [held] * rounds
    return out


async def growth(base_url: str, grown_url: str, floor_url: str | None = None, *, total_rows: int = 1_000_000,
                 held: int = 1000, concurrency: int = 16, duration: float = 4.0, rounds: int = 3,
                 base_pid: int | None = None, grown_pid: int | None = None, floor_pid: int | None = None,
                 grown_db=None, timeout: float = 120.0) -> dict:
    """Per-call CPU as what a server holds grows, one thing at a time, each side measured in turns
    so that the machine's drift falls on both alike:

    rows     a fresh server against one whose events table holds `total_rows`;
    streams  the fresh server with `held` sessions holding their GET streams, against none;
    floor    the same on the bare app (bench.floor, `floor_url`) under the same launcher: what the
             server underneath (daphne, Twisted, asyncio) pays per call for the open connections.
    """
    async def measure(url, pid):
        return await calls(url, concurrency=concurrency, duration=duration, warmup=0.5, pid=pid)

    out = {"scenario": "growth", "concurrency": concurrency, "rounds": rounds, "held": held}
    if grown_db is not None:
        rows = await asyncio.to_thread(grown_db.count)
        if total_rows > rows:
            out["fill"] = await asyncio.to_thread(grown_db.fill, total_rows - rows)
    runs: dict[str, list] = {"base": [], "grown": []}
    for round_ in range(rounds):
        sides = [("base", base_url, base_pid), ("grown", grown_url, grown_pid)]
        for key, url, pid in sides if round_ % 2 else sides[::-1]:
            runs[key].append(await measure(url, pid))
    table_rows = await asyncio.to_thread(grown_db.count) if grown_db else None
    out["rows"] = _compared(_per_call(runs["base"]), _per_call(runs["grown"], table_rows=table_rows))
    out["streams"] = await _held_in_turns(base_url, base_pid, held, rounds, measure, timeout)
    if floor_url:
        out["floor"] = await _held_in_turns(floor_url, floor_pid, held, rounds, measure, timeout)
    out["ok"] = all(out[key]["ok"] for key in ("rows", "streams", "floor") if key in out)
    return out


# burst and replay

async def _read_stream_raw(conn: Connection, response, timeout: float):
    """Read an SSE body to its end without parsing: (bytes, time of the first byte)."""
    parts, t_first = [], None
    async with asyncio.timeout(timeout):
        while True:
            piece = await conn.read_some(response)
            if piece is None:
                break
            if t_first is None:
                t_first = time.monotonic()
            parts.append(piece)
    return b"".join(parts), t_first


def _check_stream(body: bytes, request_id, token: str | None, count: int) -> dict:
    """What a complete stream held: notifications in order, the response, event ids increasing."""
    events = SSEParser().feed(body + b"\n\n")
    progress, regressions, previous, response, stream_id = [], 0, None, None, None
    for event in events:
        position = _seq(event.id)
        if position is not None:
            stream_id = position[0]
            if previous is not None and id_regressed(previous, position, bool(event.data)):
                regressions += 1
            previous = position
        message = message_of(event)
        if message is None:
            continue
        if message.get("method") == "notifications/progress":
            if token is None or message["params"].get("progressToken") == token:
                progress.append(message["params"]["progress"])
        elif ("result" in message or "error" in message) and (request_id is None or message.get("id") == request_id):
            response = message
    expected = list(range(1, count + 1))
    return {
        "events": len(events),
        "notifications": len(progress),
        "in_order": progress == expected,
        "lost": len(set(expected) - set(progress)),
        "duplicated": len(progress) - len(set(progress)),
        "out_of_order": sum(1 for a, b in zip(progress, progress[1:]) if b < a),
        "id_regressions": regressions,
        "response": response is not None and "result" in response,
        "stream_id": stream_id,
    }


async def _emit(session: MCPSession, count: int, token: str, timeout: float) -> dict:
    """Call progress(count, delay=0) and read its whole stream."""
    request_id, data = session.tool_call("progress", {"count": count, "delay": 0}, progress_token=token)
    conn = session.connection()
    try:
        await conn.open()
        t0 = time.monotonic()
        response = await conn.request(data)
        if response.status != 200 or not response.is_sse:
            body = await conn.read_body(response)
            raise HTTPError(response.status, body, "tools/call (expected an SSE stream)")
        body, t_first = await _read_stream_raw(conn, response, timeout)
        t1 = time.monotonic()
    finally:
        conn.abort()
    check = _check_stream(body, request_id, token, count)
    return {"elapsed_s": t1 - t0, "first_byte_ms": ms(t_first - t0) if t_first else None,
            "bytes": len(body), **check}


async def burst(url: str, *, count: int = 10_000, pid: int | None = None, db=None, timeout: float = 300.0) -> dict:
    """A tool sending `count` progress notifications back to back: events/s stored and delivered."""
    session, conn = await open_session(url)
    try:
        cpu = procstat.CPUWindow(pid)
        run = await _emit(session, count, "burst", timeout)
        figures = cpu.stop()
    finally:
        await end_session(session, conn)
    out = {"scenario": "burst", "count": count, **run,
           "delivered_events_per_s": round(count / run["elapsed_s"], 1) if run["elapsed_s"] else None,
           "server_cpu_pct": figures.get("server_cpu_pct"),
           "server_rss_kb": procstat.rss_kb(pid) if pid else None}
    if db is not None and run["stream_id"] is not None:
        times = await asyncio.to_thread(db.stream_times, run["stream_id"])
        span = times.get("store_span_s")
        out["stored"] = times
        out["stored_events_per_s"] = round(times["events"] / span, 1) if span else None
    out["ok"] = run["in_order"] and run["response"] and run["id_regressions"] == 0
    return out


async def _replay_once(session: MCPSession, stream_id: int, count: int, timeout: float) -> tuple[float, dict]:
    """The whole stream again (GET + Last-Event-ID: <stream>-0): (seconds to its end, what it held)."""
    conn = session.connection()
    try:
        await conn.open()
        t0 = time.monotonic()
        response = await session.open_get(conn, f"{stream_id}-0")
        body, _ = await _read_stream_raw(conn, response, timeout)
        elapsed = time.monotonic() - t0
    finally:
        conn.abort()
    return elapsed, _check_stream(body, None, None, count)


async def replay(small_url: str, large_url: str, *, count: int = 10_000, total_rows: int = 1_000_000,
                 repeats: int = 15, small_db=None, large_db=None, pid: int | None = None,
                 timeout: float = 300.0) -> dict:
    """Replay a stream of `count` stored events from two servers alike but for their events table:
    the stream's own rows (small) or `total_rows` (large, filled with other streams).

    The replays alternate between the two, after one untimed each (cold caches), so that drift in
    the machine's speed (here x1.5 within minutes) falls on both alike; measured one table after
    the other, that drift alone made a flat replay look 55% slower."""
    out = {"scenario": "replay", "count": count}
    sides, opened = {}, []
    try:
        for key, url in (("small", small_url), ("large", large_url)):
            session, conn = await open_session(url)
            opened.append((session, conn))
            made = await _emit(session, count, "replay", timeout)
            sides[key] = (session, made)
        out["stream_ok"] = all(made["in_order"] and made["response"] for _, made in sides.values())
        if large_db is not None:
            rows = await asyncio.to_thread(large_db.count)
            if total_rows > rows:
                out["fill"] = await asyncio.to_thread(large_db.fill, total_rows - rows)
        times, checks = {"small": [], "large": []}, {"small": [], "large": []}
        for attempt in range(repeats + 1):
            for key in ("small", "large") if attempt % 2 else ("large", "small"):
                session, made = sides[key]
                elapsed, check = await _replay_once(session, made["stream_id"], count, timeout)
                checks[key].append(check)
                if attempt:
                    times[key].append(elapsed)
        for key, db in (("small", small_db), ("large", large_db)):
            ordered = sorted(times[key])
            out[key] = {
                "table_rows": await asyncio.to_thread(db.count) if db else None, "repeats": repeats,
                "p50_ms": ms(statistics.median(ordered)), "min_ms": ms(ordered[0]), "max_ms": ms(ordered[-1]),
                "events": checks[key][-1]["events"],
                "complete": all(c["in_order"] and c["id_regressions"] == 0 and c["response"] for c in checks[key]),
            }
        out["ratio_large_small"] = round(out["large"]["p50_ms"] / out["small"]["p50_ms"], 3)
    finally:
        for session, conn in opened:
            await end_session(session, conn)
    out["server_rss_kb"] = procstat.rss_kb(pid) if pid else None
    out["ok"] = out.get("stream_ok", False) and out["small"]["complete"] and out["large"]["complete"]
    return out
