"""The admin against a real daphne of the example project, while real clients hold streams.

- In headless Chromium (Debian's `chromium`, driven by Playwright with its executable path:
  tests/browser/install.sh installs it; never `playwright install`): an operator logs in,
  opens the stream a client is reading, presses "Close connection now"; the client sees the
  server close its connection after a `retry` line, resumes with `GET` + `Last-Event-ID` and
  receives the rest and the result, nothing lost or repeated; the stream page then shows the
  reconnect and the admin's close. Screenshots of the session list, the stream list and the
  stream page go to test-output/ (MCP_UPDATE_DOCS_SCREENSHOT=1 also refreshes
  docs/admin-stream.png for the README).
- Over plain HTTP (an admin session in httpx): cancelling an in-flight request gives its
  client a JSON-RPC error, and terminating a session gives its client 404.

Without chromium or playwright the browser test is skipped, except under CI (env CI set),
where it fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import pytest

from .live import ACCEPT_BOTH, ROOT, DaphneServer, MCPClient, SSEResult, parse_sse_lines

OUTPUT = ROOT / "test-output"
DOCS_SCREENSHOT = ROOT / "docs" / "admin-stream.png"
CHROMIUM = os.environ.get("MCP_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
USERNAME, PASSWORD = "operator", "e2e-operator-password"
WAIT = 60.0  # the most any single wait below may take before the test fails (never a timing assertion)
PROGRESS = "notifications/progress"


# The server, with a superuser in its database


@pytest.fixture(scope="module")
def server():
    """daphne serving the example project (SQLite + in-memory layer, one process) with an admin user."""
    daphne = DaphneServer()
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": daphne.db,
        "DJANGO_SUPERUSER_USERNAME": USERNAME, "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        "DJANGO_SUPERUSER_EMAIL": "operator@example.com",
    }
    subprocess.run([sys.executable, "manage.py", "createsuperuser", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    with daphne:
        yield daphne
    errors = [line for line in daphne.logs().splitlines() if "Traceback" in line or re.search(r'" 5\d\d ', line)]
    assert not errors, daphne.logs()


def base_url(server) -> str:
    return f"http://127.0.0.1:{server.port}"


def wait_until(predicate, what: str, timeout: float = WAIT, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(interval)


# A client reading its SSE connections in a thread


class ToolCall(threading.Thread):
    """`tools/call` read event by event, then resumed with Last-Event-ID whenever the server closes early.

    Records every connection (its events and the raw lines, to see the closing `retry:` block).
    """

    def __init__(self, client: MCPClient, name: str, arguments: dict, *, resume=True):
        super().__init__(daemon=True)
        self.client = client
        self.request_id = client.next_id()
        self.message = {"jsonrpc": "2.0", "id": self.request_id, "method": "tools/call",
                        "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}}}
        self.resume = resume
        self.connections: list[tuple[SSEResult, list[str], str]] = []  # (result, raw lines, method)
        self.stream_id: int | None = None
        self.progress: list[int] = []
        self.first_ended = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def on_event(self, event) -> bool:
        with self.lock:
            if event.id and self.stream_id is None:
                self.stream_id = int(event.id.split("-")[0])
            message = event.message
            if message and message.get("method") == PROGRESS:
                self.progress.append(message["params"]["progress"])
        return False

    def progressed(self, count: int) -> bool:
        with self.lock:
            return len(self.progress) >= count

    def connect(self, method: str, headers=None):
        body = json.dumps(self.message) if method == "POST" else None
        hdrs = self.client.headers(headers, accept=ACCEPT_BOTH if method == "POST" else "text/event-stream")
        lines: list[str] = []

        def recorded(response):
            for line in response.iter_lines():
                lines.append(line)
                yield line

        with self.client.http.stream(method, self.client.url, content=body, headers=hdrs,
                                     timeout=httpx.Timeout(WAIT, connect=5)) as response:
            result = SSEResult(response.status_code, response.headers)
            if response.status_code == 200:
                parse_sse_lines(recorded(response), result, self.on_event)
                result.closed_by_server = True
            else:
                response.read()
                lines.append(response.text)
        self.connections.append((result, lines, method))
        return result

    @property
    def messages(self):
        return [m for result, _, _ in self.connections for m in result.messages]

    @property
    def response(self):
        answers = [m for m in self.messages if m.get("id") == self.request_id and "method" not in m]
        return answers[-1] if answers else None

    def run(self):
        try:
            result = self.connect("POST")
            self.first_ended.set()
            while self.resume and self.response is None and result.status == 200 and result.last_id:
                time.sleep((result.retry or 1000) / 1000)  # the client honours the server's retry
                result = self.connect("GET", {"Last-Event-ID": result.last_id})
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            self.error = exc
        finally:
            self.first_ended.set()
            self.done.set()

    def finish(self):
        assert self.done.wait(WAIT), "the tool call never ended"
        if self.error is not None:
            raise self.error


def ends_with_retry_block(lines: list[str]) -> int | None:
    """The `retry` value of a bare `retry:` block closing the connection, if that is how it ended."""
    tail = [line for line in lines[-3:]]
    while tail and tail[-1] == "":
        tail.pop()
    if tail and re.fullmatch(r"retry: \d+", tail[-1]) and (len(tail) < 2 or tail[-2] == ""):
        return int(tail[-1].split(": ")[1])
    return None


@pytest.fixture
def mcp(server):
    clients = []

    def make():
        client = MCPClient(server.url)
        client.initialize()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


# The admin over HTTP (no browser)


class AdminHTTP:
    """A logged-in admin session over httpx (cookies, CSRF token), against the live server."""

    def __init__(self, server):
        self.http = httpx.Client(base_url=base_url(server), timeout=WAIT)
        login = self.http.get("/admin/login/")
        assert login.status_code == 200
        response = self.http.post("/admin/login/", data={
            "username": USERNAME, "password": PASSWORD, "next": "/admin/", "csrfmiddlewaretoken": self.token})
        assert response.status_code == 302 and response.headers["location"] == "/admin/", response.text

    @property
    def token(self) -> str:
        return self.http.cookies["csrftoken"]

    def post(self, path: str, data=None) -> httpx.Response:
        return self.http.post(path, data={**(data or {}), "csrfmiddlewaretoken": self.token})

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def close(self):
        self.http.close()


@pytest.fixture
def admin_http(server):
    session = AdminHTTP(server)
    yield session
    session.close()


def test_cancel_from_the_admin_gives_the_client_an_error(mcp, admin_http):
    call = ToolCall(mcp(), "progress", {"count": 400, "delay": 0.05}, resume=False)
    call.start()
    wait_until(lambda: call.progressed(3), "the first progress notifications")
    response = admin_http.post(f"/admin/mcp_transport/stream/{call.stream_id}/cancel/", {"confirm": "yes"})
    assert response.status_code == 302
    call.finish()
    result, _, _ = call.connections[0]
    assert call.response == {
        "jsonrpc": "2.0", "id": call.request_id,
        "error": {"code": -32800, "message": "Request cancelled by an operator",
                  "data": {"reason": "Cancelled by an operator"}},
    }
    assert len(call.progress) < 400  # the tool stopped
    page = admin_http.get(f"/admin/mcp_transport/stream/{call.stream_id}/change/").text
    assert "mcp-cancelled" in page
    final = admin_http.get(f"/admin/mcp_transport/event/?stream__id__exact={call.stream_id}&kind=final").text
    assert "error -32800 for id" in final and "Request cancelled by an operator" in final
    # The error is the stream's final event: a resume replays it.
    client = call.client
    replay = client.resume(f"{call.stream_id}-0")
    assert replay.messages[-1]["error"]["code"] == -32800


def test_terminate_from_the_admin_ends_the_session(mcp, admin_http):
    client = mcp()
    call = ToolCall(client, "progress", {"count": 400, "delay": 0.05}, resume=False)
    call.start()
    wait_until(lambda: call.progressed(2), "the first progress notifications")
    response = admin_http.post(f"/admin/mcp_transport/session/{client.session_id}/terminate/", {"confirm": "yes"})
    assert response.status_code == 302
    call.finish()  # the connection was ended by the server
    assert call.connections[0][0].closed_by_server and call.response is None
    assert client.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).status_code == 404
    assert client.resume(f"{call.stream_id}-0").status == 404
    page = admin_http.get(f"/admin/mcp_transport/session/{client.session_id}/change/").text
    assert "mcp-terminated" in page


# The browser


def browser_or_fail():
    """Playwright's sync API and the chromium binary, or skip (fail under CI)."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright, problem = None, "the playwright package is not installed (requirements-test.txt)"
    if problem is None and not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        problem = f"{CHROMIUM} is missing: run tests/browser/install.sh"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the browser test: {problem}")
        pytest.skip(problem)
    return sync_playwright


