# Sourced by bench/anchors/install.sh and tests/interop/install.sh: installs outside the repository
# that are redone only when the files defining them (and, for a venv, the interpreter) change. The
# caller defines log().

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# npm_ci_stamped DIR SOURCE CHECK: `npm ci` of SOURCE's package.json and package-lock.json into DIR.
# CHECK is shell run in DIR: an install whose CHECK fails is redone, and a fresh one must pass it.
npm_ci_stamped() {
    local dir=$1 source=$2 check=$3 want have=""
    command -v npm >/dev/null 2>&1 || { log "npm not found on PATH"; return 1; }
    want=$(stamp_of "$source/package.json" "$source/package-lock.json")
    [ -f "$dir/.stamp" ] && have=$(cat "$dir/.stamp")
    if [ "$want" = "$have" ] && (cd "$dir" && eval "$check") >/dev/null 2>&1; then
        log "node packages up to date in $dir"
        return 0
    fi
    log "npm ci into $dir (lock hash ${want:0:12})"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$source/package.json" "$source/package-lock.json" "$dir/"
    # EBADENGINE warnings are expected when npm runs on an older Node: the packages run on node@22.
    if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >"$dir/npm-ci.log" 2>&1); then
        tail -40 "$dir/npm-ci.log" >&2
        log "npm ci failed (full log: $dir/npm-ci.log)"
        return 1
    fi
    (cd "$dir" && eval "$check") || { log "the node packages in $dir fail their check: $check"; return 1; }
    echo "$want" >"$dir/.stamp"
    log "installed node packages (node $("$dir/node_modules/node/bin/node" --version)) in $dir"
}

# venv_stamped DIR REQUIREMENTS PYTHON CHECK: a venv made by PYTHON in DIR with REQUIREMENTS; CHECK is
# Python that must run in it afterwards.
venv_stamped() {
    local venv=$1 requirements=$2 python=$3 check=$4 want have="" pyver pip_log
    command -v "$python" >/dev/null 2>&1 || { log "$python not found"; return 1; }
    pyver=$("$python" -c 'import sys; print(sys.version)')
    want=$( { cat "$requirements"; echo "$pyver"; } | sha256sum | cut -d' ' -f1)
    [ -f "$venv/.stamp" ] && have=$(cat "$venv/.stamp")
    if [ "$want" = "$have" ] && [ -x "$venv/bin/python" ]; then
        log "venv up to date in $venv"
        return 0
    fi
    log "creating the venv $venv with $python ($pyver)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip_log="$venv.pip.log"
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            -r "$requirements" >"$pip_log" 2>&1; then
        tail -40 "$pip_log" >&2
        log "pip install failed (full log: $pip_log)"
        return 1
    fi
    "$venv/bin/python" -c "$check" || { log "the packages in $venv fail their check"; return 1; }
    echo "$want" >"$venv/.stamp"
    log "installed $("$venv/bin/python" -m pip show mcp 2>/dev/null | grep -i '^version') in $venv"
}
