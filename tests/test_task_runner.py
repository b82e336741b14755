"""TASK_RUNNER = "django_tasks": the work runs in the Tasks framework's worker (django_tasks_db's
db_worker), not in daphne; restarting daphne mid-task loses nothing. Real processes: daphne, the
db_worker, one SQLite file (WAL) between them."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from mcp_transport.testing import ModernCommunicator

from .live import ROOT, DaphneServer

pytestmark = pytest.mark.timeout(180)

EXTENSION = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TRANSPORT = {"TASK_RUNNER": "django_tasks", "TASK_GRACE_SECONDS": 0}
ENV = {"MCP_TEST_TASK_RUNNER": "1"}


class Modern:
    """2026-07-28 requests over real HTTP, shaped by the same helper the in-process tests use."""

    def __init__(self, url: str, **capabilities):
        self.url = url
        self.shape = ModernCommunicator(None, capabilities={**EXTENSION, **capabilities})
        self.http = httpx.Client(timeout=30)

    def request(self, method: str, params: dict | None = None) -> dict:
        params = self.shape.envelope(params)
        body = {"jsonrpc": "2.0", "id": self.shape.next_id(), "method": method, "params": params}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   **self.shape.request_headers(method, params)}
        response = self.http.post(self.url, json=body, headers=headers)
        assert response.headers["content-type"].startswith("application/json"), response.text
        return response.json()

    def poll(self, task_id: str, until=("completed", "failed", "cancelled"), timeout=60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            task = self.request("tasks/get", {"taskId": task_id})["result"]
            if task["status"] in until:
                return task
            time.sleep(0.2)
        raise AssertionError(f"task {task_id} never reached {until}: {task}")


@pytest.fixture
def setup():
    directory = tempfile.mkdtemp(prefix="mcp-task-runner-")
    db = os.path.join(directory, "db.sqlite3")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": db, **ENV,
           "PYTHONUNBUFFERED": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    log = open(Path(directory) / "db_worker.log", "wb")
    worker = subprocess.Popen([sys.executable, "manage.py", "db_worker", "--interval", "0.1", "--no-startup-delay",
                               "--no-reload"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield db, worker, Path(directory) / "db_worker.log"
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()


def test_a_task_runs_in_the_tasks_worker_and_survives_a_restart_of_daphne(setup):
    db, worker, log = setup
    first = DaphneServer(TRANSPORT, env=ENV, db=db).start()
    try:
        client = Modern(first.url)
        created = client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 3, "label": "far"}})
        task_id = created["result"]["taskId"]
        assert created["result"]["resultType"] == "task"
    finally:
        first.stop()  # a deploy: the web process goes away while the task runs
    second = DaphneServer(TRANSPORT, env=ENV, db=db).start()
    try:
        client = Modern(second.url)
        working = client.request("tasks/get", {"taskId": task_id})["result"]
        assert working["status"] in ("working", "completed"), working
        done = client.poll(task_id)
        assert done["status"] == "completed", (done, log.read_text()[-3000:])
        assert done["result"]["content"][0]["text"] == "Computed far in 3s"
    finally:
        second.stop()
    assert worker.poll() is None, log.read_text()[-3000:]


def test_a_queued_task_asks_the_client_and_can_be_cancelled(setup):
    db, worker, log = setup
    with DaphneServer(TRANSPORT, env=ENV, db=db) as server:
        client = Modern(server.url, elicitation={})
        task_id = client.request("tools/call", {"name": "confirm_delete", "arguments": {"path": "/q"}})[
            "result"]["taskId"]
        waiting = client.poll(task_id, until=("input_required",))
        assert list(waiting["inputRequests"]) == ["confirm"], (waiting, log.read_text()[-3000:])
        ack = client.request("tasks/update", {"taskId": task_id, "inputResponses": {
            "confirm": {"action": "accept", "content": {"ok": True}}}})
        assert ack["result"]["resultType"] == "complete"
        done = client.poll(task_id)
        assert done["result"]["content"][0]["text"] == "Deleted /q"

        slow = client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})["result"]["taskId"]
        client.poll(slow, until=("working",))
        client.request("tasks/cancel", {"taskId": slow})
        assert client.poll(slow)["status"] == "cancelled"
        # The worker stopped the work: it takes the next task at once, not in a minute.
        quick = client.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.2}})["result"]
        assert client.poll(quick["taskId"], timeout=20)["status"] == "completed", log.read_text()[-3000:]