def screenshot(page, name: str):
    OUTPUT.mkdir(exist_ok=True)
    path = OUTPUT / name
    page.screenshot(path=str(path), full_page=True)
    return path


def logged_in(playwright, profile: str, base: str, viewport: dict, *, sidebar: bool = True):
    """Chromium at this viewport, the operator logged in to the admin: (context, page)."""
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS, viewport=viewport,
        device_scale_factor=1)
    if not sidebar:
        context.add_init_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    context.set_default_timeout(WAIT * 1000)
    page = context.new_page()
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    return context, page


def test_close_connection_in_the_browser_and_the_client_resumes(server, mcp):
    sync_playwright = browser_or_fail()
    base = base_url(server)
    client = mcp()
    profile = tempfile.mkdtemp(prefix="mcp-chromium-")
    call = None
    try:
        with sync_playwright() as playwright:
            # The admin's navigation sidebar folded: more room for the lists in the screenshots.
            context, page = logged_in(playwright, profile, base, {"width": 1360, "height": 860}, sidebar=False)

            page.goto(f"{base}/admin/mcp_transport/session/")
            row = page.locator("#result_list tbody tr", has=page.locator(f"span[title='{client.session_id}']"))
            assert row.count() == 1 and "tests 1" in row.inner_text() and "active" in row.inner_text()
            screenshot(page, "admin-sessions.png")

            # A real client holds a resumable stream: a long tool call, read event by event.
            call = ToolCall(client, "progress", {"count": 300, "delay": 0.05})
            call.start()
            wait_until(lambda: call.progressed(5), "the first progress notifications")
            stream_id = call.stream_id

            page.goto(f"{base}/admin/mcp_transport/stream/?state=active")
            in_row = f"th a[href*='/mcp_transport/stream/{stream_id}/change/']"
            stream_row = page.locator("#result_list tbody tr", has=page.locator(in_row))
            link = stream_row.locator(in_row)
            assert "connected now" in stream_row.inner_text() and "progress" in stream_row.inner_text()
            screenshot(page, "admin-streams.png")

            stream_page = f"/mcp_transport/stream/{stream_id}/change/"
            link.first.click()
            page.wait_for_url(lambda url: stream_page in url)
            assert page.locator("svg.mcp-timeline rect.conn.live").count() == 1
            assert call.first_ended.is_set() is False  # still reading its first connection
            with page.expect_navigation():
                page.click("#mcp-close-connection")
            assert stream_page in page.url
            assert "Closing the connection of stream" in page.locator("ul.messagelist").inner_text()

            # The client: closed by the server with a retry line, resumed, got everything once.
            call.finish()
            (first, first_lines, _), (second, _, method) = call.connections[0], call.connections[1]
            assert first.closed_by_server and ends_with_retry_block(first_lines) == 1000
            assert all(m.get("id") != call.request_id for m in first.messages)
            assert method == "GET" and second.status == 200
            assert second.events[0].id == f"{stream_id}-{int(first.last_id.split('-')[1]) + 1}"
            assert call.progress == list(range(1, 301))
            assert call.response["result"]["content"] == [{"type": "text", "text": "done 300"}]
            assert len(call.connections) == 2

            # The stream page tells the story: the admin's close, one reconnect, completed.
            def page_shows_the_reconnect():
                page.reload()
                reasons = page.locator("#mcp-connections td.mcp-reason").all_inner_texts()
                return sorted(reasons) == ["admin", "completed"] and \
                    f"{stream_id}-" in page.locator("#mcp-connections").inner_text() and \
                    page.locator(".field-reconnects .readonly").inner_text().strip() == "1" and \
                    page.locator("#mcp-timeline .mcp-badge").inner_text() == "completed"

            wait_until(page_shows_the_reconnect, "the stream page to show the reconnect", interval=0.3)
            svg = page.locator("svg.mcp-timeline")
            assert svg.locator("path.reconnect").count() == 1
            assert svg.locator("line.disconnect").count() == 1 and "admin" in svg.inner_html()
            assert svg.locator("line.event").count() == 302  # priming, 300 progress, the response
            path = screenshot(page, "admin-stream-page.png")
            if os.environ.get("MCP_UPDATE_DOCS_SCREENSHOT") == "1":
                DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
                page.screenshot(path=str(DOCS_SCREENSHOT), full_page=False)
            assert path.stat().st_size > 10_000
            context.close()
    finally:
        if call is not None:
            call.done.wait(WAIT)
        shutil.rmtree(profile, ignore_errors=True)


