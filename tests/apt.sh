# Sourced by the test installers: `apt_install NAME PACKAGE...` installs Debian packages as root (or
# with passwordless sudo), one installer at a time, running `apt-get update` only when an install
# from the current lists fails. Returns 1, with the end of apt's log, when it cannot.

apt_install() {
    local name=$1
    shift
    local log="/tmp/mcp-$name-install.log" sudo=""
    command -v apt-get >/dev/null 2>&1 || { echo "[$name-install] no apt-get: install $* yourself" >&2; return 1; }
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "[$name-install] installing needs root: run 'apt-get install -y $*' as root" >&2
            return 1
        fi
    fi
    # apt takes its own lock, but a second installer would then just fail: wait for the first.
    exec 9>"/tmp/mcp-$name-install.lock"
    command -v flock >/dev/null 2>&1 && flock 9
    echo "[$name-install] apt-get install $*" >&2
    if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >"$log" 2>&1; then
        echo "[$name-install] apt-get update, then install again" >&2
        $sudo apt-get update -q >>"$log" 2>&1 || true
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1 \
            || { tail -20 "$log" >&2; echo "[$name-install] apt-get install $* failed" >&2; return 1; }
    fi
}
