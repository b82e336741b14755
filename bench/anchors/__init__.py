"""The anchor servers: the official MCP SDKs serving the same two tools as the example project,
for the side-by-side run (bench/yardstick.py).

python_sdk.py       `mcp` 1.x (PyPI), FastMCP's streamable-http app on uvicorn
typescript_sdk.mjs  `@modelcontextprotocol/sdk` 1.x (npm), StreamableHTTPServerTransport on node:http
requirements.txt    the Python anchor's venv, pinned
package.json        the TypeScript anchor's packages and Node 22, pinned by package-lock.json
install.sh          installs both from the registries into $MCP_BENCH_HOME (~/.cache/mcp-transport-bench)

`-sse` answers tools/call on an SSE stream (the SDKs' default, with an in-memory event store so
that streams can be resumed); `-json` answers with JSON (json_response / enableJsonResponse).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.server import ServerProcess, free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# name -> (runtime, extra arguments)
ANCHORS = {
    "py-sse": ("python", []),
    "py-json": ("python", ["--json"]),
    "ts-sse": ("node", []),
    "ts-json": ("node", ["--json"]),
}


class Unavailable(RuntimeError):
    """The anchors could not be installed (no npm, no registry, a failed install)."""


def install(part: str = "all", python: str | None = None, timeout: float = 900) -> dict[str, str]:
    """Run install.sh PART (node, python or all): the KEY=VALUE lines it ends with. Returns at once
    when the pinned files have not changed since the last install."""
    env = dict(os.environ)
    if python:
        env["MCP_BENCH_ANCHOR_PYTHON"] = python
    try:
        proc = subprocess.run(["bash", str(HERE / "install.sh"), part], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"bench/anchors/install.sh {part}: {exc}") from exc
    if proc.returncode:
        raise Unavailable(f"bench/anchors/install.sh {part} failed (exit {proc.returncode}):\n"
                          f"{proc.stderr[-3000:]}{proc.stdout[-1000:]}")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if re.match(r"^MCP_BENCH_\w+=", line))


def versions(paths: dict[str, str]) -> dict[str, str]:
    """The anchors' runtime and SDK versions, read from what install.sh installed."""
    out = {}
    if "MCP_BENCH_PYTHON" in paths:
        out["anchor_python"] = subprocess.run(
            [paths["MCP_BENCH_PYTHON"], "-c", "import sys, importlib.metadata as m; "
             "print(sys.version.split()[0], m.version('mcp'), m.version('uvicorn'))"],
            capture_output=True, text=True, timeout=60).stdout.strip()
    if "MCP_BENCH_NODE" in paths:
        node = subprocess.run([paths["MCP_BENCH_NODE"], "--version"], capture_output=True, text=True,
                              timeout=60).stdout.strip()
        sdk = Path(paths["MCP_BENCH_NODE_DIR"], "node_modules/@modelcontextprotocol/sdk/package.json")
        import json

        out["anchor_node"] = f"{node} {json.loads(sdk.read_text())['version']}" if sdk.exists() else node
    return out


def answers(port: int) -> bool:
    """Whether something on 127.0.0.1:port answers an HTTP request (any status)."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            return s.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


class AnchorServer(ServerProcess):
    """One anchor on 127.0.0.1 and a free port, pinned to `cpu` (taskset) when given."""

    def __init__(self, name: str, paths: dict[str, str], cpu: int | None = None, start_timeout: float = 60):
        if name not in ANCHORS:
            raise ValueError(f"unknown anchor {name!r}: one of {', '.join(ANCHORS)}")
        self.name, self.paths, self.cpu, self.start_timeout = name, paths, cpu, start_timeout
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path: str | None = None

    def command(self) -> tuple[list[str], Path]:
        runtime, extra = ANCHORS[self.name]
        if runtime == "python":
            return [self.paths["MCP_BENCH_PYTHON"], str(HERE / "python_sdk.py"), "--port", str(self.port), *extra], ROOT
        # ES modules resolve their imports from the script's own directory: run a copy beside node_modules.
        node_dir = Path(self.paths["MCP_BENCH_NODE_DIR"])
        shutil.copyfile(HERE / "typescript_sdk.mjs", node_dir / "typescript_sdk.mjs")
        return [self.paths["MCP_BENCH_NODE"], str(node_dir / "typescript_sdk.mjs"), "--port", str(self.port),
                *extra], node_dir

    def start(self) -> "AnchorServer":
        command, cwd = self.command()
        if self.cpu is not None:
            command = ["taskset", "-c", str(self.cpu), *command]
        fd, self.log_path = tempfile.mkstemp(prefix=f"mcp-bench-{self.name}-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self.proc = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._failed(f"{self.name} exited with {self.proc.returncode}")
            if answers(self.port):
                return self
            time.sleep(0.1)
        self._failed(f"{self.name} did not answer within {self.start_timeout} s")
