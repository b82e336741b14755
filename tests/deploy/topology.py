"""The deploy/ topology started for real on 127.0.0.1: nginx (deploy/nginx.conf) in front of a
tests.scaled.Cluster, plus what the tests need to see inside it: the nginx access log, the
cluster's tables, and an SSE reader that keeps what it got when a connection breaks.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from mcp_transport.testing import MODERN_VERSION, ModernCommunicator

from ..live import (
    ACCEPT_BOTH,
    ROOT,
    MCPClient,
    SSEEvent,
    SSEResult,
    free_port,
    parse_sse_lines,
)
from ..scaled import PG, Cluster

DEPLOY = ROOT / "deploy"
REDIS = ("127.0.0.1", 6379)


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        if os.access(path, os.X_OK):
            return path
    return None


def postgres_reachable() -> bool:
    try:
        with psycopg.connect(dbname="postgres", connect_timeout=3, **PG):
            return True
    except psycopg.Error:
        return False


def redis_ping() -> bool:
    try:
        with socket.create_connection(REDIS, timeout=2) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def render(listen: str, workers: list[str]) -> str:
    args = [sys.executable, str(DEPLOY / "render_nginx.py"), "--listen", listen]
    for worker in workers:
        args += ["--worker", worker]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


LOG_LINE = re.compile(
    r'^(?P<remote>\S+) \[(?P<time>[^\]]+)\] "(?P<method>\S+) (?P<path>\S+) [^"]*" (?P<status>\d+) (?P<bytes>\d+) '
    r'"(?P<agent>[^"]*)" upstream=(?P<upstream>.+?) session=(?P<session>\S+) last_event_id=(?P<last_event_id>\S+) '
    r"time=(?P<time_taken>\S+)$"
)


class Nginx:
    """`nginx -p DIR -c DIR/nginx.conf -g 'daemon off; pid DIR/nginx.pid;'` on 127.0.0.1."""

    def __init__(self, cluster: Cluster):
        self.binary = nginx_binary()
        self.cluster = cluster
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="mcp-nginx-")
        os.chmod(self.dir, 0o755)  # started as root, nginx's workers run as nobody and use tmp/
        for sub in ("logs", "tmp"):
            os.mkdir(os.path.join(self.dir, sub))
        self.conf = os.path.join(self.dir, "nginx.conf")
        Path(self.conf).write_text(render(f"127.0.0.1:{self.port}", [f"127.0.0.1:{w.port}" for w in cluster.workers]))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def access_log(self) -> str:
        return os.path.join(self.dir, "logs", "access.log")

    def command(self, *extra) -> list[str]:
        return [self.binary, "-p", self.dir, "-c", self.conf, "-g",
                f"daemon off; pid {os.path.join(self.dir, 'nginx.pid')};", *extra]

    def start(self) -> Nginx:
        self.stderr = open(os.path.join(self.dir, "logs", "stderr.log"), "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self.stderr, stderr=subprocess.STDOUT)
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.logs()}")
            try:
                # Through nginx to a worker: the app answers a GET without a session with 400.
                if httpx.get(self.url, timeout=2, headers={"Accept": "text/event-stream"}).status_code == 400:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"nginx did not start: {self.logs()}")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # fast shutdown: open connections are closed
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "stderr", None):
            self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        parts = []
        for name in ("stderr.log", "error.log"):
            try:
                parts.append(Path(self.dir, "logs", name).read_text(errors="replace"))
            except OSError:
                pass
        return "\n".join(parts)

    def entries(self) -> list[dict]:
        """The access log so far, parsed; `worker` is the index of the daphne that answered last."""
        try:
            lines = Path(self.access_log).read_text().splitlines()
        except FileNotFoundError:
            return []
        ports = {w.port: i for i, w in enumerate(self.cluster.workers)}
        entries = []
        for line in lines:
            match = LOG_LINE.match(line)
            assert match, f"unexpected access log line: {line!r}"
            entry = match.groupdict()
            upstream = entry["upstream"].split(",")[-1].strip()
            entry["worker"] = ports.get(int(upstream.rsplit(":", 1)[1])) if ":" in upstream else None
            entry["status"] = int(entry["status"])
            entries.append(entry)
        return entries

    def wait_for(self, predicate, count: int = 1) -> list[dict]:
        """The access-log entries matching `predicate`, once there are `count` of them (nginx writes
        a line when the request is finished, a moment after the client may have read the end)."""
        for _ in range(200):
            found = [e for e in self.entries() if predicate(e)]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"fewer than {count} matching access-log entries: {self.entries()}")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Tables:
    """Read-only SQL on the cluster's database, as the workers left it."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.conn = psycopg.connect(dbname=cluster.name, autocommit=True, **PG)

    def close(self):
        self.conn.close()

    def one(self, sql, params=()):
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql, params=()):
        return self.conn.execute(sql, params).fetchall()

    def stream(self, stream_id: int) -> dict:
        row = self.one("SELECT worker, connected_worker, status, last_seq, kind FROM mcp_transport_stream "
                       "WHERE id = %s", [stream_id])
        return dict(zip(("worker", "connected_worker", "status", "last_seq", "kind"), row, strict=True))

    def events(self, stream_id: int) -> list[tuple[int, str, str]]:
        return self.all("SELECT seq, kind, payload FROM mcp_transport_event WHERE stream_id = %s ORDER BY seq",
                        [stream_id])

    def connection_workers(self, stream_id: int) -> list[str]:
        """The workers of the stream's resumptions, oldest first."""
        return [w for (w,) in self.all("SELECT worker FROM mcp_transport_streamconnection WHERE stream_id = %s "
                                       "AND resumed_from IS NOT NULL ORDER BY id", [stream_id])]

    def worker_index(self, worker_id: str) -> int:
        """Which of the cluster's daphne processes a Stream.worker / Worker.id is (by its pid)."""
        pid = int(worker_id.rsplit("-", 2)[1])
        pids = [w.proc.pid for w in self.cluster.workers]
        assert pid in pids, f"{worker_id} is none of the cluster's workers {pids}"
        return pids.index(pid)


