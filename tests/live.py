"""Real daphne processes serving the example project, and a small raw MCP-over-HTTP client.

The client speaks the wire protocol by hand (httpx + its own SSE parser) so tests can see
every status, header, event id and `retry` field, and cut connections where they like.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
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


def suite_database() -> dict | None:
    """The database server the suite runs on (`pytest --ds=tests.settings_postgres` or
    `tests.settings_mariadb`: pytest-django's settings), or None for SQLite, and outside pytest.

    The daphne processes the tests start then serve a database of their own on that server
    (`ServerDatabases`), with the connection settings `tests.settings.server_database` chose, so the
    HTTP batteries meet the same column types, lengths and NUL rules as a deployment on it.
    `MCP_TEST_LIVE_DB=sqlite` keeps them on SQLite whatever the suite's settings.
    """
    if os.environ.get("MCP_TEST_LIVE_DB") == "sqlite":
        return None
    try:
        from django.conf import settings

        default = settings.DATABASES["default"]
    except Exception:  # Django not configured: a script, the bench
        return None
    engine = default.get("ENGINE", "")
    if engine.endswith("sqlite3"):
        return None
    if not engine.endswith(("postgresql", "mysql")):
        raise RuntimeError(f"tests/live.py cannot give daphne a database on {engine}")
    return default


class ServerDatabases:
    """One database per daphne on the suite's database server, each a copy of one migrated once
    per run (PostgreSQL: CREATE DATABASE ... TEMPLATE; MariaDB: the template's CREATE TABLE
    statements and rows). Named mcp_live_<checkout>_<pid>_<n>, dropped at exit; ones left by a
    run that died (its pid gone) are dropped when the next run of this checkout starts."""

    def __init__(self, config: dict):
        self.config = config
        self.postgres = config["ENGINE"].endswith("postgresql")
        checkout = hashlib.sha1(str(ROOT).encode()).hexdigest()[:8]
        self.prefix = f"mcp_live_{checkout}_"
        self.template = f"{self.prefix}{os.getpid()}_template"
        self.created: list[str] = []
        self._count = 0
        self._drop_abandoned()
        self._create_empty(self.template)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True,
                       env={**os.environ, **self.env(self.template)})
        atexit.register(self.drop_all)

    def settings(self, name: str) -> dict:
        """What daphne's DATABASES["default"] is: the suite's connection, kept open as a deployment would."""
        settings = {k: v for k, v in self.config.items() if k != "TEST"}
        return {**settings, "NAME": name, "CONN_MAX_AGE": None, "CONN_HEALTH_CHECKS": True}

    def env(self, name: str) -> dict:
        """The environment of a process (daphne, manage.py) using database `name` (tests.live_settings)."""
        return {"DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_TEST_SERVER_DB": json.dumps(self.settings(name))}

    def connect(self, name: str | None = None):
        """A DB-API connection (autocommit) to database `name`, or to the server itself."""
        c = self.config
        if self.postgres:
            import psycopg

            return psycopg.connect(host=c["HOST"] or None, port=c["PORT"] or None, user=c["USER"] or None,
                                   password=c["PASSWORD"] or None, dbname=name or "postgres", autocommit=True)
        import MySQLdb

        kwargs = {"host": c["HOST"] or "127.0.0.1", "user": c["USER"], "password": c["PASSWORD"],
                  "charset": "utf8mb4", "autocommit": True}
        if c["PORT"]:
            kwargs["port"] = int(c["PORT"])
        if name:
            kwargs["database"] = name
        return MySQLdb.connect(**kwargs)

    def _execute(self, *statements: str, name: str | None = None):
        conn = self.connect(name)
        try:
            cursor = conn.cursor()
            for statement in statements:
                cursor.execute(statement)
        finally:
            conn.close()

    def _quote(self, name: str) -> str:
        return f'"{name}"' if self.postgres else f"`{name}`"

    def _create_empty(self, name: str):
        self._execute(f"CREATE DATABASE {self._quote(name)}" + ("" if self.postgres else " CHARACTER SET utf8mb4"))
        self.created.append(name)

    def _drop_abandoned(self):
        conn = self.connect()
        try:
            cursor = conn.cursor()
            if self.postgres:
                cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (self.prefix + "%",))
            else:
                cursor.execute("SHOW DATABASES LIKE %s", (self.prefix + "%",))
            names = [row[0] for row in cursor.fetchall()]
        finally:
            conn.close()
        for name in names:
            pid = name[len(self.prefix):].split("_")[0]
            if pid.isdigit() and not _alive(int(pid)):
                self.drop(name)

    def create(self) -> str:
        """A fresh copy of the migrated template."""
        self._count += 1
        name = f"{self.prefix}{os.getpid()}_{self._count}"
        if self.postgres:
            self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
            self.created.append(name)
            return name
        self._create_empty(name)
        conn = self.connect(self.template)
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                           "AND table_type = 'BASE TABLE'", (self.template,))
            tables = [row[0] for row in cursor.fetchall()]
            statements = ["SET FOREIGN_KEY_CHECKS = 0"]
            for table in tables:
                cursor.execute(f"SHOW CREATE TABLE `{table}`")
                statements.append(cursor.fetchone()[1])
            statements += [f"INSERT INTO `{name}`.`{t}` SELECT * FROM `{self.template}`.`{t}`" for t in tables]
        finally:
            conn.close()
        self._execute(*statements, name=name)
        return name

    def drop(self, name: str):
        try:
            if self.postgres:
                self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                self._execute(f"DROP DATABASE IF EXISTS `{name}`")
        except Exception as exc:  # at exit, say so and go on with the others
            print(f"tests/live.py: could not drop database {name}: {exc}", file=sys.stderr)

    def drop_all(self):
        for name in reversed(self.created):
            self.drop(name)
        self.created.clear()

    def query(self, name: str, sql: str, params=()) -> list[tuple]:
        """`sql` with SQLite's `?` placeholders, on database `name`."""
        conn = self.connect(name)
        try:
            cursor = conn.cursor()
            cursor.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(params))
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_server_databases: list[ServerDatabases] = []


