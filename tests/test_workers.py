"""Any request of a session may land on any worker: PostgreSQL + Redis, two daphne processes."""
import concurrent.futures
import json
import time

import pytest

from .live import DaphneServer, MCPClient
from .scaled import Cluster


@pytest.fixture(scope="module")
def cluster():
    with Cluster(workers=2) as c:
        yield c


def on(worker, session_from: MCPClient | None = None, **kwargs) -> MCPClient:
    client = MCPClient(worker.url, **kwargs)
    if session_from is not None:
        client.session_id, client.version = session_from.session_id, session_from.version
    return client


def test_session_created_on_one_worker_works_on_the_other(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize()
    other = on(b, client)
    request_id, result = other.call_tool("echo", {"message": "from b"})
    assert result.messages[-1]["result"]["content"][0]["text"] == "from b"
    assert other.delete().status_code == 200
    assert on(a, client).post({"jsonrpc": "2.0", "id": 9, "method": "ping"}).status_code == 404


def test_stream_started_on_a_resumes_live_on_b(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize()
    seen = []

    def stop(event):
        seen.append(event)
        return len([e for e in seen if e.data]) >= 5

    request_id, first = client.call_tool("progress", {"count": 40, "delay": 0.02}, progress_token="p", stop=stop)
    rest = on(b, client).resume(first.last_id)
    messages = first.messages + rest.messages
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, 41))
    assert messages[-1] == {"jsonrpc": "2.0", "id": request_id,
                            "result": {"content": [{"type": "text", "text": "done 40"}]}}
    ids = [e.id for e in first.events + rest.events if e.id and e.data]
    assert len(ids) == len(set(ids))


