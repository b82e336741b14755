"""Prometheus metrics: what a scrape shows after real traffic, counted exactly.

- In-process (the example's application and its /mcp/metrics route): tool calls by tool and
  outcome in both eras, sessions, listen streams and tasks as the database has them, the store's
  counts surviving a batch that fails and runs again, metrics off, the Django view.
- A real daphne (SQLite): the issue's scripted run (calls, a stream the client drops and resumes,
  a connection an operator closes from the admin) scraped for exactly those counts.
- Two daphne workers (PostgreSQL + Redis) sharing a PROMETHEUS_MULTIPROC_DIR: traffic split between
  them, and either worker's scrape adds both up while the database's gauges count once.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import path
from prometheus_client.parser import text_string_to_metric_families

from example_project.asgi import application
from mcp_transport import metrics, views
from mcp_transport.execution.worker import worker
from mcp_transport.models import Stream
from mcp_transport.storage import store
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

from .live import ROOT, DaphneServer, MCPClient
from .test_admin_e2e import PASSWORD, USERNAME, AdminHTTP, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

urlpatterns = [path("ops/metrics", views.metrics)]  # this module is the Django view's URLconf below
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def parse(text: str) -> dict:
    """{(sample name, frozenset of labels): value}"""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(snapshot: dict, name: str, **labels) -> float:
    return snapshot.get((name, frozenset(labels.items())), 0.0)


def delta(before: dict, after: dict, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def scrape() -> dict:
    response = await MCPCommunicator(application, path="/mcp/metrics").send("GET")
    assert response.status == 200 and response.headers["content-type"].startswith("text/plain")
    return parse(response.body.decode())


# In-process


async def test_tool_calls_are_counted_by_tool_and_outcome_in_both_eras():
    before = await scrape()
    session = MCPCommunicator(application)
    await session.initialize()
    assert (await session.call_tool("echo", {"message": "a"})).result["content"][0]["text"] == "a"
    assert (await session.call_tool("test_error_handling")).result["isError"] is True
    assert (await session.call_tool("no_such_tool")).messages[-1]["error"]["code"] == -32602
    cancelled = asyncio.ensure_future(session.call_tool("slow_compute", {"seconds": 60}, timeout=30))
    while not (running := [key for sid, key in worker.requests.running_streams() if sid == session.session_id]):
        await asyncio.sleep(0.01)
    await session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": json.loads(running[0])}})
    assert (await cancelled).complete
    modern = ModernCommunicator(application, capabilities={"elicitation": {}})
    assert (await modern.call_tool("echo", {"message": "b"})).result["resultType"] == "complete"
    asked = await modern.call_tool("test_input_required_result_elicitation")
    assert asked.result["resultType"] == "input_required"
    answered = await modern.retry(asked, {"user_name": {"action": "accept", "content": {"name": "Ann"}}})
    assert answered.result["content"][0]["text"] == "Hello, Ann!"
    after = await scrape()

    counted = {(tool, outcome): delta(before, after, "mcp_tool_calls_total", tool=tool, outcome=outcome)
               for tool, outcome in [("echo", "ok"), ("test_error_handling", "tool_error"), ("(unknown)", "error"),
                                     ("slow_compute", "cancelled"), ("test_input_required_result_elicitation",
                                                                 "input_required"),
                                     ("test_input_required_result_elicitation", "ok")]}
    assert counted == {("echo", "ok"): 2, ("test_error_handling", "tool_error"): 1, ("(unknown)", "error"): 1,
                       ("slow_compute", "cancelled"): 1, ("test_input_required_result_elicitation", "input_required"): 1,
                       ("test_input_required_result_elicitation", "ok"): 1}
    assert delta(before, after, "mcp_tool_call_seconds_count", tool="echo") == 2
    assert delta(before, after, "mcp_tool_call_seconds_count", tool="test_input_required_result_elicitation") == 2
    assert not any(name.startswith("mcp_tool_calls") and ("tool", "no_such_tool") in labels
                   for name, labels in after)
    # The session's streams: a priming event and a response each, but the cancelled call's, which has no
    # response; the 2026-07-28 calls store nothing.
    assert delta(before, after, "mcp_events_stored_total") == 3 * 2 + 1
    assert delta(before, after, "mcp_sessions_created_total") == 1


async def test_sessions_listen_streams_and_tasks_are_read_from_the_database():
    await worker.start()
    await worker.heartbeat.beat()  # this worker's row: what "running workers" means
    before = await scrape()
    assert value(before, "mcp_sessions_active") == 0 and value(before, "mcp_workers", state="alive") == 1
    session = MCPCommunicator(application)
    await session.initialize()
    listener = ModernCommunicator(application)
    listening = asyncio.ensure_future(listener.request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, timeout=10))
    while not worker.modern.listens:
        await asyncio.sleep(0.01)
    (listen,) = worker.modern.listens.values()
    await listen.row
    tasks = ModernCommunicator(application, capabilities=TASKS)
    handle = (await tasks.call_tool("slow_compute", {"seconds": 1.5})).result
    assert handle["resultType"] == "task"
    during = await scrape()
    assert value(during, "mcp_sessions_active") == 1
    assert value(during, "mcp_listen_streams") == 1
    assert delta(before, during, "mcp_connections", kind="listen") == 1
    assert delta(before, during, "mcp_listen_streams_opened_total") == 1
    assert value(during, "mcp_tasks", status="working") == 1 and delta(before, during, "mcp_tasks_created_total") == 1

    worker.modern.end_listens()
    await listening
    await session.delete()
    while (await tasks.request("tasks/get", {"taskId": handle["taskId"]})).result["status"] == "working":
        await asyncio.sleep(0.05)
    after = await scrape()
    assert value(after, "mcp_sessions_active") == 0 and value(after, "mcp_listen_streams") == 0
    assert delta(before, after, "mcp_connections", kind="listen") == 0
    assert value(after, "mcp_tasks", status="working") == 0 and value(after, "mcp_tasks", status="completed") == 1
    assert delta(before, after, "mcp_sessions_ended_total", by="client") == 1
    assert delta(before, after, "mcp_tool_calls_total", tool="slow_compute", outcome="ok") == 1


async def test_a_batch_that_fails_and_runs_again_counts_its_events_once():
    """The database thread runs a failed batch again call by call: what the first try wrote was
    rolled back, and so is its count."""
    from asgiref.sync import sync_to_async

    from mcp_transport.storage.executor import executor

    def fails():
        raise ValueError("boom")

    before = await scrape()
    await sync_to_async(store.create_session)("s1", "default", "2025-11-25", {}, {})
    pending = store.PendingStream()
    opened = executor.submit(store.open_stream, "s1", prime=True, pending=pending)
    failed = executor.submit(fails)
    notified, _ = executor.submit_items(store.append, pending, ["n1"])
    final = executor.submit(store.append, pending, ["end"], finish=Stream.Status.COMPLETED)
    await opened
    with pytest.raises(ValueError):
        await failed
    await notified
    await final
    assert delta(before, await scrape(), "mcp_events_stored_total") == 3


def test_an_expired_lease_is_counted_once_its_error_is_stored():
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from mcp_transport.execution.errors import worker_lost
    from mcp_transport.scrape import exposition

    store.create_session("s1", "default", "2025-11-25", {}, {})
    stream_id, _ = store.open_stream("s1", method="tools/call", request_id="7", prime=True)
    Stream.objects.filter(pk=stream_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    before = parse(exposition()[0].decode())
    with pytest.raises(RuntimeError), transaction.atomic():
        assert len(store.fail_orphans(worker_lost)) == 1
        raise RuntimeError("rolled back")
    assert delta(before, parse(exposition()[0].decode()), "mcp_leases_expired_total", kind="request") == 0
    assert len(store.fail_orphans(worker_lost)) == 1
    after = parse(exposition()[0].decode())
    assert delta(before, after, "mcp_leases_expired_total", kind="request") == 1
    assert delta(before, after, "mcp_events_stored_total") == 1


async def test_metrics_off_count_nothing_and_serve_nothing():
    before = await scrape()
    with override_settings(MCP_TRANSPORT={"METRICS": False}):
        assert metrics.on is False and metrics.tool_calls is metrics.OFF and metrics.events_stored is metrics.OFF
        client = MCPCommunicator(application)
        await client.initialize()
        await client.call_tool("echo", {"message": "unseen"})
        off = await MCPCommunicator(application, path="/mcp/metrics").send("GET")
        assert off.status == 404
    after = await scrape()
    assert metrics.on is True
    for name, labels in [("mcp_tool_calls_total", {"tool": "echo", "outcome": "ok"}),
                         ("mcp_sessions_created_total", {}), ("mcp_events_stored_total", {}),
                         ("mcp_connections_closed_total", {"reason": "completed"})]:
        assert delta(before, after, name, **labels) == 0, name
    assert value(after, "mcp_sessions_active") == 1  # the database's state is there again


def test_the_django_view_serves_the_same_metrics():
    from django.test import Client

    client = Client()
    with override_settings(ROOT_URLCONF=__name__):
        response = client.get("/ops/metrics")
        assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
        families = {family.name for family in text_string_to_metric_families(response.content.decode())}
        assert {"mcp_tool_calls", "mcp_events_stored", "mcp_sessions_active", "mcp_tasks"} <= families
        openmetrics = client.get("/ops/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
        assert openmetrics["Content-Type"].startswith("application/openmetrics-text")
        assert client.post("/ops/metrics").status_code == 405
        with override_settings(MCP_TRANSPORT={"METRICS": False}):
            assert client.get("/ops/metrics").status_code == 404


def test_without_prometheus_client_there_is_no_route_and_nothing_counts(monkeypatch):
    from django.core.checks import run_checks

    monkeypatch.setattr(metrics, "prometheus_client", None)
    with pytest.raises(ImproperlyConfigured, match=r"django-mcp-transport\[metrics\]"):
        from mcp_transport.routing import mcp_application

        mcp_application(application, metrics="/mcp/metrics")
    with override_settings(MCP_TRANSPORT={"METRICS": True}):
        assert metrics.on is False and metrics.tool_calls is metrics.OFF
        assert "mcp_transport.W010" in [m.id for m in run_checks(tags=["mcp_transport"])]
    monkeypatch.undo()
    metrics.configure()
    with override_settings(MCP_TRANSPORT={"METRICS": "yes"}):
        assert "mcp_transport.E033" in [m.id for m in run_checks(tags=["mcp_transport"])]
    assert metrics.on is True


def test_a_killed_process_leaves_the_live_gauges_but_not_the_counters(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    gone = 2 ** 22 + 12345  # above Linux's largest process id: no such process
    files = [f"gauge_livesum_{gone}.db", f"counter_{gone}.db", f"gauge_livesum_{os.getpid()}.db"]
    for name in files:
        (tmp_path / name).write_bytes(b"")
    metrics.forget_dead_processes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files[1:])


# A real daphne: the scripted run


def superuser(env: dict):
    subprocess.run([sys.executable, "manage.py", "createsuperuser", "--noinput"], cwd=ROOT, check=True,
                   capture_output=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", **env,
                                             "DJANGO_SUPERUSER_USERNAME": USERNAME,
                                             "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
                                             "DJANGO_SUPERUSER_EMAIL": "operator@example.com"})


def scrape_live(server) -> dict:
    response = httpx.get(f"http://127.0.0.1:{server.port}/mcp/metrics", timeout=30)
    assert response.status_code == 200, response.text
    return parse(response.text)


def settled(server, **expected) -> dict:
    """Scrape until the named samples (`name` or `name__label__value`) have these values."""
    def key(spec):
        name, *pairs = spec.split("__")
        return name, dict(zip(pairs[::2], pairs[1::2]))

    def check():
        snapshot = scrape_live(server)
        return snapshot if all(value(snapshot, name, **labels) == want
                               for (name, labels), want in ((key(k), v) for k, v in expected.items())) else None

    return wait_until(check, f"metrics {expected}")


def elicitation_request(client: MCPClient):
    """A `test_elicitation` call read until its question arrives, then dropped by the client.
    -> (the question's event id, the question)."""
    seen = []
    _, result = client.call_tool("test_elicitation", {"message": "who?"},
                                 stop=lambda event: bool(event.message) and seen.append(event) is None)
    assert not result.closed_by_server
    return seen[-1].id, seen[-1].message


def answer(client: MCPClient, question: dict):
    response = client.post({"jsonrpc": "2.0", "id": question["id"],
                            "result": {"action": "accept", "content": {"username": "ann", "email": "a@x"}}})
    assert response.status_code == 202


class HeldCall(threading.Thread):
    """A `test_elicitation` call whose connection stays open until the server ends it."""

    def __init__(self, client: MCPClient):
        super().__init__(daemon=True)
        self.client = client
        self.asked = threading.Event()
        self.events = []
        self.result = None

    def run(self):
        def on_event(event):
            self.events.append(event)
            if event.message:
                self.asked.set()
            return False

        _, self.result = self.client.call_tool("test_elicitation", {"message": "who?"}, stop=on_event, read_timeout=60)

    @property
    def question(self):
        return [e for e in self.events if e.message][-1]


def test_a_scripted_run_shows_exactly_its_counts():
    server = DaphneServer({"RETRY_MS": 60000, "MAX_EARLY_RECONNECTS": 1})
    superuser({"MCP_EXAMPLE_DB": server.db})
    with server:
        admin = AdminHTTP(server)
        a = MCPClient(server.url)
        a.initialize(capabilities={"elicitation": {}})
        for text in ("one", "two", "three"):
            assert a.call_tool("echo", {"message": text})[1].messages[-1]["result"]["content"][0]["text"] == text
        assert a.call_tool("test_error_handling")[1].messages[-1]["result"]["isError"] is True

        # A stream its client drops (the server sees the disconnect) and resumes after the tool ended.
        last_id, question = elicitation_request(a)
        settled(server, mcp_connections_closed_total__reason__client=1, mcp_connections__kind__stream=0)
        answer(a, question)
        settled(server, mcp_tool_calls_total__tool__test_elicitation__outcome__ok=1)
        resumed = a.resume(last_id)
        assert [m["result"]["content"][0]["text"] for m in resumed.messages] == [
            'User response: action=accept, content={"username": "ann", "email": "a@x"}']

        # A connection an operator closes from the admin (operations.close_connection); the client
        # resumes at once, before the 60 s retry: early, tolerated once, refused the second time.
        b = MCPClient(server.url)
        b.initialize(capabilities={"elicitation": {}})
        held = HeldCall(b)
        held.start()
        assert held.asked.wait(30)
        stream_id = int(held.question.id.split("-")[0])
        assert admin.post(f"/admin/mcp_transport/stream/{stream_id}/close/").status_code == 302
        held.join(30)
        assert held.result.closed_by_server and held.result.retry == 60000
        answer(b, held.question.message)
        settled(server, mcp_tool_calls_total__tool__test_elicitation__outcome__ok=2)
        assert b.resume(held.question.id).messages[-1]["result"]["content"][0]["text"].startswith("User response")
        refused = b.resume(held.question.id)
        assert refused.status == 429
        assert b.delete().status_code == 200
        admin.close()

        snapshot = scrape_live(server)
    expected = {
        ("mcp_sessions_created_total", ()): 2,
        ("mcp_sessions_ended_total", (("by", "client"),)): 1,
        ("mcp_sessions_active", ()): 1,
        ("mcp_tool_calls_total", (("outcome", "ok"), ("tool", "echo"))): 3,
        ("mcp_tool_calls_total", (("outcome", "tool_error"), ("tool", "test_error_handling"))): 1,
        ("mcp_tool_calls_total", (("outcome", "ok"), ("tool", "test_elicitation"))): 2,
        ("mcp_tool_call_seconds_count", (("tool", "echo"),)): 3,
        # Per call: its priming event and its response; the elicitations' questions too.
        ("mcp_events_stored_total", ()): 4 * 2 + 2 * 3,
        ("mcp_connections_closed_total", (("reason", "completed"),)): 4 + 2,
        ("mcp_connections_closed_total", (("reason", "client"),)): 1,
        ("mcp_connections_closed_total", (("reason", "admin"),)): 1,
        ("mcp_connections", (("kind", "stream"),)): 0,
        ("mcp_reconnects_total", ()): 3,
        ("mcp_early_reconnects_total", (("outcome", "tolerated"),)): 1,
        ("mcp_early_reconnects_total", (("outcome", "refused"),)): 1,
        ("mcp_replay_seconds_count", ()): 2,
        ("mcp_replayed_events_total", ()): 2,
        ("mcp_leases_expired_total", (("kind", "request"),)): 0,
        ("mcp_streams_open", (("state", "connected"),)): 0,
        ("mcp_streams_open", (("state", "resumable"),)): 0,
        ("mcp_workers", (("state", "alive"),)): 1,
    }
    assert {key: value(snapshot, key[0], **dict(key[1])) for key in expected} == expected


# Two workers, one multiprocess directory


def test_two_workers_add_up_and_the_database_counts_once(tmp_path):
    from .scaled import Cluster

    with Cluster(workers=2, env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}) as cluster:
        a, b = cluster.workers
        superuser(cluster.env)
        first = MCPClient(a.url)
        first.initialize(capabilities={"elicitation": {}})
        on_b = MCPClient(b.url)
        on_b.session_id, on_b.version = first.session_id, first.version
        for _ in range(2):
            first.call_tool("echo", {"message": "a"})
        for _ in range(3):
            on_b.call_tool("echo", {"message": "b"})
        on_b.call_tool("test_error_handling")

        # Started on a, dropped, answered and resumed through b.
        last_id, question = elicitation_request(first)
        settled(a, mcp_connections_closed_total__reason__client=1, mcp_connections__kind__stream=0)
        answer(on_b, question)
        settled(b, mcp_tool_calls_total__tool__test_elicitation__outcome__ok=1)
        assert on_b.resume(last_id).messages[-1]["result"]["content"][0]["text"].startswith("User response")

        # Held by b, closed by an operator on a's admin (through Redis), resumed on a.
        second = MCPClient(b.url)
        second.initialize(capabilities={"elicitation": {}})
        held = HeldCall(second)
        held.start()
        assert held.asked.wait(30)
        admin = AdminHTTP(a)
        stream_id = int(held.question.id.split("-")[0])
        assert admin.post(f"/admin/mcp_transport/stream/{stream_id}/close/").status_code == 302
        held.join(30)
        assert held.result.closed_by_server
        admin.close()
        answer(second, held.question.message)
        settled(a, mcp_tool_calls_total__tool__test_elicitation__outcome__ok=2)
        again = MCPClient(a.url)
        again.session_id, again.version = second.session_id, second.version
        assert again.resume(held.question.id).messages[-1]["result"]["content"][0]["text"].startswith("User")

        scrapes = [scrape_live(a), scrape_live(b)]
    expected = {
        ("mcp_sessions_created_total", ()): 2,
        ("mcp_sessions_active", ()): 2,
        ("mcp_workers", (("state", "alive"),)): 2,
        ("mcp_tool_calls_total", (("outcome", "ok"), ("tool", "echo"))): 2 + 3,
        ("mcp_tool_calls_total", (("outcome", "tool_error"), ("tool", "test_error_handling"))): 1,
        ("mcp_tool_calls_total", (("outcome", "ok"), ("tool", "test_elicitation"))): 2,
        ("mcp_tool_call_seconds_count", (("tool", "echo"),)): 5,
        ("mcp_events_stored_total", ()): 6 * 2 + 2 * 3,
        ("mcp_connections_closed_total", (("reason", "completed"),)): 6 + 2,
        ("mcp_connections_closed_total", (("reason", "client"),)): 1,
        ("mcp_connections_closed_total", (("reason", "admin"),)): 1,
        ("mcp_connections", (("kind", "stream"),)): 0,
        ("mcp_reconnects_total", ()): 2,
        ("mcp_replay_seconds_count", ()): 2,
        ("mcp_replayed_events_total", ()): 2,
        ("mcp_streams_open", (("state", "resumable"),)): 0,
    }
    for snapshot in scrapes:
        assert {key: value(snapshot, key[0], **dict(key[1])) for key in expected} == expected
