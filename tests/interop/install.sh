#!/usr/bin/env bash
# Install the third-party MCP software that tests/test_interop.py drives, OUTSIDE the repository:
#
#   $MCP_INTEROP_HOME/node       `npm ci` of tests/interop/package.json + package-lock.json:
#                                @modelcontextprotocol/conformance, @modelcontextprotocol/sdk (1.32.x,
#                                the TypeScript client), @modelcontextprotocol/inspector (its CLI) and
#                                `node@22` (Node 22 as an npm package: the suite and the Inspector need
#                                Node >= 22, a stock machine may have Node 20; npm itself may be any).
#   $MCP_INTEROP_HOME/mcp2-venv  a separate Python venv with requirements-mcp2.txt (mcp 2.x, which
#                                cannot share the project's venv with mcp 1.x).
#
# MCP_INTEROP_HOME defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/mcp-transport-interop.
# MCP_INTEROP_PYTHON picks the interpreter for the venv (default: python3).
#
# Idempotent: each part is redone only when the sha256 of the files that define it (and, for the
# venv, the interpreter's version) differs from the stamp written after its last successful install.
# On success the last lines are machine-readable, e.g.
#   MCP_INTEROP_NODE_DIR=/root/.cache/mcp-transport-interop/node
#   MCP_INTEROP_NODE_BIN=/root/.cache/mcp-transport-interop/node/node_modules/node/bin
#   MCP_INTEROP_MCP2_PYTHON=/root/.cache/mcp-transport-interop/mcp2-venv/bin/python
# Usage: tests/interop/install.sh [node|mcp2|all]   (default all)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INTEROP_HOME=${MCP_INTEROP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-transport-interop}
NODE_DIR=$INTEROP_HOME/node
VENV=$INTEROP_HOME/mcp2-venv
PYTHON=${MCP_INTEROP_PYTHON:-python3}
WHAT=${1:-all}

mkdir -p "$INTEROP_HOME"
INTEROP_HOME=$(cd "$INTEROP_HOME" && pwd)
NODE_DIR=$INTEROP_HOME/node
VENV=$INTEROP_HOME/mcp2-venv

log() { echo "[interop-install] $*" >&2; }

# One installer at a time per cache dir (a developer's run and another shell's, say).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$INTEROP_HOME/.install.lock"
    flock 9
fi

# shellcheck source=../../tools/stamped_install.sh
. "$HERE/../../tools/stamped_install.sh"

install_node() {
    npm_ci_stamped "$NODE_DIR" "$HERE" \
        '[ -e node_modules/.bin/conformance ] && node_modules/node/bin/node --version | grep -q "^v22\."'
}

install_mcp2() {
    venv_stamped "$VENV" "$HERE/requirements-mcp2.txt" "$PYTHON" 'from mcp.client import Client'
}

case "$WHAT" in
    node) install_node ;;
    mcp2) install_mcp2 ;;
    all) install_node; install_mcp2 ;;
    *) echo "usage: $0 [node|mcp2|all]" >&2; exit 2 ;;
esac

echo "MCP_INTEROP_HOME=$INTEROP_HOME"
if [ "$WHAT" != mcp2 ]; then
    echo "MCP_INTEROP_NODE_DIR=$NODE_DIR"
    echo "MCP_INTEROP_NODE_BIN=$NODE_DIR/node_modules/node/bin"
fi
if [ "$WHAT" != node ]; then
    echo "MCP_INTEROP_MCP2_PYTHON=$VENV/bin/python"
fi
