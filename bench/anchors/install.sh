#!/usr/bin/env bash
# Install the official MCP SDKs that the bench's anchor servers run on, from PyPI and npm by name,
# OUTSIDE the repository:
#
#   $MCP_BENCH_HOME/node   `npm ci` of bench/anchors/package.json + package-lock.json:
#                          @modelcontextprotocol/sdk 1.x (typescript_sdk.mjs), the server SDK 2.x
#                          @modelcontextprotocol/server + /node (typescript_sdk_modern.mjs), zod, and
#                          `node@22` (Node 22 as an npm package, so the anchors' runtime is pinned too).
#   $MCP_BENCH_HOME/venv   a Python venv with bench/anchors/requirements.txt (mcp 1.x, uvicorn):
#                          python_sdk.py runs there, apart from the project's own venv.
#   $MCP_BENCH_HOME/venv-modern  the same with requirements-modern.txt (mcp 2.x, uvicorn):
#                          python_sdk_modern.py runs there (mcp 2.x and 1.x cannot share a venv).
#
# MCP_BENCH_HOME defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/mcp-transport-bench.
# MCP_BENCH_ANCHOR_PYTHON picks the interpreter for the venv (default: python3.11, else python3).
#
# Idempotent, as tests/interop/install.sh: each part is redone only when the sha256 of the files that
# define it (and, for the venv, the interpreter's version) differs from the stamp of its last
# successful install. On success the last lines are machine-readable:
#   MCP_BENCH_HOME=...   MCP_BENCH_NODE_DIR=...   MCP_BENCH_NODE=.../node   MCP_BENCH_PYTHON=.../python
#   MCP_BENCH_PYTHON_MODERN=.../python
# Usage: bench/anchors/install.sh [node|python|python-modern|all]   (default all)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_HOME=${MCP_BENCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-transport-bench}
PYTHON=${MCP_BENCH_ANCHOR_PYTHON:-$(command -v python3.11 || command -v python3 || echo python3)}
WHAT=${1:-all}

mkdir -p "$BENCH_HOME"
BENCH_HOME=$(cd "$BENCH_HOME" && pwd)
NODE_DIR=$BENCH_HOME/node
VENV=$BENCH_HOME/venv
VENV_MODERN=$BENCH_HOME/venv-modern

log() { echo "[bench-anchors-install] $*" >&2; }

# One installer at a time per cache dir.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$BENCH_HOME/.install.lock"
    flock 9
fi

# shellcheck source=../../tools/stamped_install.sh
. "$HERE/../../tools/stamped_install.sh"

install_node() {
    npm_ci_stamped "$NODE_DIR" "$HERE" "node_modules/node/bin/node --input-type=module -e \"
        await import('@modelcontextprotocol/sdk/server/streamableHttp.js'); await import('zod');
        await import('@modelcontextprotocol/server'); await import('@modelcontextprotocol/node')\""
}

install_python() {
    venv_stamped "$VENV" "$HERE/requirements.txt" "$PYTHON" 'from mcp.server.fastmcp import FastMCP; import uvicorn'
}

install_python_modern() {
    venv_stamped "$VENV_MODERN" "$HERE/requirements-modern.txt" "$PYTHON" \
        'from mcp.server.mcpserver import MCPServer; import uvicorn'
}

case "$WHAT" in
    node) install_node ;;
    python) install_python ;;
    python-modern) install_python_modern ;;
    all) install_node; install_python; install_python_modern ;;
    *) echo "usage: $0 [node|python|python-modern|all]" >&2; exit 2 ;;
esac

echo "MCP_BENCH_HOME=$BENCH_HOME"
if [ "$WHAT" = node ] || [ "$WHAT" = all ]; then
    echo "MCP_BENCH_NODE_DIR=$NODE_DIR"
    echo "MCP_BENCH_NODE=$NODE_DIR/node_modules/node/bin/node"
fi
if [ "$WHAT" = python ] || [ "$WHAT" = all ]; then
    echo "MCP_BENCH_PYTHON=$VENV/bin/python"
fi
if [ "$WHAT" = python-modern ] || [ "$WHAT" = all ]; then
    echo "MCP_BENCH_PYTHON_MODERN=$VENV_MODERN/bin/python"
fi
