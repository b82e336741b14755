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
    # shellcheck source=../apt.sh
    source "$(dirname "$0")/../apt.sh"
    apt_install browser chromium fonts-liberation || exit 1
    runs || { log "chromium installed but does not run"; exit 1; }
fi

log "$("$CHROMIUM" --version 2>/dev/null)"
echo "MCP_CHROMIUM=$CHROMIUM"
