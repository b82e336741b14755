#!/usr/bin/env bash
# What pip needs to build mysqlclient (requirements-test.txt), the driver of the MariaDB runs of
# `make test` (tests/settings_mariadb.py): MariaDB's client headers and pkg-config, from Debian's
# packages (libmariadb-dev, pkg-config) when they are missing. Idempotent: nothing happens when
# pkg-config already finds the client library, or MYSQLCLIENT_CFLAGS and MYSQLCLIENT_LDFLAGS are set.
# Needs root (or passwordless sudo) to install. The server itself is not installed here: .ci/run
# starts the one the machine has.
#
# Exit status: 0 when mysqlclient can be built, 1 otherwise (the Makefile fails in CI, CI set;
# elsewhere it installs the rest and says why the MariaDB tests will fail).
set -euo pipefail

log() { echo "[mariadb-install] $*" >&2; }

# The pkg-config names mysqlclient's setup.py looks for, in its order.
found() {
    [ -n "${MYSQLCLIENT_CFLAGS:-}" ] && [ -n "${MYSQLCLIENT_LDFLAGS:-}" ] && return 0
    command -v pkg-config >/dev/null 2>&1 || return 1
    local pc
    for pc in mysqlclient mariadb libmariadb perconaserverclient; do
        if pkg-config --exists "$pc" 2>/dev/null; then
            log "MariaDB/MySQL client headers present: $pc $(pkg-config --modversion "$pc")"
            return 0
        fi
    done
    return 1
}

found && exit 0

PACKAGES=(libmariadb-dev pkg-config)
command -v cc >/dev/null 2>&1 || PACKAGES+=(gcc)
# shellcheck source=../apt.sh
source "$(dirname "$0")/../apt.sh"
apt_install mariadb "${PACKAGES[@]}" || exit 1
found || { log "libmariadb-dev installed, but pkg-config does not find it"; exit 1; }