def test_elicitation_answered_through_the_other_worker(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize(capabilities={"elicitation": {}})
    answer_via_b = on(b, client)
    answered = []

    def stop(event):
        message = event.message
        if message and message.get("method") == "elicitation/create":
            response = answer_via_b.post({"jsonrpc": "2.0", "id": message["id"],
                                          "result": {"action": "accept",
                                                     "content": {"username": "ann", "email": "a@x"}}})
            answered.append(response.status_code)
        return bool(message and "result" in message)

    request_id, result = client.call_tool("test_elicitation", {"message": "who?"}, stop=stop)
    assert answered == [202]
    text = result.messages[-1]["result"]["content"][0]["text"]
    assert "accept" in text and "ann" in text


def test_cancellation_through_the_other_worker(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize()
    cancel_via_b = on(b, client)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = []

        def stop(event):
            if event.data and not started:
                started.append(event)
                cancel_via_b.notify("notifications/cancelled", {"requestId": 1000, "reason": "test"})
            return False

        def call():
            message = {"jsonrpc": "2.0", "id": 1000, "method": "tools/call",
                       "params": {"name": "progress", "arguments": {"count": 500, "delay": 0.02},
                                  "_meta": {"progressToken": "c"}}}
            return client.stream("POST", message, stop=stop, read_timeout=20)

        result = pool.submit(call).result(timeout=30)
    assert result.closed_by_server
    assert not any("result" in m or "error" in m for m in result.messages)
    assert len(result.messages) < 500


def test_notifications_reach_the_get_stream_held_by_another_worker(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize()
    client.request("resources/subscribe", {"uri": "test://watched-resource"})
    holder = on(b, client)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        got = pool.submit(holder.stream, "GET", stop=lambda e: bool(e.data), read_timeout=20)
        time.sleep(0.5)
        client.call_tool("update_resource", {"uri": "test://watched-resource"})
        result = got.result(timeout=30)
    assert result.status == 200
    assert result.messages == [{"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                "params": {"uri": "test://watched-resource"}}]


def test_the_worker_running_a_task_answers_polls_from_memory_yet_sees_at_once_what_the_other_changed(cluster):
    """2026-07-28: a task runs on worker a, which answers its polls from memory (an out-of-band write
    to its row is not seen at once). An answer and a cancel sent through worker b are acknowledged
    only once a heard them: the very next poll on a says so."""
    import psycopg

    from .http_support import ModernClient
    from .scaled import PG

    a, b = cluster.workers
    capabilities = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
    on_a, on_b = ModernClient(a.url, capabilities), ModernClient(b.url, capabilities)

    def get(client):
        return client.request("tasks/get", {"taskId": task_id}).result

    task_id = on_a.call("multi_input").result["taskId"]
    deadline = time.monotonic() + 10
    while get(on_a)["status"] != "input_required":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with psycopg.connect(dbname=cluster.name, autocommit=True, **PG) as db:
        for attempt in range(10):
            marker = f"out of band {attempt}"
            get(on_a)
            db.execute("UPDATE mcp_transport_task SET status_message = %s WHERE id = %s", (marker, task_id))
            if get(on_a).get("statusMessage") != marker:
                break
        else:
            pytest.fail("worker a never answered a poll from memory")
        assert get(on_b).get("statusMessage") == marker
    get(on_a)
    answered = on_b.request("tasks/update", {"taskId": task_id, "inputResponses": {
        "first_name": {"action": "accept", "content": {"name": "Ada"}}}})
    assert answered.result["resultType"] == "complete"
    assert set(get(on_a)["inputRequests"]) == {"last_name"}
    get(on_a)
    assert on_b.request("tasks/cancel", {"taskId": task_id}).result["resultType"] == "complete"
    assert get(on_a)["status"] == "cancelled"


def test_resuming_on_b_closes_the_old_connection_on_a(cluster):
    a, b = cluster.workers
    client = on(a)
    client.initialize()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        seen = []

        def first_stop(event):
            seen.append(event)
            return False

        old = pool.submit(client.call_tool, "progress", {"count": 60, "delay": 0.02}, progress_token="x",
                          stop=first_stop)
        while not any(e.data for e in seen):
            time.sleep(0.02)
        last_id = [e.id for e in seen if e.id][-1]
        resumed = on(b, client).resume(last_id)
        request_id, replaced = old.result(timeout=30)
    assert replaced.closed_by_server and replaced.retry is not None
    assert not any("result" in m for m in replaced.messages)
    assert resumed.messages[-1]["id"] == request_id and "result" in resumed.messages[-1]


def test_kill_9_of_the_worker_running_a_call_fails_the_call_cleanly():
    """The lease of the dead worker's request runs out; the resumed client gets an error, not a hang."""
    import signal

    with Cluster(workers=2, transport={"LEASE_SECONDS": 1.5}) as c:
        a, b = c.workers
        client = on(a)
        client.initialize()
        seen = []

        def stop(event):
            seen.append(event)
            return len([e for e in seen if e.data]) >= 3

        request_id, first = client.call_tool("progress", {"count": 200, "delay": 0.05}, progress_token="k", stop=stop)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        resumed = on(b, client).resume(first.last_id, read_timeout=20)
        final = resumed.messages[-1]
        assert final["id"] == request_id and final["error"]["data"]["reason"] == "worker_lost"
        progress = [m["params"]["progress"] for m in first.messages + resumed.messages
                    if m.get("method") == "notifications/progress"]
        assert progress == list(range(1, len(progress) + 1))
        again = on(b, client)
        again_id, echo = again.call_tool("echo", {"message": "still here"})
        assert echo.messages[-1]["result"]["content"][0]["text"] == "still here"


@pytest.mark.parametrize("launcher", ["mcp_transport.serve", "uvicorn"])
def test_sigterm_closes_connections_with_retry_and_fails_only_what_outlives_the_grace_period(launcher):
    import signal

    with Cluster(workers=2, transport={"SHUTDOWN_GRACE_SECONDS": 1.5, "RETRY_MS": 200}, launcher=launcher) as c:
        a, b = c.workers
        client = on(a)
        client.initialize()
        calls = {"short": {"count": 8, "delay": 0.1}, "long": {"count": 200, "delay": 0.05}}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = {name: [] for name in calls}
            futures = {
                name: pool.submit(on(a, client).call_tool, "progress", args, progress_token=name,
                                  stop=lambda e, n=name: started[n].append(e) or False)
                for name, args in calls.items()
            }
            while not all(any(e.data for e in events) for events in started.values()):
                time.sleep(0.02)
            a.proc.send_signal(signal.SIGTERM)
            first = {name: f.result(timeout=30)[1] for name, f in futures.items()}
        assert a.proc.wait(timeout=30) is not None
        for name, result in first.items():
            assert result.closed_by_server and result.retry == 200, name
            assert not any("result" in m or "error" in m for m in result.messages), name
        outcome = {}
        for name, result in first.items():
            rest = on(b, client).resume(result.last_id, read_timeout=20)
            messages = result.messages + rest.messages
            progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
            assert progress == list(range(1, len(progress) + 1)), name
            outcome[name] = messages[-1]
        assert outcome["short"]["result"]["content"][0]["text"] == "done 8"
        assert outcome["long"].get("error", {}).get("data", {}).get("reason") == "worker_shutdown", outcome["long"]
        again_id, echo = on(b, client).call_tool("echo", {"message": "after the deploy"})
        assert echo.messages[-1]["result"]["content"][0]["text"] == "after the deploy"


def test_a_url_elicitation_completed_on_the_other_worker_reaches_the_session_on_this_one(cluster):
    """The page a URL elicitation led to is served by worker b (a Django view, any process); the
    session's GET stream is held by worker a: the notification is stored for the session and
    Redis wakes a. A second session on a hears nothing of it."""
    import re
    from urllib.parse import urlsplit

    import httpx

    from .http_support import open_sse

    a, b = cluster.workers
    client, bystander = on(a), on(a)
    client.initialize(capabilities={"elicitation": {"url": {}}})
    bystander.initialize(capabilities={"elicitation": {"url": {}}})
    asked = []

    def stop(event):
        message = event.message
        if message and message.get("method") == "elicitation/create":
            asked.append(message["params"])
            client.post({"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept"}})
        return bool(message and "result" in message)

    client.call_tool("open_settings_page", {}, stop=stop)
    (params,) = asked
    page = b.url.rsplit("/mcp", 1)[0] + urlsplit(params["url"]).path
    with open_sse(client, "GET", timeout=20) as listening, open_sse(bystander, "GET", timeout=3) as other:
        with httpx.Client(timeout=20) as browser:
            form = browser.get(page)
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            assert browser.post(page, data={"csrfmiddlewaretoken": token}).status_code == 200
        heard = listening.read_until(lambda m: m.get("method") == "notifications/elicitation/complete")
        assert heard == {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                         "params": {"elicitationId": params["elicitationId"]}}
        try:
            stray = other.read_until(lambda m: "elicitation" in json.dumps(m))
        except httpx.ReadTimeout:
            stray = None
        assert stray is None


def worker_pids(cluster: Cluster) -> set[int]:
    import psycopg

    from .scaled import PG

    with psycopg.connect(dbname=cluster.name, autocommit=True, **PG) as conn:
        return {row[0] for row in conn.execute("SELECT pid FROM mcp_transport_worker WHERE NOT stopping")}


def test_gunicorn_with_two_uvicorn_workers_serves_sessions_and_hands_them_over_on_sigterm():
    """`gunicorn -k uvicorn_worker.UvicornWorker -w 2` on PostgreSQL + Redis, beside a daphne: both
    workers heartbeat from their lifespan startup, a session's calls land on either, and SIGTERM to
    gunicorn's master closes the streams in flight with `retry`, so they finish through the daphne."""
    import signal

    with Cluster(workers=0, transport={"SHUTDOWN_GRACE_SECONDS": 1.5, "RETRY_MS": 200}) as c:
        gunicorn = c.add("gunicorn", processes=2)
        deadline = time.monotonic() + 20
        while len(worker_pids(c)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        pids = worker_pids(c)
        assert len(pids) == 2 and gunicorn.proc.pid not in pids, pids
        daphne = c.add("mcp_transport.serve")
        client = on(gunicorn)
        client.initialize()
        for n in range(8):
            _, echo = on(gunicorn, client).call_tool("echo", {"message": f"call {n}"})
            assert echo.messages[-1]["result"]["content"][0]["text"] == f"call {n}"
        started = []
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(on(gunicorn, client).call_tool, "progress", {"count": 8, "delay": 0.1},
                                 progress_token="deploy", stop=lambda e: started.append(e) or False)
            while not any(e.data for e in started):
                time.sleep(0.02)
            gunicorn.proc.send_signal(signal.SIGTERM)
            request_id, first = future.result(timeout=30)
        assert first.closed_by_server and first.retry == 200
        assert not any("result" in m or "error" in m for m in first.messages)
        rest = on(daphne, client).resume(first.last_id, read_timeout=20)
        assert rest.messages[-1] == {"jsonrpc": "2.0", "id": request_id,
                                     "result": {"content": [{"type": "text", "text": "done 8"}]}}
        assert gunicorn.proc.wait(timeout=30) == 0
        assert "Other MCP workers" not in gunicorn.logs()


def test_gunicorn_with_two_workers_and_the_in_memory_layer_warns():
    """No CHANNEL_LAYERS and two processes on one database: what one worker tells the other is lost,
    and the workers' heartbeats say so in the log."""
    with DaphneServer(launcher="gunicorn", workers=2) as server:
        deadline = time.monotonic() + 30
        while "Other MCP workers serve this database" not in server.logs() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "Other MCP workers serve this database" in server.logs(), server.logs()[-3000:]
        assert "channel layer is in-memory" in server.logs()


def test_gunicorn_preload_is_refused_at_startup():
    """Loaded once in gunicorn's master and forked, every worker would carry the same worker id."""
    server = DaphneServer(launcher="gunicorn", workers=2, args=("--preload",))
    try:
        with pytest.raises(RuntimeError, match="gunicorn exited"):
            server.start()
    finally:
        server.stop()
    assert "no --preload" in server.logs(), server.logs()[-3000:]
