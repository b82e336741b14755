"""Interoperability: software nobody here wrote, driving a real daphne serving the example project.

- the official conformance suite (`@modelcontextprotocol/conformance`, all 32 server scenarios);
- the official Python SDK client, `mcp` 1.x (this venv) and `mcp` 2.x (a venv of its own);
- the official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.32.x) on Node 22;
- the MCP Inspector CLI.

The node packages and the mcp 2.x venv are installed by tests/interop/install.sh into a cache dir
outside the repository ($MCP_INTEROP_HOME, default ~/.cache/mcp-transport-interop); the session
fixtures below run it (it returns at once when the lock files' hashes match the last install).
Missing tooling (npm, or an install that fails) skips these tests with the reason, except when the
environment variable CI is set: then it fails them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import pytest

from .live import MCPClient

HERE = Path(__file__).resolve().parent
INTEROP = HERE / "interop"
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")

# First use installs the node packages (~20 s); everything after that is a few seconds per test.
pytestmark = pytest.mark.timeout(300)

AFTER_PRIMING = {"DISCONNECT_POLICY": "after_priming", "RETRY_MS": 100}
PROGRESS_COUNT = 50
PROGRESS_DELAY = 0.02

CONFORMANCE_SCENARIOS = 32
# Conformance check statuses that fail the test. (The suite itself exits 1 only on FAILURE.)
BAD_STATUSES = ("FAILURE", "WARNING")


def unavailable(reason: str):
    """Missing third-party tooling: a failure under CI, a skip elsewhere."""
    if IN_CI:
        pytest.fail(f"interop tooling unavailable (CI is set, so this fails): {reason}", pytrace=False)
    pytest.skip(f"interop tooling unavailable: {reason} (set CI=1 to make this a failure)")


def run_install(part: str) -> dict[str, str]:
    """Run tests/interop/install.sh PART and return the KEY=VALUE lines it ends with."""
    if not shutil.which("bash"):
        unavailable("bash not found")
    env = {**os.environ}
    # The mcp 2.x venv is built from the interpreter running the tests unless told otherwise.
    env.setdefault("MCP_INTEROP_PYTHON", sys.executable)
    try:
        proc = subprocess.run(["bash", str(INTEROP / "install.sh"), part], env=env, capture_output=True,
                              text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        unavailable(f"tests/interop/install.sh {part} timed out: {exc.stderr!s:.2000}")
    if proc.returncode != 0:
        unavailable(f"tests/interop/install.sh {part} failed (exit {proc.returncode}):\n"
                    f"{proc.stderr[-3000:]}{proc.stdout[-1000:]}")
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if re.match(r"^MCP_INTEROP_\w+=", line))
    print(proc.stderr, end="")
    return values


@pytest.fixture(scope="session")
def node_tools():
    """The node packages from tests/interop/package-lock.json, and an environment with Node 22 first on PATH."""
    if not shutil.which("npm") or not shutil.which("npx"):
        unavailable("npm/npx not found on PATH (Node 22 itself comes from the npm package node@22)")
    values = run_install("node")
    node_dir = Path(values["MCP_INTEROP_NODE_DIR"])
    node_bin = Path(values["MCP_INTEROP_NODE_BIN"])
    env = {
        **os.environ,
        "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "MCP_INTEROP_NODE_DIR": str(node_dir),
        "npm_config_update_notifier": "false",
        "npm_config_yes": "false",
        "NO_COLOR": "1",
    }
    version = subprocess.run(["node", "--version"], env=env, capture_output=True, text=True, check=True).stdout
    assert version.startswith("v22."), f"node first on PATH is {version!r}, not Node 22 from node@22"
    return {"dir": node_dir, "bin": node_bin, "node": str(node_bin / "node"), "env": env}


@pytest.fixture(scope="session")
def mcp2_python():
    """The interpreter of the separate venv holding mcp 2.x."""
    values = run_install("mcp2")
    python = values["MCP_INTEROP_MCP2_PYTHON"]
    if not os.access(python, os.X_OK):
        unavailable(f"{python} is not executable")
    return python


def npx(tools, *args, timeout=120) -> subprocess.CompletedProcess:
    """`npx --no -- ARGS` in the install dir: only the locally installed packages, never a download.

    (`--` keeps npm from reading the package's own options, such as the Inspector's --cli, as its own.)
    """
    return subprocess.run(["npx", "--no", "--", *args], cwd=tools["dir"], env=tools["env"], capture_output=True,
                          text=True, timeout=timeout)


def last_json_line(stdout: str):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output:\n{stdout[-3000:]}")


def server_tool_names(url: str) -> list[str]:
    client = MCPClient(url)
    try:
        client.initialize()
        return [tool["name"] for tool in client.request("tools/list")["result"]["tools"]]
    finally:
        client.delete()
        client.close()


def access_log(server) -> list[tuple[str, int]]:
    """(method, status) of every request daphne logged for /mcp."""
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r'"(GET|POST|DELETE|PUT|PATCH|OPTIONS|HEAD) /mcp" (\d{3})', server.logs())]


# a. The official conformance suite ---------------------------------------------------------------

SCENARIO_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_conformance_results(out_dir: Path) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {}
    for checks_file in sorted(out_dir.glob("*/checks.json")):
        match = SCENARIO_DIR.match(checks_file.parent.name)
        name = match.group("name") if match else checks_file.parent.name
        results.setdefault(name, []).extend(json.loads(checks_file.read_text()))
    return results


def conformance_table(results: dict[str, list[dict]]) -> str:
    statuses = ["SUCCESS", "FAILURE", "WARNING", "INFO"]
    others = sorted({c.get("status") for checks in results.values() for c in checks} - set(statuses) - {None})
    columns = statuses + others
    width = max([len("scenario")] + [len(name) for name in results])
    lines = [f"{'scenario':<{width}}  " + "  ".join(f"{c:>7}" for c in columns) + "  verdict"]
    for name, checks in results.items():
        counts = [sum(1 for c in checks if c.get("status") == column) for column in columns]
        bad = [f"{c.get('status')}: {c.get('id')}" for c in checks if c.get("status") in BAD_STATUSES]
        verdict = "ok" if not bad else "; ".join(bad)
        lines.append(f"{name:<{width}}  " + "  ".join(f"{n:>7}" for n in counts) + f"  {verdict}")
    return "\n".join(lines)


def test_conformance_suite_all_server_scenarios(node_tools, daphne):
    server = daphne()
    listed = npx(node_tools, "conformance", "list", "--server")
    assert listed.returncode == 0, listed.stderr
    expected = re.findall(r"^\s*-\s+(\S+)", listed.stdout, re.M)
    assert len(expected) == CONFORMANCE_SCENARIOS, listed.stdout

    out_dir = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    run = npx(node_tools, "conformance", "server", "--url", server.url, "--suite", "all", "-o", str(out_dir))
    results = read_conformance_results(out_dir)
    table = conformance_table(results)
    print(f"\nconformance suite 0.1.16 against {server.url} (exit {run.returncode}):\n{table}")

    bad = {name: [(c.get("status"), c.get("id"), c.get("errorMessage") or c.get("description"))
                  for c in checks if c.get("status") in BAD_STATUSES]
           for name, checks in results.items()}
    bad = {name: checks for name, checks in bad.items() if checks}
    assert not bad, f"conformance FAILURE/WARNING checks:\n{json.dumps(bad, indent=1)}\n{table}"
    assert sorted(results) == sorted(expected), (
        f"{len(results)} scenarios ran, expected {CONFORMANCE_SCENARIOS}: "
        f"missing {sorted(set(expected) - set(results))}\n{run.stdout[-3000:]}{run.stderr[-2000:]}")
    assert len(results) == CONFORMANCE_SCENARIOS
    no_success = [name for name, checks in results.items() if not any(c.get("status") == "SUCCESS" for c in checks)]
    assert not no_success, f"scenarios that checked nothing: {no_success}\n{table}"
    # server-sse-polling only tests anything when test_reconnection really closed its stream.
    polling = {c.get("id"): c.get("status") for c in results["server-sse-polling"]}
    for check in ("server-sse-priming-event", "server-sse-retry-field", "server-sse-disconnect-resume"):
        assert polling.get(check) == "SUCCESS", f"server-sse-polling: {check} -> {polling.get(check)}\n{table}"
    assert run.returncode == 0, f"conformance exited {run.returncode}:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"


# b. The official Python SDK client, mcp 1.x ------------------------------------------------------

class RecordingHTTP:
    """httpx event hooks noting each request's method and Last-Event-ID (requests run concurrently)."""

    def __init__(self):
        self.requests: list[dict] = []

    async def on_request(self, request: httpx.Request):
        self.requests.append({"method": request.method, "last_event_id": request.headers.get("last-event-id")})

    @property
    def resumes(self) -> list[str]:
        return [r["last_event_id"] for r in self.requests if r["method"] == "GET" and r["last_event_id"]]


