#!/usr/bin/env bash
# A local try of the deploy/ topology, all on 127.0.0.1: N daphne workers serving the example
# project with example_project.settings_scaled (PostgreSQL + Redis), behind nginx round-robin.
#
#   deploy/run.sh [WORKERS]        (default 2; Ctrl-C or SIGTERM stops everything it started)
#
# Needs PostgreSQL and Redis running (as .ci/run starts them), nginx (tests/deploy/install.sh)
# and the venv (`make install`). Settings, all optional:
#   LISTEN_PORT=8080            where nginx listens; the endpoint is http://127.0.0.1:$LISTEN_PORT/mcp
#   WORKER_PORTS="8001 8002"    the daphne ports (default: WORKERS ports from 8001)
#   MCP_PG_NAME=mcp_example     the database (created if missing, then migrated); MCP_PG_HOST,
#                               MCP_PG_PORT, MCP_PG_USER, MCP_PG_PASSWORD, MCP_REDIS_URL and
#                               MCP_REDIS_PREFIX as example_project/settings_scaled.py reads them
#   MCP_DEPLOY_DIR=<new temp dir>  nginx's prefix (nginx.conf, logs/, tmp/) and the workers' logs
#   PYTHON=.venv/bin/python     the interpreter with the project installed
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

WORKERS=${1:-2}
LISTEN_PORT=${LISTEN_PORT:-8080}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
if [ -z "${WORKER_PORTS:-}" ]; then
    WORKER_PORTS=$(seq 8001 $((8000 + WORKERS)) | tr '\n' ' ')
fi
RUN_DIR=${MCP_DEPLOY_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mcp-deploy-XXXXXX")}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
export DJANGO_SETTINGS_MODULE=example_project.settings_scaled
export PYTHONUNBUFFERED=1

log() { echo "[deploy] $*" >&2; }
[ -x "$NGINX" ] || { log "nginx not found: run tests/deploy/install.sh"; exit 1; }
[ -x "$PYTHON" ] || { log "$PYTHON not found: run 'make install' or set PYTHON"; exit 1; }

pids=()
stop() {
    trap - EXIT INT TERM
    if [ "${#pids[@]}" -gt 0 ]; then
        log "stopping ${pids[*]}"
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "database ${MCP_PG_NAME:-mcp_example}: create if missing, migrate"
"$PYTHON" - <<'EOF'
import os
import psycopg
from psycopg import sql

name = os.environ.get("MCP_PG_NAME", "mcp_example")
params = dict(host=os.environ.get("MCP_PG_HOST", "127.0.0.1"), port=os.environ.get("MCP_PG_PORT", "5432"),
              user=os.environ.get("MCP_PG_USER", "postgres"), password=os.environ.get("MCP_PG_PASSWORD", ""))
with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
EOF
"$PYTHON" manage.py migrate -v 0

mkdir -p "$RUN_DIR/logs" "$RUN_DIR/tmp" "$RUN_DIR/prometheus"
chmod 755 "$RUN_DIR"  # nginx's worker processes (user nobody when started as root) use tmp/
# prometheus-client's multiprocess mode: /mcp/metrics on any worker adds up all of them.
export PROMETHEUS_MULTIPROC_DIR="$RUN_DIR/prometheus"
upstreams=()
for port in $WORKER_PORTS; do
    "$PYTHON" -m mcp_transport.serve --proxy-headers -b 127.0.0.1 -p "$port" example_project.asgi:application \
        >"$RUN_DIR/logs/daphne-$port.log" 2>&1 &
    pids+=($!)
    echo $! >"$RUN_DIR/daphne-$port.pid"
    upstreams+=(--worker "127.0.0.1:$port")
    log "daphne on 127.0.0.1:$port (pid $!, log $RUN_DIR/logs/daphne-$port.log)"
done

"$PYTHON" deploy/render_nginx.py --listen "127.0.0.1:$LISTEN_PORT" "${upstreams[@]}" >"$RUN_DIR/nginx.conf"
"$NGINX" -p "$RUN_DIR" -c "$RUN_DIR/nginx.conf" -g "daemon off; pid $RUN_DIR/nginx.pid;" \
    >"$RUN_DIR/logs/nginx.stderr" 2>&1 &
pids+=($!)
log "nginx on 127.0.0.1:$LISTEN_PORT (pid $!, config $RUN_DIR/nginx.conf, logs $RUN_DIR/logs/)"
log "MCP endpoint: http://127.0.0.1:$LISTEN_PORT/mcp"
log "live state:   DJANGO_SETTINGS_MODULE=$DJANGO_SETTINGS_MODULE $PYTHON manage.py mcp_status"
log "metrics:      http://127.0.0.1:$LISTEN_PORT/mcp/metrics (every worker's)"

# Until one of them exits, or we are told to stop.
wait -n "${pids[@]}" || true
log "a process exited; stopping the rest"
