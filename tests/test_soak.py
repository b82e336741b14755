"""Soak: many held standalone GET streams plus steady tool calls with random disconnects and
resumes, against one daphne on the embedded default (SQLite). Nothing may be lost or repeated,
nothing may fail, and the server's memory (VmRSS) must stay flat after warm-up.

    MCP_SOAK_SECONDS   how long the load runs (default 150: a few minutes with set-up; longer by hand)
    MCP_SOAK_STREAMS   held GET streams (default 300; the issue's figure: 1000)
    MCP_SOAK_WORKERS   concurrent callers (default 8)

The figures are printed (`pytest -s`) and written to test-output/soak.json. Memory is asserted
only against a generous bound on growth; no timing is asserted.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import resource
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from .http_support import _server_errors
from .live import ACCEPT_BOTH, ROOT, VERSION, DaphneServer

SOAK_SECONDS = float(os.environ.get("MCP_SOAK_SECONDS", "150"))
STREAMS = int(os.environ.get("MCP_SOAK_STREAMS", "300"))
WORKERS = int(os.environ.get("MCP_SOAK_WORKERS", "8"))
WARMUP_SECONDS = max(10.0, SOAK_SECONDS * 0.2)
UPDATE_EVERY = 3.0  # seconds between resource updates (each one goes to every held stream)
CHURN_EVERY = 0.5  # seconds between dropping (and resuming) one held stream
DISCONNECT_P = 0.3  # chance a call's connection is dropped by the client mid-call (and again on each resume)
WATCHED = "test://watched-resource"
UPDATED = "notifications/resources/updated"
SEED = int(os.environ.get("MCP_SOAK_SEED", "1699"))

pytestmark = pytest.mark.timeout(int(SOAK_SECONDS) + 300)


# SSE over httpx, incrementally


class SSEParser:
    """Feed text chunks, get (id, data) events; lines end at CRLF, LF or CR as the SSE spec says."""

    def __init__(self):
        self.buffer = ""
        self.id = None
        self.data: list[str] = []
        self.seen = False

    def feed(self, chunk: str) -> list[tuple[str | None, str]]:
        self.buffer += chunk
        events = []
        while True:
            match = re.search(r"\r\n|\r|\n", self.buffer)
            if match is None or (match.group() == "\r" and match.end() == len(self.buffer)):
                return events
            line, self.buffer = self.buffer[:match.start()], self.buffer[match.end():]
            if line == "":
                if self.seen and (self.id is not None or self.data):
                    events.append((self.id, "\n".join(self.data)))
                self.id, self.data, self.seen = None, [], False
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                self.seen = True
                if name == "id":
                    self.id = value
                elif name == "data":
                    self.data.append(value)


def seq_of(event_id: str) -> tuple[int, int]:
    stream, _, seq = event_id.partition("-")
    return int(stream), int(seq)


@dataclass
class Figures:
    statuses: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    calls: int = 0
    call_disconnects: int = 0
    call_resumes: int = 0
    progress_events: int = 0
    updates: int = 0
    stream_drops: int = 0
    update_events: int = 0
    rss: list = field(default_factory=list)  # (seconds since start, kB)

    def status(self, code: int):
        self.statuses[code] = self.statuses.get(code, 0) + 1
        if code >= 400:
            self.errors.append(f"HTTP {code}")

    def error(self, what: str):
        if len(self.errors) < 50:
            self.errors.append(what)


class Soak:
    def __init__(self, server: DaphneServer, http: httpx.AsyncClient):
        self.server = server
        self.url = server.url
        self.http = http
        self.figures = Figures()
        self.rng = random.Random(SEED)
        self.stop = asyncio.Event()

    def headers(self, session_id=None, accept=ACCEPT_BOTH, extra=None):
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if session_id:
            headers.update({"Mcp-Session-Id": session_id, "MCP-Protocol-Version": VERSION})
        headers.update(extra or {})
        return headers

    async def post(self, session_id, message) -> httpx.Response:
        response = await self.http.post(self.url, content=json.dumps(message), headers=self.headers(session_id))
        self.figures.status(response.status_code)
        return response

    async def new_session(self, name: str) -> str:
        response = await self.post(None, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}})
        assert response.status_code == 200, response.text
        session_id = response.headers["mcp-session-id"]
        initialized = await self.post(session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202
        return session_id

    # Memory

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.server.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    async def sample_memory(self, started: float):
        while not self.stop.is_set():
            self.figures.rss.append((round(time.monotonic() - started, 1), self.rss_kb()))
            try:
                await asyncio.wait_for(self.stop.wait(), 2.0)
            except asyncio.TimeoutError:
                pass


class HeldStream:
    """A session's standalone GET stream, held open; dropped and resumed now and then."""

    def __init__(self, soak: Soak, session_id: str):
        self.soak = soak
        self.session_id = session_id
        self.ids: list[str] = []  # every event id received with data, across connections
        self.updates = 0
        self.last_id: str | None = None
        self.opened = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.server_closes = 0

    def start(self):
        self.opened.clear()
        self.task = asyncio.ensure_future(self.connection())

    async def connection(self):
        extra = {"Last-Event-ID": self.last_id} if self.last_id else None
        headers = self.soak.headers(self.session_id, accept="text/event-stream", extra=extra)
        try:
            async with self.soak.http.stream("GET", self.soak.url, headers=headers) as response:
                self.soak.figures.status(response.status_code)
                if response.status_code != 200:
                    await response.aread()
                    self.soak.figures.error(f"GET stream: {response.status_code} {response.text[:200]}")
                    self.opened.set()
                    return
                parser = SSEParser()
                async for chunk in response.aiter_text():
                    for event_id, data in parser.feed(chunk):
                        if event_id is not None:
                            self.last_id = event_id
                        self.opened.set()
                        if data:
                            self.ids.append(event_id)
                            if json.loads(data).get("method") == UPDATED:
                                self.updates += 1
                self.server_closes += 1  # the never policy: the server should not end it
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.soak.figures.error(f"GET stream {self.session_id[:8]}: {exc!r}")
        finally:
            self.opened.set()

    async def drop_and_resume(self):
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass
        self.soak.figures.stream_drops += 1
        self.start()
        await self.opened.wait()

    async def close(self):
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass


async def read_events(response: httpx.Response, events: list, stop_after_progress: int | None):
    """Append (id, message) of `response` to `events`; True if the call's answer arrived."""
    parser = SSEParser()
    seen_progress = 0
    async for chunk in response.aiter_text():
        for event_id, data in parser.feed(chunk):
            if not data:
                continue
            message = json.loads(data)
            events.append((event_id, message))
            if "method" not in message:
                return True
            seen_progress += 1
            if stop_after_progress is not None and seen_progress >= stop_after_progress:
                return False  # the client drops the connection here
    return False


async def one_call(soak: Soak, session_id: str, worker: int, n: int):
    rng = soak.rng
    count, delay = rng.randint(3, 15), rng.choice([0, 0.005, 0.01, 0.02])
    token = f"w{worker}-{n}"
    request_id = n
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": "progress", "arguments": {"count": count, "delay": delay},
                          "_meta": {"progressToken": token}}}
    events: list = []
    drop = rng.randint(1, count) if rng.random() < DISCONNECT_P else None
    async with soak.http.stream("POST", soak.url, content=json.dumps(message),
                                headers=soak.headers(session_id)) as response:
        soak.figures.status(response.status_code)
        assert response.status_code == 200, await response.aread()
        done = await read_events(response, events, drop)
    for _ in range(20):  # bounded: each resume either finishes or drops again with probability DISCONNECT_P
        if done:
            break
        soak.figures.call_disconnects += 1
        await asyncio.sleep(rng.uniform(0, 0.1))
        last_id = [i for i, _ in events if i][-1] if events else None
        assert last_id, "dropped before any event"
        soak.figures.call_resumes += 1
        drop = rng.randint(1, count) if rng.random() < DISCONNECT_P else None
        headers = soak.headers(session_id, accept="text/event-stream", extra={"Last-Event-ID": last_id})
        async with soak.http.stream("GET", soak.url, headers=headers) as response:
            soak.figures.status(response.status_code)
            assert response.status_code == 200, await response.aread()
            done = await read_events(response, events, drop)
    assert done, f"{token}: no answer after 20 resumes"
    ids = [i for i, _ in events]
    streams = {seq_of(i)[0] for i in ids}
    assert len(streams) == 1, f"{token}: events of several streams {streams}"
    assert [seq_of(i)[1] for i in ids] == list(range(1, len(ids) + 1)), f"{token}: gap or duplicate: {ids}"
    progress = [m["params"]["progress"] for _, m in events if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, count + 1)), f"{token}: progress {progress}"
    assert all(m["params"]["progressToken"] == token for _, m in events if "method" in m)
    final = events[-1][1]
    assert final == {"jsonrpc": "2.0", "id": request_id,
                     "result": {"content": [{"type": "text", "text": f"done {count}"}]}}, final
    soak.figures.calls += 1
    soak.figures.progress_events += len(progress)