def py_client(url: str, recorder: RecordingHTTP):
    """The SDK's streamable HTTP client (`streamable_http_client`, formerly `streamablehttp_client`)."""
    from mcp.client import streamable_http

    timeout = httpx.Timeout(30, read=60)
    hooks = {"request": [recorder.on_request]}
    if hasattr(streamable_http, "streamable_http_client"):
        http = httpx.AsyncClient(timeout=timeout, event_hooks=hooks)
        return http, streamable_http.streamable_http_client(url, http_client=http)

    def factory(headers=None, timeout=timeout, auth=None):
        return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, event_hooks=hooks)

    return None, streamable_http.streamablehttp_client(url, httpx_client_factory=factory)


async def py_session_run(url: str, body, **session_options):
    """Open a mcp 1.x ClientSession on `url`, initialize it, run `await body(session)`; return (result, recorder)."""
    from mcp import ClientSession

    recorder = RecordingHTTP()
    http, transport = py_client(url, recorder)
    with anyio.fail_after(90):  # a hang guard, not a timing assertion
        async with transport as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, **session_options) as session:
                init = await session.initialize()
                assert init.protocolVersion == "2025-11-25"
                result = await body(session)
        if http is not None:
            await http.aclose()
    return result, recorder


def tool_text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def test_python_sdk_progress_after_priming(daphne):
    server = daphne(AFTER_PRIMING)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def call(session):
        return await session.call_tool("progress", {"count": PROGRESS_COUNT, "delay": PROGRESS_DELAY},
                                       read_timeout_seconds=timedelta(seconds=60), progress_callback=on_progress)

    result, recorder = await py_session_run(server.url, call)
    assert not result.isError, result
    assert tool_text(result) == f"done {PROGRESS_COUNT}"
    assert [value for value, _, _ in progress] == list(range(1, PROGRESS_COUNT + 1)), progress
    assert all(total == PROGRESS_COUNT for _, total, _ in progress)
    assert [message for _, _, message in progress] == [f"step {i}" for i in range(1, PROGRESS_COUNT + 1)]
    # The policy really cut connections: the client resumed with GET + Last-Event-ID.
    assert recorder.resumes, (recorder.requests, server.logs()[-3000:])


