"""Crash safety on the embedded default (SQLite, one daphne): kill -9 in the middle of calls,
start a new daphne on the same database file, and every client that resumes gets the events
stored for its call -- none lost, none twice, in order -- then a JSON-RPC error for the call
that died with its worker. The database is intact afterwards.

LEASE_SECONDS is 1.5 so the new process fails the dead worker's requests quickly.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import threading

import httpx
import pytest

from .http_support import open_sse, parse_id, progress_values, resume_all, wait_for
from .live import DaphneServer, MCPClient

TRANSPORT = {"LEASE_SECONDS": 1.5}
pytestmark = pytest.mark.timeout(240)

# (count, delay, detached) of the progress calls in flight when the process dies: slow ones,
# ones writing as fast as the database allows (so a commit is likely under way at the kill),
# and ones whose client went away early, so that events were stored but never delivered.
CALLS = [(400, 0.02, False), (400, 0.01, True), (20000, 0, False), (20000, 0, True), (20000, 0.001, False),
         (400, 0.02, False)]
STARTED_AFTER = 3  # progress events every call has delivered before the kill
STORED_WHILE_AWAY = 10  # events a detached call stores after its client left, before the kill


class Call:
    """A progress call on its own session, read on a thread until the connection dies."""

    def __init__(self, url: str, count: int, delay: float, detached: bool, token: str):
        self.client = MCPClient(url, timeout=20)
        self.client.initialize()
        self.count, self.delay, self.detached, self.token = count, delay, detached, token
        self.events = []  # SSEEvents received before the crash
        self.progress = 0
        self.started = threading.Event()
        self.ended = threading.Event()
        self.error: Exception | None = None
        self.request_id = self.client.next_id()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        message = {"jsonrpc": "2.0", "id": self.request_id, "method": "tools/call",
                   "params": {"name": "progress", "arguments": {"count": self.count, "delay": self.delay},
                              "_meta": {"progressToken": self.token}}}
        try:
            with open_sse(self.client, "POST", message, timeout=20) as reader:
                while True:
                    event = reader.next_event()
                    if event is None:
                        break
                    self.events.append(event)
                    if event.data and event.message.get("method") == "notifications/progress":
                        self.progress += 1
                        if self.progress >= STARTED_AFTER:
                            self.started.set()
                            if self.detached:
                                break  # the client goes away; the call goes on, its events stored
        except (httpx.TransportError, ConnectionError) as exc:
            self.error = exc  # the server died under us: expected
        finally:
            self.started.set()
            self.ended.set()

    @property
    def last_id(self) -> str:
        return [e.id for e in self.events if e.id is not None][-1]


def db_rows(path: str, sql: str, params=()):
    conn = sqlite3.connect(path, timeout=20)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def stored_events(path: str, stream_id: int) -> list[tuple[int, str, str]]:
    return db_rows(path, "SELECT seq, kind, payload FROM mcp_transport_event WHERE stream_id = ? ORDER BY seq",
                   (stream_id,))


def check_resumed(call: Call, resumed, db_path: str):
    """What the client got before and after the crash is exactly the stream as stored, ending
    with the worker-lost error for its request."""
    stream_id, last_seq = parse_id(call.last_id)
    before = [(parse_id(e.id)[1], e.data) for e in call.events if e.id is not None]
    after = [(parse_id(e.id)[1], e.data) for e in resumed.events if e.id is not None]
    assert {parse_id(e.id)[0] for e in resumed.events if e.id} <= {stream_id}
    # The resumption may start with a re-priming event carrying the id resumed from.
    after = [(seq, data) for seq, data in after if not (seq == last_seq and data == "")]
    got = before + after
    seqs = [seq for seq, _ in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"gap or duplicate in {seqs[:5]}..{seqs[-5:]}"
    assert seqs[0] == 0  # the priming event: everything from the start
    messages = [json.loads(data) for _, data in got if data]
    values = progress_values(messages, call.token)
    assert values == list(range(1, len(values) + 1)), "progress lost, repeated or out of order"
    assert len(values) >= STARTED_AFTER and len(values) < call.count
    if call.detached:
        assert len(after) >= STORED_WHILE_AWAY
    final = messages[-1]
    assert final["id"] == call.request_id and "result" not in final, final
    assert final["error"]["code"] == -32603 and final["error"]["data"]["reason"] == "worker_lost", final
    print(f"crash: {call.token} count={call.count} delay={call.delay} detached={call.detached}: "
          f"{len(before)} events before the kill, "
          f"{len(after)} replayed after the restart, {len(values)} progress, then worker_lost")
    stored = stored_events(db_path, stream_id)
    assert [(seq, payload) for seq, _, payload in stored] == got, "the client's view differs from the store"
    assert stored[-1][1] == "final"
    assert db_rows(db_path, "SELECT status, last_seq FROM mcp_transport_stream WHERE id = ?", (stream_id,)) == [
        ("failed", stored[-1][0])]


def check_database(db_path: str):
    assert db_rows(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert db_rows(db_path, "PRAGMA foreign_key_check") == []
    # Every stream's events are exactly seq 0..last_seq (priming at 0), nothing torn.
    bad = db_rows(db_path, """
        SELECT s.id, s.last_seq, COUNT(e.id), MIN(e.seq), MAX(e.seq) FROM mcp_transport_stream s
        LEFT JOIN mcp_transport_event e ON e.stream_id = s.id GROUP BY s.id
        HAVING COUNT(e.id) != s.last_seq + 1 OR MIN(e.seq) != 0 OR MAX(e.seq) != s.last_seq""")
    assert bad == [], f"streams with missing or extra events: {bad}"
    assert db_rows(db_path, "SELECT COUNT(*) FROM mcp_transport_event WHERE kind != 'priming' "
                            "AND NOT json_valid(payload)") == [(0,)]
    assert db_rows(db_path, "SELECT COUNT(*) FROM mcp_transport_event "
                            "WHERE kind = 'priming' AND payload != ''") == [(0,)]
    # At most one final event per stream, and it is the last one.
    assert db_rows(db_path, """
        SELECT COUNT(*) FROM mcp_transport_event e JOIN mcp_transport_stream s ON e.stream_id = s.id
        WHERE e.kind = 'final' AND e.seq != s.last_seq""") == [(0,)]
    assert db_rows(db_path, "SELECT COUNT(*) FROM mcp_transport_stream WHERE kind = 'request' AND status = 'open'") \
        == [(0,)], "a request of the dead worker was never failed"


@pytest.fixture
def servers():
    started: list[DaphneServer] = []
    yield started
    for s in started:
        s.stop()
    for s in started:
        shutil.rmtree(s.dir, ignore_errors=True)


def crash_round(server: DaphneServer, round_no: int) -> list[Call]:
    calls = [Call(server.url, count, delay, detached, f"r{round_no}-c{i}")
             for i, (count, delay, detached) in enumerate(CALLS)]
    for call in calls:
        call.thread.start()
    for call in calls:
        assert call.started.wait(30), "a call never started"
        assert call.error is None, f"call failed before the crash: {call.error}"
        assert call.detached or not call.ended.is_set(), "call ended before the crash"
    for call in calls:
        if call.detached:
            stream_id, seq = parse_id(call.last_id)
            assert wait_for(lambda: db_rows(server.db, "SELECT last_seq FROM mcp_transport_stream WHERE id = ?",
                                            (stream_id,))[0][0] >= seq + STORED_WHILE_AWAY, timeout=30)
    server.kill()
    for call in calls:
        assert call.ended.wait(15), "a client kept reading from a dead server"
        call.thread.join(5)
    return calls


def test_kill_9_mid_calls_then_restart_resume_everything(servers):
    first = DaphneServer(TRANSPORT).start()
    servers.append(first)
    db_path = first.db
    current = first
    survivors: list[MCPClient] = []
    for round_no in (1, 2):
        calls = crash_round(current, round_no)
        assert current.proc.returncode == -9
        current = DaphneServer(TRANSPORT, db=db_path).start()  # same database file, new process and port
        servers.append(current)
        *resuming, silent = calls  # the last client never comes back: its call must be failed anyway
        for i, call in enumerate(resuming):
            call.client.url = current.url
            if i == 0:  # one resumes from its very first (priming) event: the whole stream again
                resumed = resume_all(call.client, call.events[0].id, timeout=20)
                call.events = call.events[:1]
            else:
                resumed = resume_all(call.client, call.last_id, timeout=20)
            assert resumed.status == 200, resumed.json() if not resumed.is_sse else resumed.blocks
            check_resumed(call, resumed, db_path)
        silent_stream = parse_id(silent.last_id)[0]
        assert wait_for(lambda: db_rows(db_path, "SELECT status FROM mcp_transport_stream WHERE id = ?",
                                        (silent_stream,)) == [("failed",)], timeout=20)
        # The sessions outlived the process.
        for call in calls:
            call.client.url = current.url
            assert call.client.request("ping")["result"] == {}
        survivors += [c.client for c in calls]
        # New work on the new process, next round's victims.
        fresh = MCPClient(current.url, timeout=20)
        fresh.initialize()
        _, reader = fresh.call_tool("progress", {"count": 3, "delay": 0}, progress_token="fresh")
        assert progress_values(reader.messages, "fresh") == [1, 2, 3]
        fresh.close()
    current.stop()
    for client in survivors:
        client.close()
    check_database(db_path)
    for s in servers[1:]:  # what the restarted processes logged: no tracebacks, no 500s
        log = s.logs()
        assert "Traceback" not in log and '" 500 ' not in log, log[-3000:]


def test_a_restart_with_nothing_in_flight_loses_nothing(servers):
    """The plain case: finished calls stay replayable across a kill -9 and a restart."""
    first = DaphneServer(TRANSPORT).start()
    servers.append(first)
    client = MCPClient(first.url, timeout=20)
    client.initialize()
    _, done = client.call_tool("progress", {"count": 5, "delay": 0}, progress_token="done")
    first.kill()
    second = DaphneServer(TRANSPORT, db=first.db).start()
    servers.append(second)
    client.url = second.url
    replay = resume_all(client, done.events[0].id, timeout=20)
    assert [(e.id, e.data) for e in replay.events] == [(e.id, e.data) for e in done.events[1:]]
    assert replay.messages[-1]["result"]["content"][0]["text"] == "done 5"
    client.close()
    second.stop()
    check_database(first.db)
