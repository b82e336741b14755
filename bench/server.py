"""The example project under daphne, as the bench serves it: 127.0.0.1, a free port, pinned to a
CPU when there are two, a fresh database each time (a copy of one migrated template), stopped
and its database removed afterwards."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .dbtool import DBTool

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = "bench.settings"
APP = "example_project.asgi:application"
FLOOR = "bench.floor:app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinning() -> tuple[int | None, int | None]:
    """(server CPU, client CPU): 0 and 1 when there are two CPUs and taskset; else no pinning."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None, None
    if len(cpus) >= 2 and shutil.which("taskset"):
        return cpus[0], cpus[1]
    return None, None


def _migrate(env: dict[str, str], root: Path = ROOT):
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=root,
                   env={**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, **env}, check=True, timeout=300)


class SQLiteDatabases:
    """A migrated template file; each server gets a copy in its own temp directory."""

    vendor = "sqlite"

    def __init__(self, root: Path = ROOT):
        self.dir = tempfile.mkdtemp(prefix="mcp-bench-")
        self.template = os.path.join(self.dir, "template.sqlite3")
        _migrate({"MCP_EXAMPLE_DB": self.template}, root)
        self.count = 0

    def new(self) -> dict[str, str]:
        self.count += 1
        path = os.path.join(self.dir, f"db{self.count}.sqlite3")
        shutil.copy(self.template, path)
        return {"MCP_EXAMPLE_DB": path}

    def drop(self, env: dict[str, str]):
        path = env["MCP_EXAMPLE_DB"]
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.remove(path + suffix)
            except FileNotFoundError:
                pass

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class PostgresDatabases:
    """A migrated template database on 127.0.0.1; each server gets `CREATE DATABASE ... TEMPLATE`.
    Connection settings: MCP_PG_HOST/PORT/USER/PASSWORD, as example_project.settings_scaled reads them.
    Redis (the scaled settings' channel layer and cache) gets its own key prefix per server."""

    vendor = "postgres"

    def __init__(self, root: Path = ROOT):
        import psycopg

        self.psycopg = psycopg
        self.pg = dict(host=os.environ.get("MCP_PG_HOST", "127.0.0.1"), port=os.environ.get("MCP_PG_PORT", "5432"),
                       user=os.environ.get("MCP_PG_USER", "postgres"),
                       password=os.environ.get("MCP_PG_PASSWORD", ""))
        self.prefix = f"mcp_bench_{secrets.token_hex(4)}"
        self.names: list[str] = []
        self.template = f"{self.prefix}_tpl"
        self._execute(f'CREATE DATABASE "{self.template}"')
        self.names.append(self.template)
        _migrate(self._env(self.template), root)
        self.count = 0

    def _execute(self, sql: str):
        with self.psycopg.connect(dbname="postgres", autocommit=True, connect_timeout=10, **self.pg) as conn:
            conn.execute(sql)

    def _env(self, name: str) -> dict[str, str]:
        return {"MCP_BENCH_DB": "postgres", "MCP_PG_NAME": name, "MCP_REDIS_PREFIX": name}

    def new(self) -> dict[str, str]:
        self.count += 1
        name = f"{self.prefix}_{self.count}"
        self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self.names.append(name)
        return self._env(name)

    def drop(self, env: dict[str, str]):
        name = env["MCP_PG_NAME"]
        self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self.names:
            self.names.remove(name)
        self._clear_redis(name)

    def _clear_redis(self, prefix: str):
        try:
            import redis

            client = redis.Redis.from_url(os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0"),
                                          socket_timeout=5)
            keys = []
            for key in client.scan_iter(match=f"{prefix}*", count=1000):
                keys.append(key)
                if len(keys) >= 100_000:
                    break
            for i in range(0, len(keys), 1000):
                client.delete(*keys[i:i + 1000])
            client.close()
        except Exception as exc:  # noqa: BLE001 (best effort: the keys expire anyway)
            print(f"bench: could not clear Redis keys {prefix}*: {exc}", file=sys.stderr)

    def close(self):
        for name in list(self.names):
            try:
                self.drop({"MCP_PG_NAME": name})
            except Exception as exc:  # noqa: BLE001
                print(f"bench: could not drop database {name}: {exc}", file=sys.stderr)