async def test_python_sdk_tool_closes_its_own_stream(example_server):
    """Default policy: only `test_reconnection`'s own close_sse_stream(); the result comes on the resumed GET."""
    async def call(session):
        return await session.call_tool("test_reconnection", {}, read_timeout_seconds=timedelta(seconds=60))

    result, recorder = await py_session_run(example_server.url, call)
    assert not result.isError, result
    assert tool_text(result) == "Reconnection test completed successfully"
    assert recorder.resumes, recorder.requests


async def test_python_sdk_list_tools_and_echo(example_server):
    async def body(session):
        tools = await session.list_tools()
        echoed = await session.call_tool("echo", {"message": "héllo, wörld"})
        return tools, echoed

    (tools, echoed), _ = await py_session_run(example_server.url, body)
    names = [tool.name for tool in tools.tools]
    assert {"echo", "progress", "test_simple_text", "test_reconnection"} <= set(names), names
    assert not echoed.isError
    assert tool_text(echoed) == "héllo, wörld"


@pytest.mark.filterwarnings("ignore:The experimental tasks API is deprecated:DeprecationWarning")
async def test_python_sdk_1x_experimental_tasks(example_server):
    """The mcp 1.x client's experimental task API (2025-11-25): a task-augmented call, polls, its
    result, a list, a cancel, and an elicitation the task asks while it runs."""
    import mcp.types as types

    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def body(session):
        tasks = session.experimental
        created = await tasks.call_tool_as_task("progress", {"count": 3, "delay": 0.05}, ttl=60_000)
        task_id = created.task.taskId
        statuses = [status.status async for status in tasks.poll_task(task_id)]
        result = await tasks.get_task_result(task_id, types.CallToolResult)
        listed = await tasks.list_tasks()
        slow = await tasks.call_tool_as_task("slow_compute", {"seconds": 30})
        cancelled = await tasks.cancel_task(slow.task.taskId)
        asking = await tasks.call_tool_as_task("confirm_delete", {"path": "/srv/old"})
        confirmed = await tasks.get_task_result(asking.task.taskId, types.CallToolResult)
        return created, statuses, result, listed, cancelled, confirmed

    (created, statuses, result, listed, cancelled, confirmed), _ = await py_session_run(
        example_server.url, body, elicitation_callback=on_elicit)
    assert created.task.status == "working" and created.task.ttl == 60_000
    assert statuses[-1] == "completed"
    assert tool_text(result) == "done 3"
    assert created.task.taskId in [t.taskId for t in listed.tasks]
    assert cancelled.status == "cancelled"
    assert asked == ["Delete /srv/old?"] and tool_text(confirmed) == "Deleted /srv/old"