def server_databases() -> ServerDatabases | None:
    """The run's ServerDatabases when the suite is on PostgreSQL or MariaDB (made on first use)."""
    config = suite_database()
    if config is None:
        return None
    if not _server_databases:
        _server_databases.append(ServerDatabases(config))
    return _server_databases[0]


class DaphneServer:
    """`daphne example_project.asgi:application` on 127.0.0.1 with MCP_TRANSPORT overrides.

    Its database: a fresh copy of the migrated template, a SQLite file, or (the suite on
    PostgreSQL or MariaDB: `suite_database`) a database of its own on that server. `db`: serve an
    existing one instead (e.g. another, killed, server's `.db`: a SQLite path or a database name).
    `launcher`: the module run with `python -m`, the one the README recommends unless told (plain
    "daphne" serves the same), or "uvicorn", or "gunicorn" (uvicorn's worker class, `workers` of
    them, and `args`). `app`: the ASGI application.
    """

    def __init__(self, transport: dict | None = None, env: dict | None = None, db: str | None = None,
                 launcher: str = "mcp_transport.serve", app: str = "example_project.asgi:application",
                 workers: int = 1, args: tuple[str, ...] = ()):
        self.launcher = launcher
        self.args = list(args)
        self.app = app
        self.workers = workers
        self.transport = transport or {}
        self.extra_env = env or {}
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="mcp-daphne-")
        _temp_dirs.append(self.dir)
        # Not for the scaled-out settings (MCP_TEST_SCALED): those name their own PostgreSQL database.
        self.databases = None if self.extra_env.get("MCP_TEST_SCALED") else server_databases()
        if self.databases is not None:
            self.db = db if db is not None else self.databases.create()
        else:
            self.db = db if db is not None else migrated_db(self.dir)
        self.log_path = os.path.join(self.dir, "daphne.log")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def backend(self) -> str:
        """"sqlite", "postgresql" or "mysql": what this server keeps its tables in."""
        if self.databases is None:
            return "sqlite"
        return "postgresql" if self.databases.postgres else "mysql"

    def db_env(self) -> dict:
        """The environment variables that point a process (manage.py, daphne) at this server's database."""
        if self.databases is not None:
            return self.databases.env(self.db)
        return {"DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": self.db}

    def manage(self, *args: str) -> str:
        """`manage.py <args>` on this server's database; its output."""
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **self.db_env()},
                              check=True, capture_output=True, text=True).stdout.strip()

    def query(self, sql: str, params=()) -> list[tuple]:
        """Rows of `sql` (SQLite's `?` placeholders, whatever the backend) on this server's database."""
        if self.databases is not None:
            return self.databases.query(self.db, sql, params)
        import sqlite3

        conn = sqlite3.connect(self.db, timeout=10)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def start(self) -> "DaphneServer":
        env = {
            **os.environ,
            **self.db_env(),
            "MCP_TEST_TRANSPORT": json.dumps(self.transport),
            "PYTHONUNBUFFERED": "1",
            # Every request's span recorded (no exporter): hostile input reaches the tracing code too.
            **({"MCP_EXAMPLE_OTEL": "record"} if importlib.util.find_spec("opentelemetry.sdk") else {}),
            **self.extra_env,
        }
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_serving()
        except BaseException:
            self.stop()  # not left running when it did not come up (or the wait itself failed)
            raise
        return self

    def command(self) -> list[str]:
        if self.launcher == "uvicorn":
            return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), self.app]
        if self.launcher == "gunicorn":
            return [sys.executable, "-m", "gunicorn", "-k", "uvicorn_worker.UvicornWorker", "-w", str(self.workers),
                    "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", "60", *self.args, self.app]
        return [sys.executable, "-m", self.launcher, "-b", "127.0.0.1", "-p", str(self.port), self.app]

    def _wait_until_serving(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.launcher} exited: {self.logs()}")
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.launcher} did not start: {self.logs()}")

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


OAUTH_ENV = {"MCP_EXAMPLE_OAUTH": "1"}


def start_oauth_server(transport=None, superuser: tuple[str, str] | None = None, toolkit=None) -> DaphneServer:
    """The example project as its own OAuth authorization server (MCP_EXAMPLE_OAUTH=1: the toolkit,
    `toolkit` over its OAUTH2_PROVIDER), its tables migrated, with a superuser when given."""
    server = DaphneServer(transport, env={**OAUTH_ENV, "MCP_TEST_OAUTH2_PROVIDER": json.dumps(toolkit or {})})
    server.extra_env["MCP_EXAMPLE_ORIGIN"] = f"http://127.0.0.1:{server.port}"
    manage_oauth_server(server, "migrate", "-v", "0")
    if superuser:
        manage_oauth_server(server, "shell", "-c", "from django.contrib.auth.models import User; User.objects."
                                                   f"create_superuser({superuser[0]!r}, '', {superuser[1]!r})")
    return server.start()


def manage_oauth_server(server: DaphneServer, *args) -> str:
    """`manage.py` on such a server's database, with its settings (the toolkit installed): its output."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={
        **os.environ, **server.db_env(), **server.extra_env}, check=True, capture_output=True, text=True).stdout