@dataclass
class Reading(SSEResult):
    error: str | None = None


def read_sse(client: MCPClient, method: str, message: dict | None = None, *, headers=None, stop=None,
             read_timeout: float = 30) -> Reading:
    """Like MCPClient.stream, but a connection that breaks (a worker killed behind nginx) keeps the
    events it delivered and says why it ended in `error`."""
    body = json.dumps(message) if message is not None else None
    hdrs = client.headers(headers, accept=ACCEPT_BOTH if method == "POST" else "text/event-stream")
    result = Reading(0, httpx.Headers())
    try:
        with client.http.stream(method, client.url, content=body, headers=hdrs,
                                timeout=httpx.Timeout(read_timeout, connect=5)) as response:
            result.status, result.headers = response.status_code, response.headers
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                result.events.append(SSEEvent(data=response.text))
                return result
            stopped = parse_sse_lines(response.iter_lines(), result, stop)
            result.closed_by_server = not stopped
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result


SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class ModernClient(MCPClient):
    """An MCP 2026-07-28 client over real HTTP: no initialize, no session. Each request carries the
    `_meta` envelope and the Mcp-* headers exactly as mcp_transport.testing.ModernCommunicator builds
    them (only its envelope and header methods are used: its ASGI application is never called).
    `agent` sets the User-Agent, which names the request in the nginx access log."""

    def __init__(self, url: str, capabilities: dict | None = None, timeout: float = 30):
        super().__init__(url, MODERN_VERSION, timeout)
        self.shape = ModernCommunicator(None, capabilities=capabilities)

    def message(self, method: str, params: dict | None = None) -> dict:
        return {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": self.shape.envelope(params)}

    def retry(self, message: dict, result: dict, answers: dict) -> dict:
        """The request an `input_required` result asks for: the same one, with the answers and the
        requestState (MRTR), under a new id."""
        params = {k: v for k, v in message["params"].items() if k not in ("inputResponses", "requestState")}
        return self.message(message["method"], {**params, "inputResponses": answers,
                                                "requestState": result["requestState"]})

    def modern_headers(self, message: dict, agent: str | None = None) -> dict:
        headers = self.shape.request_headers(message["method"], message["params"])
        if agent is not None:
            headers["User-Agent"] = agent
        return headers

    def send(self, message: dict, agent: str | None = None) -> httpx.Response:
        """A request answered with one JSON body."""
        return self.post(message, self.modern_headers(message, agent))

    def read(self, message: dict, agent: str | None = None, *, stop=None, read_timeout: float = 30) -> Reading:
        """A request answered with SSE (a listen stream, a call that reports progress)."""
        return read_sse(self, "POST", message, headers=self.modern_headers(message, agent), stop=stop,
                        read_timeout=read_timeout)


def tool_call(request_id: int, name: str, arguments: dict, token=None) -> dict:
    params = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def after_data(count: int):
    """A `stop` callback: stop reading (cut the connection) after `count` events with data."""
    seen = []

    def stop(event):
        if event.data:
            seen.append(event)
        return len(seen) >= count

    return stop


def data_events(*readings) -> list:
    return [e for r in readings for e in r.events if e.data]


def progress_of(messages) -> list:
    return [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]


def stream_of(event_id: str) -> int:
    return int(event_id.split("-")[0])


@dataclass
class Tally:
    """Loss, duplicate and order counts over many calls, against what the tables hold."""

    calls: int = 0
    expected: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    connections: int = 0
    resumes: int = 0
    client_cuts: int = 0
    server_closes: int = 0
    refused: int = 0
    problems: list = field(default_factory=list)

    def add(self, other: Tally):
        for name in ("calls", "expected", "received", "lost", "duplicated", "out_of_order", "connections",
                     "resumes", "client_cuts", "server_closes", "refused"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems += other.problems