async def _open_page(url: str) -> int:
    """What the user's browser does on the page a URL elicitation leads to: open it, press Done."""
    async with httpx.AsyncClient(timeout=30) as browser:
        page = await browser.get(url)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return (await browser.post(url, data={"csrfmiddlewaretoken": token})).status_code


async def test_python_sdk_1x_url_elicitation_and_its_completion(example_server):
    """mcp 1.x declares URL mode with an elicitation callback: it gets the URL and the id, gets
    -32042 as its UrlElicitationRequiredError, and `notifications/elicitation/complete` once the
    page (served by the same daphne, a Django view) is done."""
    import mcp.types as types
    from mcp.shared.exceptions import McpError, UrlElicitationRequiredError

    asked, completed = [], anyio.Event()
    notified: list[str] = []

    async def on_elicit(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept")

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(message.root,
                                                                          types.ElicitCompleteNotification):
            notified.append(message.root.params.elicitationId)
            completed.set()

    async def body(session):
        opened = await session.call_tool("open_settings_page", {})
        try:
            await session.call_tool("connect_account", {})
        except McpError as exc:
            required = UrlElicitationRequiredError.from_error(exc.error)
        else:
            raise AssertionError("connect_account did not answer -32042")
        status = await _open_page(required.elicitations[0].url)
        with anyio.fail_after(20):
            await completed.wait()
        connected = await session.call_tool("connect_account", {})
        return opened, required, status, connected

    (opened, required, status, connected), _ = await py_session_run(
        example_server.url, body, elicitation_callback=on_elicit, message_handler=on_message)
    (url_params,) = asked
    assert isinstance(url_params, types.ElicitRequestURLParams) and url_params.mode == "url"
    assert url_params.url.startswith(example_server.url.rsplit("/mcp", 1)[0] + "/connect/settings-")
    assert tool_text(opened) == f"action=accept elicitationId={url_params.elicitationId} completed=False"
    (elicitation,) = required.elicitations
    assert required.error.code == -32042 and elicitation.elicitationId.startswith("connect-")
    assert status == 200 and notified == [elicitation.elicitationId]
    assert tool_text(connected) == "Your account is connected."


async def test_python_sdk_1x_sampling_with_tools(example_server):
    """mcp 1.x with `sampling_capabilities` declaring tools: its callback gets the tools, answers
    with a tool use, then gets the tool result in the conversation and answers in text."""
    import mcp.types as types

    seen: list = []

    async def on_sample(context, params):
        seen.append(params)
        if len(seen) == 1:
            return types.CreateMessageResultWithTools(
                role="assistant", model="interop-model", stopReason="toolUse",
                content=[types.ToolUseContent(type="tool_use", id="call-1", name="get_weather",
                                              input={"city": "Lima"})])
        result = params.messages[-1].content_as_list[0]
        return types.CreateMessageResult(role="assistant", model="interop-model", stopReason="endTurn",
                                         content=types.TextContent(type="text",
                                                                   text=f"Lima: {result.content[0].text}"))

    async def body(session):
        return await session.call_tool("weather_agent", {"question": "Weather in Lima?"})

    result, _ = await py_session_run(
        example_server.url, body, sampling_callback=on_sample,
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()))
    first, second = seen
    assert [tool.name for tool in first.tools] == ["get_weather"] and first.toolChoice.mode == "auto"
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[-1].content_as_list[0].toolUseId == "call-1"
    assert not result.isError and tool_text(result) == "Lima: cloudy, 18 C"


