"""The side-by-side run's own pieces (bench/anchors/, bench/yardstick.py) in small numbers.

The Python anchor (the official `mcp` 1.x SDK, pinned in bench/anchors/requirements.txt) is
installed by bench/anchors/install.sh into a cache dir outside the repository; it returns at once
when the pins have not changed. Then the anchor is started and driven by the bench's own client,
and the yardstick runs end to end against it and the floor. The same for MCP 2026-07-28: the
modern anchors (the Python SDK 2.x, requirements-modern.txt; the TypeScript server SDK 2.x,
package.json) and this project's modern rows. Correctness only: no timing is asserted. As in the
interop tests, an install that fails skips these tests with the reason, except when CI is set:
then it fails them.
"""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from bench import anchors, scenarios, yardstick

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")

# The first use builds the anchor's venv from PyPI (under a minute); afterwards a few seconds.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def paths():
    try:
        return anchors.install("python")
    except anchors.Unavailable as exc:
        if IN_CI:
            pytest.fail(f"the bench's Python anchor could not be installed (CI is set, so this fails): {exc}",
                        pytrace=False)
        pytest.skip(f"the bench's Python anchor could not be installed: {exc} (set CI=1 to make this a failure)")


@pytest.fixture(scope="module")
def modern_paths():
    try:
        return anchors.install(["python-modern", "node"])
    except anchors.Unavailable as exc:
        if IN_CI:
            pytest.fail(f"the bench's modern anchors could not be installed (CI is set, so this fails): {exc}",
                        pytrace=False)
        pytest.skip(f"the bench's modern anchors could not be installed: {exc} (set CI=1 to make this a failure)")


@pytest.mark.parametrize("name", ["py2-modern", "ts2-modern"])
def test_modern_anchor_answers_the_bench_client(modern_paths, name):
    """Stateless 2026-07-28 calls: echo answered with JSON, progress(3) with a token on SSE, every answer
    checked (text, resultType, the notifications in order, no session id)."""
    server = anchors.AnchorServer(name, modern_paths)
    try:
        with server:
            echo = asyncio.run(scenarios.calls(server.url, concurrency=2, duration=0.5, warmup=0.2, pid=server.pid,
                                               era="modern", tool="echo"))
            progress = asyncio.run(scenarios.calls(server.url, concurrency=2, duration=0.5, warmup=0.1,
                                                   pid=server.pid, era="modern", tool="progress"))
    finally:
        server.remove_log()
    for r, mode in ((echo, "json"), (progress, "sse")):
        assert r["mode"] == mode and r["calls"] > 0, r
        assert r["errors"] == 0 and r["wrong_results"] == 0, r["error_samples"]
        assert r["server_cpu_ms_per_call"] is not None


def test_yardstick_modern_end_to_end(modern_paths, tmp_path):
    out, markdown = tmp_path / "y.jsonl", tmp_path / "y.md"
    rows = list(yardstick.MODERN)
    code = yardstick.main(["--servers", ",".join(rows), "--scenarios", "calls", "--cs", "2", "--reps", "1",
                           "--duration", "0.4", "--warmup", "0.1", "--server-warmup", "0.2", "--no-pin",
                           "--out", str(out), "--markdown", str(markdown), "--plot", str(tmp_path / "y.png")])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    calls = {r["server"]: r for r in lines if r.get("scenario") == "calls"}
    assert sorted(calls) == sorted(rows)
    for name, r in calls.items():
        assert r["era"] == "modern" and r["mode"] == ("json" if name.endswith("-json") else "sse"), r
        assert r["errors"] == 0 and r["wrong_results"] == 0 and r["calls"] > 0, r
    meta = lines[-1]["meta"]["anchors"]
    assert meta["anchor_python_modern"].split()[1].startswith("2.") and meta["anchor_node_modern"].split()[1][0] == "2"
    text = markdown.read_text()
    assert "| ours-modern-sse | this project, 2026-07-28, progress(3) (SSE answers) |" in text
    assert "2026-07-28 JSON (echo) calls >= 2x the Python SDK 2.x" in text
    assert "2026-07-28 SSE (progress(3)) calls >= 1x the TypeScript SDK 2.x" in text
    assert "Host load besides the bench" in text and "mcp 2." in text
    assert "| JSON | 2 |" in text and "TypeScript SDK 2.x CPU / ours" in text
    # The tables again from the JSON lines alone.
    again = tmp_path / "again.md"
    assert yardstick.main(["--report", str(out), "--markdown", str(again)]) == 0
    assert again.read_text() == text


