"""The anchor servers: the official MCP SDKs serving the same two tools as the example project,
for the side-by-side run (bench/yardstick.py).

python_sdk.py               `mcp` 1.x (PyPI), FastMCP's streamable-http app on uvicorn
typescript_sdk.mjs          `@modelcontextprotocol/sdk` 1.x (npm), StreamableHTTPServerTransport on node:http
python_sdk_modern.py        `mcp` 2.x (PyPI), MCPServer's streamable-http app on uvicorn: 2026-07-28 and 2025
typescript_sdk_modern.mjs   `@modelcontextprotocol/server` 2.x (npm), createMcpHandler on node:http: both eras
requirements.txt            the legacy Python anchor's venv, pinned
requirements-modern.txt     the modern Python anchor's venv (mcp 2.x), pinned
package.json                both TypeScript anchors' packages and Node 22, pinned by package-lock.json
install.sh                  installs them from the registries into $MCP_BENCH_HOME (~/.cache/mcp-transport-bench)

`-sse` answers tools/call on an SSE stream (the SDKs' default, with an in-memory event store so
that streams can be resumed); `-json` answers with JSON (json_response / enableJsonResponse).
`py2-modern` and `ts2-modern` run with their SDKs' defaults: a 2026-07-28 call is answered with
JSON, or on an SSE stream (no event ids) when the tool sends a notification first.
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

# name -> (install.sh part, the script, extra arguments)
ANCHORS = {
    "py-sse": ("python", "python_sdk.py", []),
    "py-json": ("python", "python_sdk.py", ["--json"]),
    "ts-sse": ("node", "typescript_sdk.mjs", []),
    "ts-json": ("node", "typescript_sdk.mjs", ["--json"]),
    "py2-modern": ("python-modern", "python_sdk_modern.py", []),
    "ts2-modern": ("node", "typescript_sdk_modern.mjs", []),
}
PYTHONS = {"python": "MCP_BENCH_PYTHON", "python-modern": "MCP_BENCH_PYTHON_MODERN"}


class Unavailable(RuntimeError):
    """The anchors could not be installed (no npm, no registry, a failed install)."""


def parts(names) -> list[str]:
    """The install.sh parts the anchors `names` need."""
    return sorted({ANCHORS[name][0] for name in names if name in ANCHORS})


def install(part: str | list[str] = "all", python: str | None = None, timeout: float = 900) -> dict[str, str]:
    """Run install.sh PART (node, python, python-modern or all; or each of a list): the KEY=VALUE
    lines it ends with. Returns at once when the pinned files have not changed since the last
    install."""
    if not isinstance(part, str):
        paths: dict[str, str] = {}
        for one in part:
            paths.update(install(one, python, timeout))
        return paths
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
    import json

    out = {}
    for key, label in (("MCP_BENCH_PYTHON", "anchor_python"), ("MCP_BENCH_PYTHON_MODERN", "anchor_python_modern")):
        if key in paths:
            out[label] = subprocess.run(
                [paths[key], "-c", "import sys, importlib.metadata as m; "
                 "print(sys.version.split()[0], m.version('mcp'), m.version('uvicorn'))"],
                capture_output=True, text=True, timeout=60).stdout.strip()
    if "MCP_BENCH_NODE" in paths:
        node = subprocess.run([paths["MCP_BENCH_NODE"], "--version"], capture_output=True, text=True,
                              timeout=60).stdout.strip()
        modules = Path(paths["MCP_BENCH_NODE_DIR"], "node_modules/@modelcontextprotocol")
        for package, label in (("sdk", "anchor_node"), ("server", "anchor_node_modern")):
            manifest = modules / package / "package.json"
            out[label] = f"{node} {json.loads(manifest.read_text())['version']}" if manifest.exists() else node
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
        part, script, extra = ANCHORS[self.name]
        if part in PYTHONS:
            return [self.paths[PYTHONS[part]], str(HERE / script), "--port", str(self.port), *extra], ROOT
        # ES modules resolve their imports from the script's own directory: run a copy beside node_modules.
        node_dir = Path(self.paths["MCP_BENCH_NODE_DIR"])
        shutil.copyfile(HERE / script, node_dir / script)
        return [self.paths["MCP_BENCH_NODE"], str(node_dir / script), "--port", str(self.port), *extra], node_dir

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