# c. The official TypeScript SDK client ------------------------------------------------------------

def test_typescript_sdk_progress_after_priming(node_tools, daphne):
    server = daphne(AFTER_PRIMING)
    proc = subprocess.run(
        [node_tools["node"], str(INTEROP / "ts_progress_client.mjs"), server.url, str(PROGRESS_COUNT),
         str(PROGRESS_DELAY)],
        env=node_tools["env"], capture_output=True, text=True, timeout=120,
    )
    out = last_json_line(proc.stdout)
    report = json.dumps({k: v for k, v in out.items() if k != "progress"})[:4000]
    assert out["sdkVersion"].startswith("1.32."), out["sdkVersion"]
    assert out["ok"], f"{out.get('error')}\n{report}\n{proc.stderr[-2000:]}"
    assert proc.returncode == 0, proc.stderr
    assert out["protocolVersion"] == "2025-11-25"
    assert not out["isError"]
    assert out["text"] == f"done {PROGRESS_COUNT}"
    assert len(out["progress"]) == PROGRESS_COUNT and len(set(out["progress"])) == PROGRESS_COUNT, out["progress"]
    assert out["progress"] == list(range(1, PROGRESS_COUNT + 1)), out["progress"]
    gets = [r for r in out["requests"] if r["method"] == "GET"]
    assert any(r["lastEventId"] for r in gets), f"the POST stream was never resumed: {report}"
    # Only the first (standalone) GET may lack Last-Event-ID: a later one means a resumed connection
    # closed before carrying an event id, and the TS client then loses the call.
    assert all(r["lastEventId"] for r in gets[1:]), f"GET reconnected without Last-Event-ID: {report}"
    # (A request without a status was still in flight when the script closed the client: the
    # standalone GET stream's reconnection racing the DELETE.)
    assert all(r["status"] in (200, 202) for r in out["requests"] if "status" in r), report


def run_ts2(node_tools, url: str, mode: str) -> dict:
    proc = subprocess.run([node_tools["node"], str(INTEROP / "ts2_client.mjs"), url, mode],
                          env=node_tools["env"], capture_output=True, text=True, timeout=120)
    out = last_json_line(proc.stdout)
    out["stderr"] = proc.stderr[-2000:]
    return out


