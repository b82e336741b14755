#!/usr/bin/env bash
# Debian's Chromium for tests/test_admin_e2e.py, which drives it with Playwright's Python package
# (executable_path=/usr/bin/chromium). Never `playwright install`: no browser build is downloaded.
#
# Idempotent: nothing happens when the browser already runs. Needs root (or passwordless sudo) to
# install. MCP_CHROMIUM names another binary (then it is only checked, not installed).
# On success the last line is machine-readable: MCP_CHROMIUM=/usr/bin/chromium
set -euo pipefail

CHROMIUM=${MCP_CHROMIUM:-/usr/bin/chromium}
log() { echo "[browser-install] $*" >&2; }

runs() { "$CHROMIUM" --version >/dev/null 2>&1; }

if ! runs; then
    if [ "$CHROMIUM" != /usr/bin/chromium ]; then
        log "$CHROMIUM does not run (MCP_CHROMIUM); not installing anything"
        exit 1
    fi
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            log "installing Debian's chromium needs root: run 'apt-get install -y chromium' as root"
            exit 1
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || { log "apt-get not found: install Chromium and set MCP_CHROMIUM"; exit 1; }
    export DEBIAN_FRONTEND=noninteractive
    # One installer at a time (apt takes its own lock, but a second run would then just fail).
    exec 9>/tmp/mcp-browser-install.lock
    command -v flock >/dev/null 2>&1 && flock 9
    if ! runs; then
        log "apt-get install chromium"
        if ! $SUDO apt-get install -y -q chromium fonts-liberation >/tmp/mcp-browser-install.log 2>&1; then
            log "apt-get update, then install again"
            $SUDO apt-get update -q >>/tmp/mcp-browser-install.log 2>&1
            $SUDO apt-get install -y -q chromium fonts-liberation >>/tmp/mcp-browser-install.log 2>&1 \
                || { tail -20 /tmp/mcp-browser-install.log >&2; log "apt-get install chromium failed"; exit 1; }
        fi
    fi
    runs || { log "chromium installed but does not run"; exit 1; }
fi

log "$("$CHROMIUM" --version 2>/dev/null)"
echo "MCP_CHROMIUM=$CHROMIUM"
