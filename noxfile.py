"""The support matrix (`make matrix`): Django 5.2 LTS and 6.1 on the Pythons each supports.

`make test` runs the whole suite on Django 5.2 and Python 3.11 (the project's .venv). Every other
combination runs here, in a virtualenv of its own: the in-process tests (the ASGI application
driven without a server, on SQLite, and the relay on the suite's Redis), then one real server:
daphne serving the example project, the official Python client calling its tools, and the
settings checks at daphne's startup.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
DJANGO = {"5.2": "Django>=5.2,<5.3", "6.1": "Django>=6.1,<6.2"}
PYTHONS = {"5.2": ["3.11", "3.12", "3.13"], "6.1": ["3.12", "3.13"]}
FULL_SUITE = ("5.2", "3.11")  # `make test`
COMBINATIONS = [(django, python) for django, pythons in PYTHONS.items() for python in pythons
                if (django, python) != FULL_SUITE]

IN_PROCESS = ["tests/test_protocol.py", "tests/test_inprocess.py", "tests/test_modern.py", "tests/test_tasks.py",
              "tests/test_servers.py", "tests/test_auth.py", "tests/test_admin.py", "tests/test_admin_tokens.py",
              "tests/test_states.py", "tests/test_status_command.py", "tests/test_store.py",
              "tests/test_migrations.py", "tests/test_relay.py", "tests/test_fuzz.py"]
REAL_SERVER = ["tests/test_smoke.py", "tests/test_settings.py", "tests/test_interop.py::test_python_sdk_list_tools_and_echo",
               "tests/test_interop.py::test_python_sdk_tool_closes_its_own_stream"]
# What the sessions need of requirements-test.txt: the browser, the MariaDB driver and the plot serve
# tests and tools that only `make test` runs; Django comes from the session's own pin.
NOT_IN_SESSIONS = ("mysqlclient", "playwright", "matplotlib", "django-tasks-db", "import-linter", "nox")

nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True


def _pyenv_versions() -> None:
    """pyenv's shims run `python3.12` only when that version is selected: select every installed 3.x."""
    pyenv = shutil.which("pyenv")
    if pyenv is None or "PYENV_VERSION" in os.environ:
        return
    installed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True).stdout.split()
    wanted = {python for pythons in PYTHONS.values() for python in pythons}
    chosen = [v for v in installed if ".".join(v.split(".")[:2]) in wanted]
    if chosen:
        os.environ["PYENV_VERSION"] = ":".join(chosen)


def _test_requirements() -> list[str]:
    lines = (ROOT / "requirements-test.txt").read_text().splitlines() + (ROOT / "requirements.txt").read_text().splitlines()
    keep = []
    for line in (raw.strip() for raw in lines):
        if not line or line.startswith(("#", "-r")):
            continue
        name = line.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower()
        if name not in NOT_IN_SESSIONS and name != "django":
            keep.append(line)
    return keep


_pyenv_versions()


@nox.session
@nox.parametrize("django,python", COMBINATIONS, ids=[f"django{d}-py{p}" for d, p in COMBINATIONS])
def tests(session: nox.Session, django: str) -> None:
    session.install(DJANGO[django], *_test_requirements())
    session.install("--no-deps", "-e", ".")
    session.run("python", "-c", "import django, sys; print('Django', django.get_version(), 'on Python', sys.version)")
    session.run("python", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *IN_PROCESS, *session.posargs)
    session.run("python", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *REAL_SERVER, *session.posargs)