def test_python_anchor_answers_the_bench_client(paths):
    with anchors.AnchorServer("py-sse", paths) as sse, anchors.AnchorServer("py-json", paths) as json_:
        calls = asyncio.run(scenarios.calls(sse.url, concurrency=2, duration=1, warmup=0.2, pid=sse.pid))
        json_calls = asyncio.run(scenarios.calls(json_.url, concurrency=2, duration=0.5, warmup=0.1))
        resumed = asyncio.run(scenarios.resume(sse.url, count=5, delays=(0.01,), modes=("after",), repeats=2,
                                               timeout=10))
    assert calls["mode"] == "sse" and calls["calls"] > 0, calls
    assert calls["errors"] == 0 and calls["wrong_results"] == 0 and calls["deleted"] == 2, calls["error_samples"]
    assert calls["server_cpu_pct"] is not None and calls["server_rss_kb"]
    assert json_calls["mode"] == "json" and json_calls["calls"] > 0 and json_calls["errors"] == 0, json_calls
    # Replay from the anchor's event store once the tool is done: all there, ids growing.
    (row,) = resumed["results"]
    assert (row["lost"], row["duplicated"], row["out_of_order"], row["id_regressions"],
            row["missing_response"]) == (0, 0, 0, 0, 0), row


def test_yardstick_end_to_end(paths, tmp_path):
    out, markdown = tmp_path / "y.jsonl", tmp_path / "y.md"
    code = yardstick.main(["--servers", "py-sse,floor", "--scenarios", "calls,streams", "--cs", "2", "--reps", "2",
                           "--duration", "0.5", "--warmup", "0.1",
                           "--server-warmup", "0.2", "--streams", "5", "--hold", "0.2", "--no-pin",
                           "--out", str(out), "--markdown", str(markdown), "--plot", str(tmp_path / "y.png")])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    calls = [r for r in lines if r.get("scenario") == "calls"]
    assert sorted((r["server"], r["rep"]) for r in calls) == [("floor", 1), ("floor", 2), ("py-sse", 1), ("py-sse", 2)]
    assert all(r["errors"] == 0 and r["calls"] > 0 for r in calls), calls
    streams = {r["server"]: r for r in lines if r.get("scenario") == "streams"}
    assert streams["py-sse"]["held"] == 5 and streams["floor"]["ended_on_delete"] == 5, streams
    assert "meta" in lines[-1] and lines[-1]["meta"]["anchors"]["anchor_python"]
    text = markdown.read_text()
    assert "| py-sse | official Python SDK, SSE answers |" in text and "| floor |" in text
    assert "mcp 1." in text  # the machine facts name the SDK's version


def test_targets_from_medians():
    """Ratios of medians against the stated targets; this project's wrong runs are problems, the anchors' not."""
    def calls(server, c, value, rep):
        return {"server": server, "scenario": "calls", "concurrency": c, "calls_per_s": value, "rep": rep,
                "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0, "wrong_results": 0, "calls": 10}

    results = [calls("py-sse", 16, v, i) for i, v in enumerate((100, 300, 200))]
    results += [calls("ours-sqlite-sse", 16, v, i) for i, v in enumerate((600, 400, 500))]
    results += [calls("ts-sse", 16, v, i) for i, v in enumerate((700, 600, 650))]
    rows = {t: (measured, met) for t, measured, met in yardstick.targets(results, [16])}
    assert rows["SSE calls, SQLite, >= 2.5x py-sse"] == ("2.50x (C=16)", "yes")
    assert rows["SSE calls, SQLite, >= 0.8x ts-sse"] == ("0.77x (C=16)", "no")
    # 2026-07-28: against each SDK 2.x; a run with other load on the host is not claimed.
    results += [calls("py2-modern-json", 16, v, i) for i, v in enumerate((100, 120, 110))]
    results += [calls("ts2-modern-json", 16, v, i) for i, v in enumerate((200, 240, 220))]
    results += [calls("ours-modern-json", 16, v, i) for i, v in enumerate((230, 210, 220))]
    rows = {t: (measured, met) for t, measured, met in yardstick.targets(results, [16])}
    assert rows["2026-07-28 JSON (echo) calls >= 2x the Python SDK 2.x"] == ("2.00x (C=16)", "yes")
    assert rows["2026-07-28 JSON (echo) calls >= 1x the TypeScript SDK 2.x"] == ("1.00x (C=16)", "yes")
    results[-1]["host_other_cpu_pct"] = 60.0
    rows = {t: met for t, _, met in yardstick.targets(results, [16])}
    assert rows["2026-07-28 JSON (echo) calls >= 2x the Python SDK 2.x"].startswith("not claimed: disturbed")
    assert rows["SSE calls, SQLite, >= 2.5x py-sse"] == "yes"
    assert "Disturbed (above 25 %): ours-modern-json" in yardstick.host_load(results, ["ours-modern-json"])
    lost = {"server": "py-sse", "scenario": "resume", "ok": False, "lost_total": 3}
    assert yardstick.problems(results + [lost]) == []
    assert yardstick.problems([{**lost, "server": "ours-pg-sse", "duplicated_total": 0, "out_of_order_total": 0,
                                "missing_response_total": 0}])
