"""The bench's scenarios (bench/scenarios.py) in small numbers against a real daphne.

Correctness only: calls succeed, streams are held and end on DELETE, nothing is lost, duplicated
or reordered. No timing is asserted; the figures themselves are `make bench`'s business.
"""
import asyncio
import contextlib
import shutil

import pytest

from bench import run, scenarios
from bench.client import SSEParser
from bench.dbtool import DBTool

from .live import DaphneServer


@contextlib.contextmanager
def served(transport=None, **kwargs):
    """A daphne of its own, its temp directory (database, log) removed afterwards."""
    s = DaphneServer(transport, **kwargs)
    try:
        with s:
            yield s
    finally:
        shutil.rmtree(s.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    with served() as s:
        yield s


def dbtool(server: DaphneServer) -> DBTool:
    return DBTool({"DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": server.db})


def renders(result: dict):
    assert run.correctness(result) == []
    table = run.table([result])
    assert "FAILED" not in table
    return table


def test_calls_sse(server):
    r = asyncio.run(scenarios.calls(server.url, concurrency=2, duration=2, warmup=0.2, pid=server.proc.pid))
    assert r["mode"] == "sse"
    assert r["sessions"] == 2 and r["calls"] > 0
    assert r["errors"] == 0 and r["wrong_results"] == 0, r["error_samples"]
    assert r["deleted"] == 2
    assert r["server_rss_kb"] and r["server_cpu_pct"] is not None
    renders(r)


def test_calls_json():
    with served({"JSON_RESPONSE": True}) as s:
        r = asyncio.run(scenarios.calls(s.url, concurrency=2, duration=2, warmup=0.2, pid=s.proc.pid))
    assert r["mode"] == "json"
    assert r["calls"] > 0 and r["errors"] == 0 and r["wrong_results"] == 0, r["error_samples"]
    renders(r)


@pytest.mark.parametrize("tool, mode", [("echo", "json"), ("progress", "sse")])
def test_calls_modern(server, tool, mode):
    """MCP 2026-07-28: stateless calls with the envelope and headers; echo answered with JSON, progress(3)
    with a token on SSE; every answer checked (text, resultType, the notifications, no session id)."""
    r = asyncio.run(scenarios.calls(server.url, concurrency=2, duration=1, warmup=0.2, pid=server.proc.pid,
                                    era="modern", tool=tool))
    assert (r["era"], r["tool"], r["mode"]) == ("modern", tool, mode)
    assert r["sessions"] == 2 and r["calls"] > 0 and r["deleted"] is None
    assert r["errors"] == 0 and r["wrong_results"] == 0, r["error_samples"]
    assert "2026-07-28" in renders(r)


def test_modern_answers_are_checked():
    """A legacy-shaped result (no resultType), a session id, a missing notification: each is wrong."""
    class Head:
        def __init__(self, headers=None):
            self.headers = headers or {}

    result = {"result": {"content": [{"type": "text", "text": "done 3"}], "resultType": "complete"}}
    progress = [{"method": "notifications/progress", "params": {"progressToken": "t", "progress": i}}
                for i in (1, 2, 3)]
    assert scenarios.answered(result, progress, Head(), "t", "progress", "modern")
    assert not scenarios.answered(result, progress[:2], Head(), "t", "progress", "modern")
    assert not scenarios.answered(result, progress, Head({"mcp-session-id": "x"}), "t", "progress", "modern")
    legacy = {"result": {"content": [{"type": "text", "text": "hi"}]}}
    assert scenarios.answered(legacy, [], Head(), "hi", "echo", "legacy")
    assert not scenarios.answered(legacy, [], Head(), "hi", "echo", "modern")


def test_streams(server):
    r = asyncio.run(scenarios.streams(server.url, count=20, hold=1, pid=server.proc.pid, warm=2))
    assert r["errors"] == 0, r["error_samples"]
    assert r["opened"] == 20 and r["held"] == 20 and r["all_held"]
    assert r["ended_on_delete"] == 20 and r["deleted"] == 20
    assert r["kb_per_session_plus_stream"] is not None
    renders(r)


def test_resume(server):
    r = asyncio.run(scenarios.resume(server.url, count=20, delays=(0.02, 0.001, 0), repeats=2))
    assert len(r["results"]) == 6
    for row in r["results"]:
        assert row["runs"] == 2
        assert (row["lost"], row["duplicated"], row["out_of_order"], row["missing_response"],
                row["id_regressions"]) == (0, 0, 0, 0, 0), row
    assert r["ok"]
    renders(r)


def test_burst(server):
    r = asyncio.run(scenarios.burst(server.url, count=300, pid=server.proc.pid, db=dbtool(server)))
    assert r["ok"], r
    assert r["notifications"] == 300 and r["lost"] == 0 and r["duplicated"] == 0
    assert r["stored"]["events"] == 302  # priming + 300 notifications + the response
    renders(r)


def test_replay():
    with served() as small, served() as large:
        r = asyncio.run(scenarios.replay(small.url, large.url, count=300, total_rows=5000, repeats=2,
                                         small_db=dbtool(small), large_db=dbtool(large)))
    assert r["ok"], r
    assert r["small"]["events"] == 301 and r["large"]["events"] == 301  # 300 notifications + the response
    assert r["small"]["table_rows"] < 1000 and r["large"]["table_rows"] >= 5000
    renders(r)


def test_sse_parser_split_anywhere():
    """Events split across reads at any byte, CRLF and CR line ends, comments, a priming event."""
    stream = (b": keepalive\r\n\r\nid: 7-0\r\nretry: 500\r\ndata: \r\n\r\n"
              b"id: 7-1\ndata: {\"a\":\ndata: 1}\n\nid: 7-2\ndata: x\n\nid: 7-3\rdata: y\r\r")
    for cut in range(1, len(stream)):
        parser = SSEParser()
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
        assert [(e.id, e.data) for e in events] == [("7-0", ""), ("7-1", '{"a":\n1}'), ("7-2", "x"), ("7-3", "y")]
        assert parser.retry == 500 and parser.comments == 1 and parser.last_id == "7-3"


def test_growth():
    with served() as base, served() as grown, served(app="bench.floor:app") as floor:
        r = asyncio.run(scenarios.growth(base.url, grown.url, floor.url, total_rows=3000, held=5, concurrency=2,
                                         duration=1, rounds=2, base_pid=base.proc.pid, grown_pid=grown.proc.pid,
                                         floor_pid=floor.proc.pid, grown_db=dbtool(grown)))
    assert r["ok"], r
    assert r["rows"]["with"]["table_rows"] >= 3000
    for key in ("rows", "streams", "floor"):
        assert len(r[key]["without"]["cpu_ms_per_call_runs"]) == 2 and r[key]["ratio"] is not None, r[key]
        assert r[key]["without"]["calls_per_s"] > 0 and r[key]["with"]["calls_per_s"] > 0
    assert r["streams"]["with"]["held"] == 5 and r["floor"]["with"]["held"] == 5
    assert "bare app" in renders(r)


def test_floor_answers_like_an_mcp_server():
    """What the client checks, nothing more: session id, 202 for notifications, echo on SSE, a GET held
    until DELETE."""
    with served(app="bench.floor:app") as floor:
        r = asyncio.run(scenarios.calls(floor.url, concurrency=2, duration=0.5, warmup=0.1))
        s = asyncio.run(scenarios.streams(floor.url, count=3, hold=0.2, warm=1))
    assert r["mode"] == "sse" and r["calls"] > 0 and r["errors"] == 0 and r["wrong_results"] == 0, r
    assert s["opened"] == 3 and s["held"] == 3 and s["errors"] == 0 and s["ended_on_delete"] == 3, s


def test_observability_bench_serves_each_variant_in_turns(capsys):
    from bench import observability

    assert observability.main(["--quick", "--variants", "off,traced,exported"]) == 0
    out = capsys.readouterr().out
    assert all(f"| sse | 16 | {variant} |" in out for variant in ("off", "traced", "exported"))
    exported = int(out.split("exported: ")[1].split(" bytes")[0].replace(",", ""))
    assert exported > 0  # the exporting variant's spans reached its file


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_instruction_counts_fixed_calls_are_all_answered(server, era):
    from bench import observability

    assert asyncio.run(observability.fixed_calls(server.url, 4, 22, era)) == 22
