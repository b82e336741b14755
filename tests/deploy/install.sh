#!/usr/bin/env bash
# Install nginx from Debian's packages for tests/test_deploy.py, if it is missing. Idempotent:
# nothing happens when an nginx binary is already there.
#
#   - installs the package `nginx` (on bookworm the bare server; nginx-light only adds the echo
#     module to it, and trixie has no nginx-light), or nginx-light where apt knows only that one;
#   - runs `apt-get update` only when apt knows no candidate for either, or when an install
#     from the current lists fails (stale lists);
#   - never starts the system's nginx: the package's postinst would listen on port 80 on every
#     address, so a temporary /usr/sbin/policy-rc.d forbids service starts during the install;
#   - as a non-root user it uses `sudo -n` when that works, else it fails with a message.
#
# Exit status: 0 with `MCP_NGINX=/path/to/nginx` as the last line, 1 when nginx is still missing.
# The Makefile turns a failure into a skip notice outside CI and into a failed `make test` in CI.
set -euo pipefail

log() { echo "[deploy-install] $*" >&2; }

find_nginx() {
    local candidate
    for candidate in "$(command -v nginx 2>/dev/null || true)" /usr/sbin/nginx /usr/local/sbin/nginx; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if nginx_bin=$(find_nginx); then
    log "nginx present: $nginx_bin ($("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'))"
    echo "MCP_NGINX=$nginx_bin"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    log "nginx is missing and this is not a Debian-like system (no apt-get): install nginx yourself"
    exit 1
fi

SUDO=()
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        log "nginx is missing and installing it needs root: run 'sudo apt-get install nginx-light' (or nginx)"
        exit 1
    fi
fi

candidate() {  # the package to install, or nothing if apt's lists know neither
    local pkg policy
    for pkg in nginx nginx-light; do
        policy=$(apt-cache policy "$pkg" 2>/dev/null || true)
        if grep -q '^  Candidate: [^(]' <<<"$policy"; then
            echo "$pkg"
            return 0
        fi
    done
    return 1
}

apt_update() {
    log "apt-get update"
    "${SUDO[@]}" apt-get update -qq >&2
}

install_pkg() {
    log "apt-get install -y $1"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$1" >&2
}

# Keep the package's postinst from starting the system nginx (port 80, all addresses).
POLICY=/usr/sbin/policy-rc.d
made_policy=0
cleanup() {
    if [ "$made_policy" = 1 ]; then
        "${SUDO[@]}" rm -f "$POLICY"
    fi
}
trap cleanup EXIT
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# Written by tests/deploy/install.sh for the duration of an nginx install.\nexit 101\n' \
        | "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    made_policy=1
fi

updated=0
if ! pkg=$(candidate); then
    apt_update
    updated=1
    pkg=$(candidate) || { log "apt knows no nginx-light nor nginx package"; exit 1; }
fi
if ! install_pkg "$pkg"; then
    if [ "$updated" = 1 ]; then
        log "installing $pkg failed"
        exit 1
    fi
    apt_update  # the lists may be stale (a package version gone from the mirror)
    pkg=$(candidate) || { log "apt knows no nginx-light nor nginx package"; exit 1; }
    install_pkg "$pkg" || { log "installing $pkg failed"; exit 1; }
fi

nginx_bin=$(find_nginx) || { log "$pkg installed but no nginx binary found"; exit 1; }
log "installed $pkg: $nginx_bin ($("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'))"
echo "MCP_NGINX=$nginx_bin"
