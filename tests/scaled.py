"""Several workers sharing one PostgreSQL database and one Redis, as in production."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys

import psycopg

from .live import ROOT, DaphneServer

PG = dict(host=os.environ.get("MCP_PG_HOST", "127.0.0.1"), port=os.environ.get("MCP_PG_PORT", "5432"),
          user=os.environ.get("MCP_PG_USER", "postgres"))


class Cluster:
    def __init__(self, workers: int = 2, transport: dict | None = None, env: dict | None = None,
                 launcher: str = "mcp_transport.serve"):
        self.name = f"mcp_scaled_{secrets.token_hex(4)}"
        self.env = {"MCP_TEST_SCALED": "1", "MCP_PG_NAME": self.name, "MCP_REDIS_PREFIX": self.name, **(env or {})}
        self.count = workers
        self.transport = transport
        self.launcher = launcher
        self.workers: list[DaphneServer] = []

    def start(self) -> "Cluster":
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        env = {**os.environ, **self.env, "DJANGO_SETTINGS_MODULE": "tests.live_settings"}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        for _ in range(self.count):
            self.add(self.launcher)
        return self

    def add(self, launcher: str, processes: int = 1) -> DaphneServer:
        """One more server on the cluster's database and Redis (`processes`: gunicorn's workers)."""
        server = DaphneServer(self.transport, env=self.env, launcher=launcher, workers=processes).start()
        self.workers.append(server)
        return server

    def stop(self):
        for worker in self.workers:
            worker.stop()
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