async def caller(soak: Soak, worker: int):
    session_id = await soak.new_session(f"soak-worker-{worker}")
    n = 0
    while not soak.stop.is_set():
        n += 1
        try:
            await one_call(soak, session_id, worker, n)
        except AssertionError as exc:
            soak.figures.error(f"call: {exc}")
        except Exception as exc:
            soak.figures.error(f"call w{worker}-{n}: {exc!r}")


async def updater(soak: Soak, session_id: str):
    n = 0
    while not soak.stop.is_set():
        n += 1
        response = await soak.http.post(soak.url, headers=soak.headers(session_id), content=json.dumps({
            "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "update_resource", "arguments": {"uri": WATCHED}}}))
        soak.figures.status(response.status_code)
        if response.status_code == 200 and f"updated {WATCHED}" in response.text:
            soak.figures.updates += 1
        else:
            soak.figures.error(f"update: {response.status_code} {response.text[:200]}")
        try:
            await asyncio.wait_for(soak.stop.wait(), UPDATE_EVERY)
        except asyncio.TimeoutError:
            pass


async def churner(soak: Soak, streams: list[HeldStream]):
    while not soak.stop.is_set():
        await soak.rng.choice(streams).drop_and_resume()
        try:
            await asyncio.wait_for(soak.stop.wait(), CHURN_EVERY)
        except asyncio.TimeoutError:
            pass


async def open_held_streams(soak: Soak) -> list[HeldStream]:
    gate = asyncio.Semaphore(20)

    async def one(i):
        async with gate:
            session_id = await soak.new_session(f"soak-held-{i}")
            response = await soak.post(session_id, {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                                                    "params": {"uri": WATCHED}})
            assert response.status_code == 200 and response.json()["result"] == {}, response.text
            held = HeldStream(soak, session_id)
            held.start()
            await held.opened.wait()
            return held

    return list(await asyncio.gather(*(one(i) for i in range(STREAMS))))


async def run_soak(server: DaphneServer) -> dict:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=WORKERS * 4)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60, connect=20)) as http:
        soak = Soak(server, http)
        started = time.monotonic()
        sampler = asyncio.ensure_future(soak.sample_memory(started))
        streams = await open_held_streams(soak)
        opened_in = time.monotonic() - started
        assert all(s.task is not None and not s.task.done() for s in streams), soak.figures.errors[:5]
        updater_session = await soak.new_session("soak-updater")
        load_started = time.monotonic()
        tasks = [asyncio.ensure_future(caller(soak, w)) for w in range(WORKERS)]
        tasks += [asyncio.ensure_future(updater(soak, updater_session)),
                  asyncio.ensure_future(churner(soak, streams))]
        await asyncio.sleep(WARMUP_SECONDS)
        baseline_kb = soak.rss_kb()
        baseline_at = time.monotonic() - started
        await asyncio.sleep(max(0.0, SOAK_SECONDS - WARMUP_SECONDS))
        final_kb = soak.rss_kb()
        soak.stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        load_seconds = time.monotonic() - load_started
        # Every held stream gets every update (after the last one is stored, they drain).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(s.updates < soak.figures.updates for s in streams):
            await asyncio.sleep(0.2)
        lost = {s.session_id[:8]: (s.updates, soak.figures.updates) for s in streams
                if s.updates != soak.figures.updates}
        duplicated = [s.session_id[:8] for s in streams if len(set(s.ids)) != len(s.ids)
                      or [seq_of(i)[1] for i in s.ids] != sorted(seq_of(i)[1] for i in s.ids)]
        server_closed = sum(s.server_closes for s in streams)
        soak.figures.update_events = sum(s.updates for s in streams)
        for s in streams:
            await s.close()
        await sampler
    samples = [kb for _, kb in soak.figures.rss]
    after_warmup = [kb for at, kb in soak.figures.rss if at >= baseline_at]
    f = soak.figures
    return {
        "soak_seconds": SOAK_SECONDS, "streams": STREAMS, "workers": WORKERS, "seed": SEED,
        "streams_opened_in_s": round(opened_in, 1), "load_seconds": round(load_seconds, 1),
        "calls": f.calls, "calls_per_s": round(f.calls / load_seconds, 1), "progress_events": f.progress_events,
        "call_disconnects": f.call_disconnects, "call_resumes": f.call_resumes,
        "resource_updates": f.updates, "update_events_delivered": f.update_events, "held_stream_drops": f.stream_drops,
        "statuses": {str(k): v for k, v in sorted(f.statuses.items())}, "errors": f.errors,
        "lost_updates": lost, "duplicated_or_reordered": duplicated, "held_streams_closed_by_server": server_closed,
        "rss_mb": {
            "start": round(samples[0] / 1024, 1), "warm": round(baseline_kb / 1024, 1),
            "final": round(final_kb / 1024, 1), "peak": round(max(samples) / 1024, 1),
            "median_after_warmup": round(statistics.median(after_warmup) / 1024, 1) if after_warmup else None,
            "growth_after_warmup": round((final_kb - baseline_kb) / 1024, 1),
        },
        "rss_samples_kb": f.rss,
    }


