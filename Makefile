# Two commands matter: `make run` (serve the example at http://127.0.0.1:$(PORT)/mcp) and `make test`;
# `make bench` measures it, `make yardstick` beside the official SDKs.
PORT ?= 8000
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test matrix dist bench bench-tasks bench-against bench-observability yardstick install test-install interop-install anchors-install \
	browser-install deploy-install migrate clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) requirements.txt setup.cfg pyproject.toml
	$(PY) -m pip install -q -r requirements.txt -e .
	touch $@

# mysqlclient (requirements-test.txt) is built against MariaDB's client headers: tests/mariadb/install.sh
# installs them from Debian's packages when missing. If it cannot, CI (CI set) fails here; elsewhere
# everything else is installed, and the MariaDB run of `make test` fails for want of the driver.
$(VENV)/.test-installed: $(VENV)/.installed requirements-test.txt
	@if bash tests/mariadb/install.sh; then \
	  $(PY) -m pip install -q -r requirements-test.txt && touch $@; \
	elif [ -n "$$CI" ]; then exit 1; \
	else echo "no MariaDB client headers: installing the test requirements without mysqlclient" >&2; \
	  $(PY) -m pip install -q -r requirements.txt $$(grep -v -e '^mysqlclient' -e '^-r' -e '^#' requirements-test.txt); \
	fi

install: $(VENV)/.installed

test-install: $(VENV)/.test-installed

migrate: install
	$(PY) manage.py migrate -v 0

run: migrate
	@echo "MCP endpoint: http://127.0.0.1:$(PORT)/mcp   admin: http://127.0.0.1:$(PORT)/admin/"
	$(PY) -m mcp_transport.serve -b 127.0.0.1 -p $(PORT) example_project.asgi:application

interop-install:
	bash tests/interop/install.sh

# Debian's chromium for the admin's end-to-end test (tests/test_admin_e2e.py), driven by Playwright.
browser-install:
	bash tests/browser/install.sh

# nginx from Debian's packages for the deploy/ topology tests (tests/test_deploy.py). Without it
# those tests skip and say why; in CI (CI set) a failed install fails `make test`.
deploy-install:
	@bash tests/deploy/install.sh >/dev/null || { [ -z "$$CI" ] || exit 1; \
	  echo "nginx is not installed: tests/test_deploy.py will skip its topology tests" >&2; }

# The layer contracts (.importlinter); the store, in-process (both eras, tasks), admin, status-command and
# migration tests, and the hostile-input batteries (their daphne then serves a database on that server: tests/live.py),
# also on PostgreSQL and on MariaDB (both started by .ci/run); then everything.
DB_TESTS := tests/test_store.py tests/test_inprocess.py tests/test_admin.py tests/test_status_command.py \
	tests/test_migrations.py tests/test_states.py tests/test_http_hostile.py tests/test_fuzz.py tests/test_modern.py \
	tests/test_tasks.py
test: test-install interop-install browser-install deploy-install
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q --ds=tests.settings_postgres $(DB_TESTS)
	$(PY) -m pytest -q --ds=tests.settings_mariadb $(DB_TESTS)
	$(PY) -m pytest

# The wheel and the sdist in dist/, checked by twine (tests/test_packaging.py builds its own, installs the
# wheel in a fresh virtualenv and serves a new project from it).
dist: test-install
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The support matrix (noxfile.py): Django 5.2 LTS and 6.1 on each Python 3.11-3.13 that Django supports,
# but 5.2 on 3.11, which `make test` covers with the whole suite; on each, in a virtualenv of its own
# (.nox/), the in-process tests and a real daphne with the official Python client. NOX_ARGS="-s <session>"
# for one (`$(VENV)/bin/nox -l` lists them).
NOX_ARGS ?=
matrix: test-install
	$(VENV)/bin/nox -f noxfile.py $(NOX_ARGS)

# The project's own benchmark (bench/run.py): serves the example under daphne (the calls also under
# uvicorn), prints one markdown table, writes test-output/bench.json and test-output/bench-calls.png. `make bench BENCH_ARGS=--quick`
# for a short smoke run; `BENCH_ARGS="--db postgres"` for PostgreSQL + Redis (settings_scaled).
BENCH_ARGS ?=
bench: test-install
	$(PY) bench/run.py $(BENCH_ARGS)

# Tasks (bench/tasks.py): database round trips to create a task and to read its result, 1,000 tasks
# working at once in one process, tasks/get against echo calls. PostgreSQL + Redis unless
# BENCH_ARGS="--db sqlite"; `--quick` for a short smoke run. Writes test-output/bench-tasks.json.
bench-tasks: test-install
	$(PY) bench/tasks.py $(BENCH_ARGS)

# This checkout's calls/s beside another commit's, in turns: `make bench-against REF=main~3 BENCH_ARGS="--db postgres"`.
bench-against: test-install
	$(PY) bench/against.py $(REF) $(BENCH_ARGS)

# What metrics and tracing cost: the example served with them off and on, in turns (calls/s, server
# CPU per call); `BENCH_ARGS="--instructions 200 --concurrency 1"`: callgrind's instructions per call
# instead, which a busy machine does not change. Needs the `otel` extra and the SDK (requirements-test.txt).
bench-observability: test-install
	$(PY) bench/observability.py $(BENCH_ARGS)

# The official SDKs the side-by-side run compares against (bench/anchors/: 1.x for the 2025-11-25
# sessions, 2.x for 2026-07-28), from PyPI and npm, pinned, into ~/.cache/mcp-transport-bench.
anchors-install:
	bash bench/anchors/install.sh

# Side by side (bench/yardstick.py, BENCHMARKS.md): the official Python and TypeScript SDKs, the
# floor (bench/floor.py) and the example project on SQLite and on PostgreSQL + Redis, the bench's own
# client, 3 interleaved repeats; then MCP 2026-07-28 calls (JSON echo, SSE progress) against the
# SDKs 2.x and the example project (about 30 minutes). Writes test-output/yardstick.{jsonl,md} and a plot.
# `make yardstick YARDSTICK_ARGS="--scenarios calls --servers py-sse,ts-sse,ours-sqlite-sse"` for less.
YARDSTICK_ARGS ?=
yardstick: test-install anchors-install
	$(PY) bench/yardstick.py $(YARDSTICK_ARGS)

clean:
	rm -rf $(VENV) .nox example_project/db.sqlite3* .pytest_cache test-output dist
