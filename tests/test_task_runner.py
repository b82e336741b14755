"""TASK_RUNNER = "django_tasks": the work runs in the Tasks framework's worker (django_tasks_db's
db_worker), not in daphne; restarting daphne mid-task loses nothing. Real processes: daphne, the
db_worker, one SQLite file (WAL) between them."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from mcp_transport.testing import ModernCommunicator

from .http_support import PROGRESS, ModernClient, open_sse, rpc
from .live import ROOT, DaphneServer, MCPClient

pytestmark = pytest.mark.timeout(180)

EXTENSION = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TRANSPORT = {"TASK_RUNNER": "django_tasks", "TASK_GRACE_SECONDS": 0}
ENV = {"MCP_TEST_TASK_RUNNER": "1"}
RELATED = "io.modelcontextprotocol/related-task"


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
def start_worker():
    """start(env) -> (SQLite file, db_worker process, its log, the environment): migrated, running."""
    started = []

    def start(extra_env: dict):
        directory = tempfile.mkdtemp(prefix="mcp-task-runner-")
        db = os.path.join(directory, "db.sqlite3")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": db, **extra_env,
               "PYTHONUNBUFFERED": "1"}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        log = open(Path(directory) / "db_worker.log", "wb")
        worker = subprocess.Popen([sys.executable, "manage.py", "db_worker", "--interval", "0.1",
                                   "--no-startup-delay", "--no-reload"], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        started.append((worker, log))
        return db, worker, Path(directory) / "db_worker.log", env

    yield start
    for worker, log in started:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()


@pytest.fixture
def setup(start_worker):
    return start_worker(ENV)[:3]


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


def redis_layer_env() -> dict:
    """daphne and the db_worker woken through channels-redis, under a prefix of this test's own."""
    return {**ENV, "MCP_TEST_REDIS_LAYER": f"mcp-test-{uuid.uuid4().hex[:8]}"}


def test_a_session_client_gets_the_progress_of_a_task_the_tasks_worker_runs(start_worker):
    env = redis_layer_env()
    db, worker, log, _ = start_worker(env)
    # No sweep of the table for missed wake-ups: what reaches the GET stream comes by the relay.
    with DaphneServer({**TRANSPORT, "WAKEUP_SWEEP_SECONDS": 600}, env=env, db=db) as server:
        client = MCPClient(server.url)
        client.initialize()
        with open_sse(client, "GET", timeout=30) as stream:
            _, created = rpc(client, "tools/call", {"name": "progress", "arguments": {"count": 4, "delay": 0.3},
                                                    "task": {}, "_meta": {"progressToken": "far"}})
            task_id = created["result"]["task"]["taskId"]
            progress = []
            while len(progress) < 4:
                message = stream.read_until(lambda m: m.get("method") == PROGRESS)
                assert message is not None, log.read_text()[-3000:]
                progress.append(message["params"])
            # Its end, said on the same stream by the Tasks worker, as a web worker's task says it.
            status = stream.read_until(lambda m: m.get("method") == "notifications/tasks/status")
            assert status is not None, log.read_text()[-3000:]
            assert status["params"]["taskId"] == task_id and status["params"]["status"] == "completed", status
        assert [p["message"] for p in progress] == ["step 1", "step 2", "step 3", "step 4"]
        assert all(p["progressToken"] == "far" and p["_meta"][RELATED] == {"taskId": task_id} for p in progress)
        _, result = rpc(client, "tasks/result", {"taskId": task_id})
        assert result["result"]["content"] == [{"type": "text", "text": "done 4"}], log.read_text()[-3000:]
        # A client that resumes its GET stream from the start gets them again: they are stored there.
        with open_sse(client, "GET", headers={"Last-Event-ID": stream.events[0].id}, timeout=10) as again:
            replayed = [again.read_until(lambda m: m.get("method") == PROGRESS)["params"] for _ in range(4)]
        assert replayed == progress
    assert worker.poll() is None, log.read_text()[-3000:]


def test_a_listen_stream_hears_the_end_of_a_task_the_tasks_worker_ran(start_worker):
    env = redis_layer_env()
    db, worker, log, _ = start_worker(env)
    with DaphneServer({**TRANSPORT, "WAKEUP_SWEEP_SECONDS": 600}, env=env, db=db) as server:
        client = ModernClient(server.url, capabilities=EXTENSION)
        task_id = client.call("slow_compute", {"seconds": 2, "label": "heard"}).result["taskId"]
        with client.listen({"taskIds": [task_id]}, timeout=30) as stream:
            ack = stream.next_message()
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}, ack
            pushed = stream.read_until(lambda m: m.get("method") == "notifications/tasks")
        assert pushed is not None, log.read_text()[-3000:]
        assert pushed["params"]["taskId"] == task_id and pushed["params"]["status"] == "completed", pushed
        assert pushed["params"]["result"] == {"content": [{"type": "text", "text": "Computed heard in 2s"}]}
    assert worker.poll() is None, log.read_text()[-3000:]


def test_the_admin_shows_the_events_of_a_modern_task_the_tasks_worker_ran(start_worker):
    db, worker, log, env = start_worker(ENV)
    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "from django.contrib.auth.models import User; User.objects.create_superuser('op', '', 'pw')"],
                   cwd=ROOT, env=env, check=True)
    with DaphneServer(TRANSPORT, env=ENV, db=db) as server:
        client = Modern(server.url)
        created = client.request("tools/call", {"name": "progress", "arguments": {"count": 3, "delay": 0.4},
                                                "_meta": {"progressToken": "p"}})["result"]
        task_id = created["taskId"]
        messages = set()
        while True:
            task = client.request("tasks/get", {"taskId": task_id})["result"]
            if task["status"] != "working":
                break
            messages.add(task.get("statusMessage"))
            time.sleep(0.1)
        assert task["status"] == "completed", (task, log.read_text()[-3000:])
        assert messages & {"step 1", "step 2", "step 3"}, messages  # its progress, in tasks/get
        base = server.url.rsplit("/mcp", 1)[0]
        admin = httpx.Client(base_url=base, timeout=30, follow_redirects=True)
        admin.get("/admin/login/")
        admin.post("/admin/login/?next=/admin/", data={
            "username": "op", "password": "pw", "csrfmiddlewaretoken": admin.cookies["csrftoken"]},
            headers={"referer": f"{base}/admin/login/"})
        page = admin.get(f"/admin/mcp_transport/task/{task_id}/change/")
        assert page.status_code == 200 and "mcp-task-events" in page.text, page.text[:2000]
        events = page.text[page.text.index('id="mcp-task-events"'):]
        for i in (1, 2, 3):
            assert f"notifications/progress {i}/3 step {i}" in events
        assert "status completed" in events and "Events (4)" in events
        timeline = page.text[page.text.index('class="mcp-timeline"'):]
        assert timeline.count('class="event message"') == 3 and timeline.count('class="event final"') == 1