def raise_open_files_limit(wanted: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def test_soak():
    raise_open_files_limit(4 * STREAMS + 1024)  # before daphne starts: it inherits the limit
    server = DaphneServer({"KEEPALIVE_SECONDS": 10}).start()
    try:
        figures = asyncio.run(run_soak(server))
    finally:
        server.stop()
        logs = server.logs()
        shutil.rmtree(server.dir, ignore_errors=True)
    figures["server_log_errors"] = _server_errors(logs)[:20]
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    (out / "soak.json").write_text(json.dumps(figures, indent=2))
    summary = {k: v for k, v in figures.items() if k != "rss_samples_kb"}
    print("\nsoak figures:\n" + json.dumps(summary, indent=2))

    assert figures["errors"] == [], figures["errors"]
    assert figures["server_log_errors"] == [], figures["server_log_errors"]
    assert not any(int(code) >= 400 for code in figures["statuses"]), figures["statuses"]
    assert figures["lost_updates"] == {}, figures["lost_updates"]
    assert figures["duplicated_or_reordered"] == []
    assert figures["held_streams_closed_by_server"] == 0
    assert figures["calls"] > 0 and figures["call_resumes"] > 0 and figures["resource_updates"] > 0
    rss = figures["rss_mb"]
    # Generous on purpose: flat means no growth with the traffic, not byte-exact.
    assert rss["growth_after_warmup"] <= max(64.0, 0.5 * rss["warm"]), rss
