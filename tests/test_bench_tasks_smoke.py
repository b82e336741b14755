"""bench/tasks.py (make bench-tasks) in small numbers: every part runs and its figures are right.

Correctness and counts only: the tasks are created, all working at once, all completed with their
own results; polls and echo calls answer right. The round trips counted on PostgreSQL are checked
against the target (a count, not a timing); no timing is asserted.
"""
import json

import pytest

from bench import tasks

from .deploy.topology import postgres_reachable

pytestmark = pytest.mark.timeout(300)


def run(tmp_path, *args) -> dict:
    out = tmp_path / "bench-tasks.json"
    code = tasks.main(["--quick", "--no-pin", "--json", str(out), *args])
    figures = json.loads(out.read_text())
    assert code == 0, [tasks.correctness(r) for r in figures["results"]]
    assert "FAILED" not in tasks.table(figures["results"])
    return {r["scenario"]: r for r in figures["results"]}


def test_every_part_on_sqlite(tmp_path):
    results = run(tmp_path, "--db", "sqlite", "--tasks", "30", "--seconds", "4")
    trips = results["trips"]
    assert trips["vendor"] == "sqlite" and not trips["exact_round_trips"] and trips["wrong"] == 0
    groups = trips["groups"]
    assert groups["store create_task"]["statements"]["max"] == 1
    assert groups["store get_task"]["statements"]["max"] == 1
    assert groups["http echo"]["statements"]["max"] == 0
    assert groups["http tasks/get completed"]["statements"]["max"] == 1
    assert groups["http tasks/get completed again"]["statements"]["max"] == 0  # a finished task, read lately
    held = results["held"]
    assert held["created"] == 30 and held["working_in_sweep"] == 30 and held["all_working_at_once"]
    assert held["completed"] == 30 and held["wrong"] == 0 and held["errors"] == 0
    polls = results["polls"]
    assert polls["errors"] == 0 and polls["wrong"] == 0
    assert set(polls["kinds"]) == {"echo", "tasks/get working", "tasks/get completed", "2025-11-25 echo",
                                   "2025-11-25 tasks/get working", "2025-11-25 tasks/get completed"}
    assert polls["kinds"]["2025-11-25 tasks/get working"]["compared_with"] == "2025-11-25 echo"
    assert all(run["calls"] > 0 for runs in polls["runs"].values() for run in runs)


def test_round_trips_on_postgres(tmp_path):
    if not postgres_reachable():
        pytest.skip("PostgreSQL is not reachable (.ci/run starts it)")
    trips = run(tmp_path, "--db", "postgres", "--parts", "trips")["trips"]
    assert trips["vendor"] == "postgresql" and trips["exact_round_trips"] and trips["wrong"] == 0
    groups = trips["groups"]
    for group in ("store create_task", "store get_task", "http tools/call -> task", "http tasks/get completed"):
        assert groups[group]["round_trips"]["max"] <= tasks.TRIPS_TARGET, (group, groups[group])
    assert groups["http echo"]["round_trips"]["max"] == 0
