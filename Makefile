# Two commands matter: `make run` (serve the example at http://127.0.0.1:$(PORT)/mcp) and `make test`.
PORT ?= 8000
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test install test-install interop-install migrate clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) requirements.txt setup.cfg pyproject.toml
	$(PY) -m pip install -q -r requirements.txt -e .
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed requirements-test.txt
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

install: $(VENV)/.installed

test-install: $(VENV)/.test-installed

migrate: install
	$(PY) manage.py migrate -v 0

run: migrate
	@echo "MCP endpoint: http://127.0.0.1:$(PORT)/mcp   admin: http://127.0.0.1:$(PORT)/admin/"
	$(VENV)/bin/daphne -b 127.0.0.1 -p $(PORT) example_project.asgi:application

interop-install:
	bash tests/interop/install.sh

# The store and the in-process tests also run on PostgreSQL (started by .ci/run); then everything.
test: test-install interop-install
	$(PY) -m pytest -q --ds=tests.settings_postgres tests/test_store.py tests/test_inprocess.py
	$(PY) -m pytest

clean:
	rm -rf $(VENV) example_project/db.sqlite3* .pytest_cache