# The operator's reading of states and tasks (issue 17, point 17; the Tasks page)


NARROW = {"width": 1400, "height": 900}  # a laptop: the lists keep their state column on screen
TIME_TO_THE_SECOND = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def twin(server, client: MCPClient) -> MCPClient:
    """A second connection pool on the same session (to notify while the first one reads)."""
    other = MCPClient(server.url)
    other.session_id, other.version = client.session_id, client.version
    return other


def stream_ids_of(client: MCPClient, messages) -> list[int]:
    return sorted({int(e.id.split("-")[0]) for e in messages if e.id})


def call_events(client: MCPClient, name: str, arguments: dict, **params):
    """A `tools/call` read to its end over SSE: its events."""
    message = {"jsonrpc": "2.0", "id": client.next_id(), "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "t"}, **params}}
    result = client.stream("POST", message, read_timeout=WAIT)
    assert result.status == 200
    return result


def task_status(client: MCPClient, task_id: str) -> str:
    return client.request("tasks/get", {"taskId": task_id})["result"]["status"]


def column_on_screen(page, column: str) -> bool:
    """The column's header lies wholly within the viewport and within the list's own box (which
    scrolls sideways: what lies past its edge is hidden until the operator scrolls)."""
    header = page.locator(f"#result_list thead th.column-{column}").bounding_box()
    visible = page.locator("#changelist .results").bounding_box()
    assert header is not None and visible is not None, f"no {column} column"
    right = min(page.viewport_size["width"], visible["x"] + visible["width"])
    return header["x"] >= visible["x"] and header["x"] + header["width"] <= right


def test_states_tasks_and_narrow_lists_in_the_browser(server, mcp):
    """At 1,400 px with the navigation sidebar open: the state columns on screen; the Resumable tab
    lists only what a client can resume; a DELETEd session's streams say how they ended; detail
    pages show times to the second; a task's page shows its timeline, and the operator cancels one."""
    sync_playwright = browser_or_fail()
    base = base_url(server)

    # A session whose client completed a call, cancelled another, then DELETEd it (a failed stream, ended
    # by a tool's crash, is in test_admin.py: here the server's log must stay free of tracebacks).
    done = mcp()
    completed = stream_ids_of(done, call_events(done, "progress", {"count": 2, "delay": 0}).events)[0]
    cancelling = ToolCall(done, "progress", {"count": 400, "delay": 0.05}, resume=False)
    cancelling.start()
    wait_until(lambda: cancelling.progressed(2), "the call to cancel to progress")
    canceller = twin(server, done)
    canceller.notify("notifications/cancelled", {"requestId": cancelling.request_id, "reason": "user pressed stop"})
    canceller.close()
    cancelling.finish()
    cancelled = cancelling.stream_id
    assert done.delete().status_code == 200

    # A session with a stream its client left (resumable) and one it reads (connected now).
    live = mcp()
    left = live.stream("POST", {"jsonrpc": "2.0", "id": live.next_id(), "method": "tools/call",
                                "params": {"name": "progress", "arguments": {"count": 600, "delay": 0.05},
                                           "_meta": {"progressToken": "left"}}},
                       stop=lambda event: bool(event.message))
    resumable = int(left.last_id.split("-")[0])
    reading = ToolCall(live, "progress", {"count": 600, "delay": 0.05}, resume=False)
    reading.start()
    wait_until(lambda: reading.progressed(2), "the connected call to progress")
    connected = reading.stream_id

    # Tasks: one that ran to its end with progress, one working for the operator to cancel.
    tasks_client = mcp()
    created = call_events(tasks_client, "progress", {"count": 5, "delay": 0.02}, task={"ttl": 60000}).messages
    finished_task = next(m for m in created if "result" in m)["result"]["task"]["taskId"]
    wait_until(lambda: task_status(tasks_client, finished_task) == "completed", "the task to complete")
    result = tasks_client.stream("POST", {"jsonrpc": "2.0", "id": tasks_client.next_id(), "method": "tasks/result",
                                          "params": {"taskId": finished_task}}, read_timeout=WAIT)
    assert result.messages[-1]["result"]["content"] == [{"type": "text", "text": "done 5"}]
    working = call_events(tasks_client, "slow_compute", {"seconds": 120, "label": "to cancel"},
                          task={"ttl": 60000}).messages
    working_task = next(m for m in working if "result" in m)["result"]["task"]["taskId"]

    profile = tempfile.mkdtemp(prefix="mcp-chromium-")
    try:
        with sync_playwright() as playwright:
            context, page = logged_in(playwright, profile, base, NARROW)

            # The lists at 1,400 px, the sidebar open: the state columns within the viewport.
            page.goto(f"{base}/admin/mcp_transport/session/")
            assert page.locator("#nav-sidebar").is_visible()
            assert column_on_screen(page, "state")
            screenshot(page, "admin-sessions-1400.png")
            page.goto(f"{base}/admin/mcp_transport/stream/")
            assert column_on_screen(page, "state")
            screenshot(page, "admin-streams-1400.png")

            def listed() -> dict[int, str]:
                rows = {}
                for row in page.locator("#result_list tbody tr").all():
                    href = row.locator("th a").first.get_attribute("href")
                    stream_id = int(re.search(r"/stream/(\d+)/change/", href).group(1))
                    rows[stream_id] = row.locator("td.field-state").inner_text().strip()
                return rows

            # The Resumable tab: what a client can resume, nothing else.
            page.click("a.mcp-tab[data-state=resumable]")
            page.wait_for_url(lambda url: "state=resumable" in url)
            shown = listed()
            assert shown.get(resumable) == "resumable"
            assert not {connected, completed, cancelled} & set(shown), shown
            assert set(shown.values()) == {"resumable"}
            page.click("a.mcp-tab[data-state=connected]")
            page.wait_for_url(lambda url: "state=connected" in url)
            assert listed().get(connected) == "connected now"

            # The DELETEd session's streams keep how they ended.
            page.goto(f"{base}/admin/mcp_transport/stream/?session__id__exact={done.session_id}")
            assert {k: v for k, v in listed().items() if k in (completed, cancelled)} == {
                completed: "completed", cancelled: "cancelled"}
            screenshot(page, "admin-streams-deleted-session.png")

            # Detail pages: times to the second.
            page.goto(f"{base}/admin/mcp_transport/stream/{completed}/change/")
            for label in ("Created at", "Finished at"):
                value = page.locator(".form-row", has=page.locator(f"label:text-is('{label}:')")).locator(".readonly")
                assert TIME_TO_THE_SECOND.fullmatch(value.inner_text().strip()), value.inner_text()
            page.goto(f"{base}/admin/mcp_transport/session/{done.session_id}/change/")
            terminated = page.locator(".form-row", has=page.locator("label:text-is('Terminated at:')"))
            assert TIME_TO_THE_SECOND.fullmatch(terminated.locator(".readonly").inner_text().strip())

            # The finished task's page: its timeline of events, the progress among them.
            page.goto(f"{base}/admin/mcp_transport/task/?status__exact=completed")
            page.locator("#result_list tbody tr th a", has_text=finished_task[:13]).first.click()
            page.wait_for_url(lambda url: f"/task/{finished_task}/change/" in url)
            svg = page.locator("#mcp-timeline svg.mcp-timeline")
            assert svg.locator("line.event.message").count() == 5  # five progress notifications
            assert svg.locator("line.event.final").count() == 1  # its end: completed
            events = page.locator("#mcp-task-events").inner_text()
            assert "notifications/progress 5/5 step 5" in events and "status completed" in events
            created_at = page.locator(".form-row", has=page.locator("label:text-is('Created at:')"))
            assert TIME_TO_THE_SECOND.fullmatch(created_at.locator(".readonly").inner_text().strip())
            screenshot(page, "admin-task-page.png")

            # The working task: listed as working, cancelled by the operator, its client told so.
            page.goto(f"{base}/admin/mcp_transport/task/?status__exact=working")
            page.locator("#result_list tbody tr th a", has_text=working_task[:13]).first.click()
            page.wait_for_url(lambda url: f"/task/{working_task}/change/" in url)
            assert page.locator("svg.mcp-timeline rect.conn.live").count() == 1
            page.click("#mcp-cancel-task")
            page.wait_for_url(lambda url: f"/task/{working_task}/cancel/" in url)
            with page.expect_navigation():
                page.click("#mcp-confirm")
            assert "Cancelled task" in page.locator("ul.messagelist").inner_text()
            assert task_status(tasks_client, working_task) == "cancelled"
            page.goto(f"{base}/admin/mcp_transport/task/?status__exact=cancelled")
            assert working_task[:13] in page.locator("#result_list").inner_text()
            context.close()
    finally:
        reading.done.wait(WAIT)
        shutil.rmtree(profile, ignore_errors=True)


def test_a_connection_of_a_killed_worker_is_not_connected_now():
    """Two daphnes on one database; the one holding a client's GET stream is killed (-9): once its
    heartbeat is older than LEASE_SECONDS, the other's admin no longer shows the stream connected."""
    transport = {"LEASE_SECONDS": 1.5}
    admin_server = DaphneServer(transport)
    env = {**os.environ, **admin_server.db_env(), "DJANGO_SUPERUSER_USERNAME": USERNAME,
           "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "DJANGO_SUPERUSER_EMAIL": "operator@example.com"}
    subprocess.run([sys.executable, "manage.py", "createsuperuser", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    cut: list[Exception] = []
    with admin_server, DaphneServer(transport, db=admin_server.db) as doomed:
        client = MCPClient(doomed.url)
        client.initialize()

        def hold_the_get_stream():
            try:
                client.stream("GET", read_timeout=WAIT)
            except httpx.TransportError as exc:  # its server killed mid-stream
                cut.append(exc)

        reader = threading.Thread(target=hold_the_get_stream, daemon=True)
        reader.start()
        admin = AdminHTTP(admin_server)
        try:
            def state_of_get_stream() -> str:
                page = admin.get(f"/admin/mcp_transport/stream/?session__id__exact={client.session_id}"
                                 "&kind__exact=standalone").text
                found = re.findall(r'<td class="field-state"><span class="mcp-badge mcp-([a-z-]+)"', page)
                return found[0] if len(found) == 1 else ""

            wait_until(lambda: state_of_get_stream() == "connected-now", "the GET stream to be connected")
            doomed.kill()
            reader.join(WAIT)
            assert len(cut) == 1 and not reader.is_alive()
            wait_until(lambda: state_of_get_stream() == "resumable", "the GET stream of the killed worker to be "
                                                                      "resumable", interval=0.3)
            page = admin.get(f"/admin/mcp_transport/stream/?session__id__exact={client.session_id}").text
            assert "worker gone" in page
        finally:
            admin.close()
            client.close()
