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

sha() { cat "$@" | sha256sum | cut -d' ' -f1; }

install_node() {
    command -v npm >/dev/null 2>&1 || { log "npm not found on PATH"; return 1; }
    local want have=""
    want=$(sha "$HERE/package.json" "$HERE/package-lock.json")
    [ -f "$NODE_DIR/.stamp" ] && have=$(cat "$NODE_DIR/.stamp")
    if [ "$want" = "$have" ] && [ -x "$NODE_DIR/node_modules/node/bin/node" ] \
        && [ -e "$NODE_DIR/node_modules/.bin/conformance" ]; then
        log "node packages up to date in $NODE_DIR"
        return 0
    fi
    log "npm ci into $NODE_DIR (lock hash ${want:0:12})"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    cp "$HERE/package.json" "$HERE/package-lock.json" "$NODE_DIR/"
    # EBADENGINE warnings are expected when npm runs on Node 20: the packages run on node@22.
    if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$NODE_DIR/npm-ci.log" 2>&1); then
        tail -40 "$NODE_DIR/npm-ci.log" >&2
        log "npm ci failed (full log: $NODE_DIR/npm-ci.log)"
        return 1
    fi
    local version
    version=$("$NODE_DIR/node_modules/node/bin/node" --version) || { log "node@22 did not install a runnable node"; return 1; }
    case "$version" in
        v22.*) ;;
        *) log "node@22 installed $version"; return 1 ;;
    esac
    echo "$want" >"$NODE_DIR/.stamp"
    log "installed node packages (node $version) in $NODE_DIR"
}

install_mcp2() {
    command -v "$PYTHON" >/dev/null 2>&1 || { log "$PYTHON not found"; return 1; }
    local want have="" pyver
    pyver=$("$PYTHON" -c 'import sys; print(sys.version)')
    want=$( { cat "$HERE/requirements-mcp2.txt"; echo "$pyver"; } | sha256sum | cut -d' ' -f1)
    [ -f "$VENV/.stamp" ] && have=$(cat "$VENV/.stamp")
    if [ "$want" = "$have" ] && [ -x "$VENV/bin/python" ]; then
        log "mcp 2.x venv up to date in $VENV"
        return 0
    fi
    log "creating the mcp 2.x venv in $VENV with $PYTHON ($pyver)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            -r "$HERE/requirements-mcp2.txt" >"$INTEROP_HOME/mcp2-pip.log" 2>&1; then
        tail -40 "$INTEROP_HOME/mcp2-pip.log" >&2
        log "pip install failed (full log: $INTEROP_HOME/mcp2-pip.log)"
        return 1
    fi
    "$VENV/bin/python" -c 'from mcp.client import Client' || { log "mcp 2.x client does not import"; return 1; }
    echo "$want" >"$VENV/.stamp"
    log "installed $("$VENV/bin/python" -m pip show mcp 2>/dev/null | grep -i '^version') in $VENV"
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