@pytest.mark.parametrize("mode, era", [("pin", "2026-07-28"), ("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_typescript_client_2x_in_each_mode(node_tools, daphne, mode, era):
    """@modelcontextprotocol/client 2.x pinned to 2026-07-28, in auto mode and in its default
    (legacy) mode: tools, progress, logs, an elicitation, a resource, a prompt; a listen stream in
    the modern era."""
    server = daphne()
    out = run_ts2(node_tools, server.url, mode)
    report = json.dumps({k: v for k, v in out.items() if k != "tools"}, indent=1)[:6000]
    assert out["clientVersion"].startswith("2."), out["clientVersion"]
    assert out["ok"], f"{out.get('error')}\n{report}"
    assert out["protocolVersion"] == era, report
    assert out["echo"] == "hello from ts 2.x" and out["progressResult"] == "done 3", report
    assert [p[0] for p in out["progress"]] == [1, 2, 3], report
    assert out["logs"] == ["Tool execution started", "Tool processing data", "Tool execution completed"], report
    assert out["elicited"] == ["Who are you?"] and "username-value" in out["elicitResult"], report
    assert out["resource"].startswith("This is the content") and out["prompt"], report
    if era == "2026-07-28":
        assert out["honored"] == {"toolsListChanged": True} and out["event"] == "tools/list_changed", report
        assert not any(e["sessionHeader"] or e.get("sessionIdAssigned") for e in out["exchanges"]), report
        assert out["exchanges"][0]["rpcMethod"] == "server/discover", report
    else:
        assert out["exchanges"][0]["rpcMethod"] == "initialize", report
        assert out["exchanges"][0]["sessionIdAssigned"], report


# The conformance suite's pre-release line, one revision at a time ----------------------------------

CONFORMANCE_NEXT = "node_modules/conformance-next/dist/index.js"


def skipped_by_the_suite(checks: list[dict]) -> bool:
    """A scenario the suite itself does not run yet (every check SKIPPED with its reason)."""
    return bool(checks) and all(c.get("status") == "SKIPPED" for c in checks)


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_conformance_pre_release_line_by_revision(node_tools, daphne, revision):
    """`--requirements REVISION` of @modelcontextprotocol/conformance 0.2.0-alpha.12: every scenario
    that revision requires (scored), every pending one and the tasks extension's (run, not scored),
    with no FAILURE and no WARNING."""
    server = daphne()
    out_dir = Path(tempfile.mkdtemp(prefix=f"mcp-conformance-{revision}-"))
    run = subprocess.run([node_tools["node"], CONFORMANCE_NEXT, "server", "--url", server.url,
                          "--requirements", revision, "-o", str(out_dir)],
                         cwd=node_tools["dir"], env=node_tools["env"], capture_output=True, text=True, timeout=600)
    results = read_conformance_results(out_dir)
    table = conformance_table(results)
    print(f"\nconformance 0.2.0-alpha.12 --requirements {revision} against {server.url} "
          f"(exit {run.returncode}):\n{table}")
    assert "0.2.0-alpha.12" in subprocess.run([node_tools["node"], CONFORMANCE_NEXT, "--version"],
                                              cwd=node_tools["dir"], env=node_tools["env"], capture_output=True,
                                              text=True).stdout
    judged = {name: checks for name, checks in results.items() if not skipped_by_the_suite(checks)}
    bad = {name: [(c.get("status"), c.get("id"), c.get("errorMessage") or c.get("description"))
                  for c in checks if c.get("status") in BAD_STATUSES]
           for name, checks in judged.items()}
    bad = {name: checks for name, checks in bad.items() if checks}
    assert not bad, f"conformance FAILURE/WARNING checks:\n{json.dumps(bad, indent=1)}\n{table}"
    if revision == "2026-07-28":
        ran_tasks = [name for name in judged if name.startswith("tasks-")]
        assert len(ran_tasks) >= 9, f"tasks extension scenarios judged: {ran_tasks}\n{table}"
    minimum = 46 if revision == "2026-07-28" else 30
    assert len(judged) >= minimum, f"only {len(judged)} scenarios ran\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    no_success = [name for name, checks in judged.items() if not any(c.get("status") == "SUCCESS" for c in checks)]
    assert not no_success, f"scenarios that checked nothing: {no_success}\n{table}"
    assert run.returncode == 0, f"conformance exited {run.returncode}:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"


def test_typescript_sdk_1x_experimental_tasks(node_tools, daphne):
    """The TypeScript SDK 1.x client's experimental task API (2025-11-25): a task-augmented call
    streamed from taskCreated to its result, polled, listed, one cancelled, and one that asks the
    user (elicitation) while it runs."""
    server = daphne()
    proc = subprocess.run([node_tools["node"], str(INTEROP / "ts_tasks_client.mjs"), server.url],
                          env=node_tools["env"], capture_output=True, text=True, timeout=120)
    out = last_json_line(proc.stdout)
    assert out["ok"], f"{out.get('error')}\n{json.dumps(out)[:3000]}\n{proc.stderr[-2000:]}"
    assert out["protocolVersion"] == "2025-11-25"
    assert out["streamed"][0] == "taskCreated" and out["streamed"][-1] == "result", out
    assert out["result"] == "done 3" and out["polled"] == "completed" and out["listed"], out
    assert out["cancelled"] == "cancelled", out
    assert out["elicited"] == ["Delete /srv/old?"] and out["askingResult"] == "Deleted /srv/old", out


def test_typescript_sdk_1x_url_elicitation_and_sampling_with_tools(node_tools, daphne):
    """The TypeScript SDK 1.x client on a session: the sampling tool loop; a URL elicitation with
    its id; -32042 as its UrlElicitationRequiredError; notifications/elicitation/complete once the
    example's page is done (and only for that id); the call then served."""
    server = daphne()
    proc = subprocess.run([node_tools["node"], str(INTEROP / "ts_url_and_tools_client.mjs"), server.url],
                          env=node_tools["env"], capture_output=True, text=True, timeout=120)
    out = last_json_line(proc.stdout)
    report = json.dumps(out)[:3000]
    assert out["ok"], f"{out.get('error')}\n{report}\n{proc.stderr[-2000:]}"
    assert out["protocolVersion"] == "2025-11-25"
    assert out["sampled"] == [
        {"tools": ["get_weather"], "toolChoice": {"mode": "auto"}, "roles": ["user"]},
        {"tools": ["get_weather"], "toolChoice": {"mode": "auto"}, "roles": ["user", "assistant", "user"]}], report
    assert out["toolResult"] == {"toolUseId": "ts-1", "text": "sunny, 21 C"} and out["weather"] == "Paris: sunny, 21 C"
    (opened,) = out["elicited"]
    assert opened["mode"] == "url" and opened["elicitationId"].startswith("settings-"), report
    assert out["opened"] == f"action=accept elicitationId={opened['elicitationId']} completed=False", report
    required = out["required"]
    assert required["code"] == -32042 and required["mode"] == "url", report
    assert out["pages"] == [200] and out["completed"] == [required["elicitationId"]], report
    assert out["connect"] == "Your account is connected.", report


# d. The MCP Inspector CLI -------------------------------------------------------------------------

def test_inspector_cli_lists_tools(node_tools, example_server):
    proc = npx(node_tools, "@modelcontextprotocol/inspector", "--cli", example_server.url, "--method", "tools/list")
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    listing = json.loads(proc.stdout[proc.stdout.index("{"):])
    names = [tool["name"] for tool in listing["tools"]]
    assert {"echo", "progress", "test_simple_text"} <= set(names), names
    assert names == server_tool_names(example_server.url)


# e. The official Python SDK client, mcp 2.x: auto (probing), pinned to 2026-07-28, legacy ----------

@pytest.mark.parametrize("mode, era", [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"),
                                       ("legacy", "2025-11-25")])
def test_python_sdk_2x_in_each_mode(mcp2_python, daphne, mode, era):
    """Auto mode's probe (server/discover) finds 2026-07-28 here and stays there; every mode gets
    tools, progress, logs, an elicitation (MRTR in the modern era), a resource and a prompt; the
    modern modes also get a listen stream that receives a tools list change another request made."""
    server = daphne()
    proc = subprocess.run([mcp2_python, str(INTEROP / "mcp2_client.py"), server.url, mode],
                          capture_output=True, text=True, timeout=120)
    out = last_json_line(proc.stdout)
    report = json.dumps(out, indent=1)[:6000]
    assert out["mcpVersion"].startswith("2."), out["mcpVersion"]
    assert out["ok"], f"{out.get('error')}\n{report}\n{proc.stderr[-2000:]}"
    assert out["mode"] == mode and out["protocolVersion"] == era, report
    assert {"echo", "progress", "test_simple_text"} <= set(out["tools"]), out["tools"]
    assert out["echo"] == "hello from mcp 2.x" and not out["echoIsError"]
    assert out["progress"] == [[1.0, 3.0, "step 1"], [2.0, 3.0, "step 2"], [3.0, 3.0, "step 3"]], report
    assert out["logs"] == ["Tool execution started", "Tool processing data", "Tool execution completed"], report
    assert out["elicited"] == ["Who are you?"] and "username-value" in out["elicitResult"], report
    assert out["resource"].startswith("This is the content") and out["prompt"], report
    sessions = [e for e in out["exchanges"] if e.get("sessionIdAssigned")]
    if era == "2026-07-28":
        assert out["honored"] == {"toolsListChanged": True} and out["event"] == "ToolsListChanged", report
        assert not sessions and not any(e["sessionHeader"] for e in out["exchanges"]), report
        assert all(e["protocolVersionHeader"] == "2026-07-28" for e in out["exchanges"]), report
        if mode == "auto":
            probe = out["exchanges"][0]
            assert probe["rpcMethod"] == "server/discover" and probe["status"] == 200, report
    else:
        assert sessions and out["exchanges"][0]["rpcMethod"] == "initialize", report


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_python_sdk_2x_url_elicitation_and_sampling_with_tools(mcp2_python, daphne, mode):
    """mcp 2.x in each era: the sampling tool loop (its callback gets the tools, then the tool
    result); connect_account completed through the example's page: on 2026-07-28 within the
    input_required rounds the SDK drives (a URL elicitation without an id, no notification), on a
    session after -32042 and the completion notification."""
    server = daphne()
    proc = subprocess.run([mcp2_python, str(INTEROP / "mcp2_url_and_tools.py"), server.url, mode],
                          capture_output=True, text=True, timeout=120)
    out = last_json_line(proc.stdout)
    report = json.dumps(out, indent=1)[:6000]
    assert out["ok"], f"{out.get('error')}\n{report}\n{proc.stderr[-2000:]}"
    assert out["sampled"] == [{"tools": ["get_weather"], "roles": ["user"]},
                              {"tools": ["get_weather"], "roles": ["user", "assistant", "user"]}], report
    assert out["toolResult"] == {"toolUseId": "call-1", "text": "snow, -3 C"}, report
    assert out["weather"] == "Oslo: snow, -3 C", report
    assert out["connect"] == "Your account is connected." and out["pages"] == [200], report
    (asked,) = out["urls"]
    assert asked["mode"] == "url" and "/connect/connect-" in asked["url"], report
    if mode == "legacy":
        assert out["protocolVersion"] == "2025-11-25", report
        assert out["firstConnect"]["code"] == -32042 and out["completed"] == [asked["elicitationId"]], report
    else:
        assert out["protocolVersion"] == "2026-07-28" and "firstConnect" not in out, report
        assert asked["elicitationId"] is None and out["completed"] == [], report
