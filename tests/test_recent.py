"""What a process remembers of the active tasks it runs (`storage.recent.WorkingTasks`): when a poll
may be answered from it, and when not."""
from datetime import datetime, timedelta, timezone

import pytest

from mcp_transport.storage import recent
from mcp_transport.storage.records import TaskView

L = recent.WORKING_TASK_SECONDS
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(recent, "time", c)
    return c


def task(task_id="t", status="working", worker="here", message="", expires_at=None) -> TaskView:
    return TaskView(task_id, "default", "", None, status, message, "", "", "{}", None, 1000, worker, "tool",
                    NOW, NOW, expires_at)


@pytest.fixture
def memory(clock):
    m = recent.WorkingTasks("here")
    m.leased(clock.now + 600)
    return m


def remember(memory, row):
    memory.read(row.id, memory.begin(row.id), row)


def test_a_read_of_a_task_this_process_runs_is_answered_from_until_it_lapses(memory, clock):
    row = task()
    remember(memory, row)
    assert memory.get("t") is row
    clock.now += L - 0.01
    assert memory.get("t") is row
    clock.now += 0.02
    assert memory.get("t") is None


def test_only_active_tasks_this_process_runs_are_remembered(memory):
    for row in (task("a", worker="elsewhere"), task("b", status="completed"), task("c", status="cancelled")):
        remember(memory, row)
        assert memory.get(row.id) is None
    remember(memory, task("d", status="input_required"))
    assert memory.get("d") is not None


def test_a_change_while_a_read_is_under_way_spoils_it_and_every_read_begun_before_the_last_ends(memory):
    first = memory.begin("t")
    memory.forget("t")  # a change starts or commits
    second = memory.begin("t")
    memory.read("t", first, task(message="old"))
    memory.read("t", second, task(message="old"))
    assert memory.get("t") is None
    third = memory.begin("t")
    memory.read("t", third, task(message="new"))
    assert memory.get("t").status_message == "new"
    memory.forget("t")
    assert memory.get("t") is None


def test_nothing_is_answered_from_once_the_processs_leases_may_have_run_out(memory, clock):
    remember(memory, task())
    memory.leased(clock.now + 0.5)
    assert memory.get("t") is not None
    clock.now += 0.5
    assert memory.get("t") is None


def test_an_entry_never_outlives_its_tasks_ttl(memory, clock, monkeypatch):
    monkeypatch.setattr(recent, "_seconds_until", lambda moment: 0.2)
    remember(memory, task(expires_at=NOW + timedelta(seconds=1)))
    clock.now += 0.25
    assert memory.get("t") is None


def test_a_check_extends_what_was_answered_from_drops_what_changed_and_lets_the_rest_lapse(memory, clock):
    same, changed, idle = task("same"), task("changed"), task("idle")
    for row in (same, changed, idle):
        remember(memory, row)
    memory.get("same"), memory.get("changed")
    clock.now += 0.5
    due = memory.due()
    assert set(due) == {"same", "changed"}
    memory.checked(clock.now, due, {"same": same, "changed": task("changed", status="cancelled")})
    assert memory.get("changed") is None
    clock.now += L - 0.1
    assert memory.get("same") is same and memory.get("idle") is None
    assert set(memory.due()) == {"same"} and "idle" not in memory.entries


def test_a_check_leaves_an_entry_read_again_meanwhile_as_read(memory, clock):
    remember(memory, task(message="first"))
    memory.get("t")
    due = memory.due()
    clock.now += 0.3
    remember(memory, task(message="second"))
    memory.checked(clock.now - 0.3, due, {"t": task(message="first")})
    assert memory.get("t").status_message == "second"