def databases(kind: str, root: Path = ROOT):
    """Fresh databases migrated by the checkout at `root` (another commit's, for a comparison)."""
    return PostgresDatabases(root) if kind == "postgres" else SQLiteDatabases(root)


class ServerProcess:
    """A server process the bench started on 127.0.0.1 (`port`, `proc`, `log_path`): its URL and
    PID, its log, and stopping it (terminate, then kill)."""

    port: int
    proc: subprocess.Popen | None = None
    log_path: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def _failed(self, what: str):
        """Stop, clean up, and raise with the end of the log (the log file itself is removed)."""
        self.stop()
        logs = self.logs()
        self.remove_log()
        raise RuntimeError(f"{what}: {logs[-3000:]}")

    def logs(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def remove_log(self):
        if self.log_path:
            try:
                os.remove(self.log_path)
            except OSError:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class BenchServer(ServerProcess):
    """`python -m mcp_transport.serve -v 0 -b 127.0.0.1 -p PORT example_project.asgi:application` with
    bench.settings (`launcher="daphne"`: plain daphne; `launcher="uvicorn"`: uvicorn, one process, its
    default loop and HTTP parser; `app=FLOOR`: the bare app, no database), from the checkout at `root`;
    `env`: more environment variables for the server; `wrapper`: a command the server runs under
    (valgrind)."""

    def __init__(self, dbs, transport: dict | None = None, cpu: int | None = None, start_timeout: float = 60,
                 launcher: str = "mcp_transport.serve", app: str = APP, root: Path = ROOT, env: dict | None = None,
                 wrapper: list[str] | None = None):
        self.root = root
        self.extra_env = env or {}
        self.wrapper = wrapper or []
        self.dbs = dbs
        self.app = app
        self.launcher = launcher
        self.transport = transport or {}
        self.cpu = cpu
        self.start_timeout = start_timeout
        self.port = free_port()
        self.db_env: dict[str, str] | None = None
        self._log = None

    @property
    def env(self) -> dict[str, str]:
        return {"DJANGO_SETTINGS_MODULE": SETTINGS, "MCP_BENCH_TRANSPORT": json.dumps(self.transport),
                **(self.db_env or {}), **self.extra_env}

    def dbtool(self) -> DBTool:
        return DBTool(self.env, self.dbs.vendor)

    def start(self) -> "BenchServer":
        self.db_env = self.dbs.new() if self.app == APP else {}
        fd, self.log_path = tempfile.mkstemp(prefix="mcp-bench-daphne-", suffix=".log")
        self._log = os.fdopen(fd, "wb")
        command = [*self.wrapper, sys.executable, "-m", self.launcher, *self.options(), self.app]
        if self.cpu is not None:
            command = ["taskset", "-c", str(self.cpu), *command]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen(command, cwd=self.root, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._failed(f"{self.launcher} exited with {self.proc.returncode}")
            if self._answers():
                return self
            time.sleep(0.1)
        self._failed(f"{self.launcher} did not answer within {self.start_timeout}s")

    def options(self) -> list[str]:
        if self.launcher == "uvicorn":
            return ["--log-level", "warning", "--no-access-log", "--host", "127.0.0.1", "--port", str(self.port)]
        return ["-v", "0", "-b", "127.0.0.1", "-p", str(self.port)]

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n\r\n".encode())
                return s.recv(16).startswith(b"HTTP/1.")
        except OSError:
            return False

    def stop(self):
        super().stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.db_env:
            self.dbs.drop(self.db_env)
            self.db_env = None
