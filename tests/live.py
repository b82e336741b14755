"""Real daphne processes serving the example project, and a small raw MCP-over-HTTP client.

The client speaks the wire protocol by hand (httpx + its own SSE parser) so tests can see
every status, header, event id and `retry` field, and cut connections where they like.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2025-11-25"
ACCEPT_BOTH = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_template_db: dict[str, str] = {}
_temp_dirs: list[str] = []


@atexit.register
def _remove_temp_dirs():
    """Servers may share a database with the one they replace, so their folders go at exit."""
    for path in _temp_dirs + [os.path.dirname(p) for p in _template_db.values()]:
        shutil.rmtree(path, ignore_errors=True)


def migrated_db(directory: str) -> str:
    """A fresh SQLite file with the schema, copied from one migrated once per test run."""
    if "path" not in _template_db:
        template = os.path.join(tempfile.mkdtemp(prefix="mcp-template-"), "template.sqlite3")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": template}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        _template_db["path"] = template
    path = os.path.join(directory, "db.sqlite3")
    shutil.copy(_template_db["path"], path)
    return path


class DaphneServer:
    """`daphne example_project.asgi:application` on 127.0.0.1 with MCP_TRANSPORT overrides.

    `db`: serve an existing SQLite file (e.g. another, killed, server's `.db`) instead of a
    fresh copy of the migrated template. `launcher`: the module run with `python -m`, the one the
    README recommends unless told (plain "daphne" serves the same). `app`: the ASGI application.
    """

    def __init__(self, transport: dict | None = None, env: dict | None = None, db: str | None = None,
                 launcher: str = "mcp_transport.serve", app: str = "example_project.asgi:application"):
        self.launcher = launcher
        self.app = app
        self.transport = transport or {}
        self.extra_env = env or {}
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="mcp-daphne-")
        _temp_dirs.append(self.dir)
        self.db = db if db is not None else migrated_db(self.dir)
        self.log_path = os.path.join(self.dir, "daphne.log")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> "DaphneServer":
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.live_settings",
            "MCP_EXAMPLE_DB": self.db,
            "MCP_TEST_TRANSPORT": json.dumps(self.transport),
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.launcher, "-b", "127.0.0.1", "-p", str(self.port), self.app],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.logs()}")
            try:
                httpx.get(self.url, timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne did not start: {self.logs()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()

    def kill(self):
        """SIGKILL, as a crash would: no shutdown code runs."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if getattr(self, "log", None):
            self.log.close()

    def logs(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@dataclass
class SSEEvent:
    id: str | None = None
    data: str = ""
    retry: int | None = None
    event: str | None = None

    @property
    def message(self):
        return json.loads(self.data) if self.data else None


@dataclass
class SSEResult:
    """What one SSE connection delivered, and how it ended."""

    status: int
    headers: httpx.Headers
    events: list[SSEEvent] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    retry: int | None = None
    closed_by_server: bool = False

    @property
    def messages(self):
        return [e.message for e in self.events if e.data]

    @property
    def last_id(self):
        ids = [e.id for e in self.events if e.id is not None]
        return ids[-1] if ids else None


def parse_sse_lines(lines, result: SSEResult, stop=None):
    current = SSEEvent()
    data_lines: list[str] = []
    seen = False
    for line in lines:
        if line == "":
            if seen:
                current.data = "\n".join(data_lines)
                if current.id is not None or data_lines or current.event:
                    result.events.append(current)
                    if stop and stop(current):
                        return True
            current, data_lines, seen = SSEEvent(), [], False
            continue
        if line.startswith(":"):
            result.comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        seen = True
        if name == "id":
            current.id = value
        elif name == "data":
            data_lines.append(value)
        elif name == "retry" and value.isdigit():
            current.retry = int(value)
            result.retry = int(value)
        elif name == "event":
            current.event = value
    return False


class MCPClient:
    """A hand-rolled Streamable HTTP client for tests. Request ids are unique in the process: several
    clients may share one session (a request id must not be reused while it is in flight)."""

    ids = itertools.count(1)

    def __init__(self, url: str, version: str = VERSION, timeout: float = 30):
        self.url = url
        self.version = version
        self.session_id: str | None = None
        self.http = httpx.Client(timeout=timeout)

    def close(self):
        self.http.close()

    def next_id(self) -> int:
        return next(MCPClient.ids)

    def headers(self, extra=None, *, accept=ACCEPT_BOTH, version=True):
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if version and self.session_id:
            headers["MCP-Protocol-Version"] = self.version
        headers.update(extra or {})
        return headers

    def initialize(self, capabilities=None, version=None) -> dict:
        body = {
            "jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
            "params": {"protocolVersion": version or self.version, "capabilities": capabilities or {},
                       "clientInfo": {"name": "tests", "version": "1"}},
        }
        response = self.http.post(self.url, json=body, headers=self.headers())
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        result = response.json()["result"]
        self.version = result["protocolVersion"]
        self.notify("notifications/initialized")
        return result

    def post_raw(self, body: bytes | str, headers=None) -> httpx.Response:
        return self.http.post(self.url, content=body, headers=self.headers(headers))

    def post(self, message: dict, headers=None) -> httpx.Response:
        return self.post_raw(json.dumps(message), headers)

    def notify(self, method, params=None) -> httpx.Response:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert response.status_code == 202, response.text
        return response

    def request(self, method, params=None) -> dict:
        """A request answered with one JSON body (non-streaming methods)."""
        response = self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params or {}})
        assert response.status_code == 200, response.text
        return response.json()

    def stream(self, method: str, message: dict | None = None, *, headers=None, stop=None,
               read_timeout: float = 30) -> SSEResult:
        """Open an SSE response (POST with `message`, or GET) and read it until it ends or `stop(event)`."""
        body = json.dumps(message) if message is not None else None
        hdrs = self.headers(headers, accept=ACCEPT_BOTH if method == "POST" else "text/event-stream")
        timeout = httpx.Timeout(read_timeout, connect=5)
        with self.http.stream(method, self.url, content=body, headers=hdrs, timeout=timeout) as response:
            result = SSEResult(response.status_code, response.headers)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                result.events.append(SSEEvent(data=response.text))
                return result
            stopped = parse_sse_lines(response.iter_lines(), result, stop)
            result.closed_by_server = not stopped
        return result

    def call_tool(self, name, arguments=None, *, progress_token=None, **kwargs) -> tuple[int, SSEResult]:
        request_id = self.next_id()
        params = {"name": name, "arguments": arguments or {}}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return request_id, self.stream("POST", message, **kwargs)

    def resume(self, last_event_id: str, **kwargs) -> SSEResult:
        return self.stream("GET", headers={"Last-Event-ID": last_event_id}, **kwargs)

    def delete(self) -> httpx.Response:
        return self.http.delete(self.url, headers=self.headers())
