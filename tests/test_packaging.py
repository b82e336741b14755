"""The package as users get it: the wheel and sdist built with `python -m build` and checked, then a
brand-new project in a fresh virtualenv (the built wheel, not this work tree), wired up with the README's
steps, served by plain daphne and by uvicorn, called by the official Python client; the admin styled."""
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import pytest

from tests.live import free_port
from tests.readme_project import ROOT, apply_readme_settings, readme_block

pytestmark = pytest.mark.timeout(600)

MCP_PY = '''import asyncio

from django.contrib.auth.models import User

from mcp_transport import Context, mcp


@mcp.tool
def count_users(username: str) -> int:
    """How many users have this name."""
    return User.objects.filter(username=username).count()


@mcp.tool
async def countdown(ctx: Context, steps: int = 3) -> str:
    """Reports its progress at each step."""
    for step in range(1, steps + 1):
        await asyncio.sleep(0.05)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done {steps}"
'''

PRODUCTION_SETTINGS = '''from .settings import *  # noqa: F401,F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
'''


def clean_env(**extra: str) -> dict:
    """The environment of a user's shell: nothing of this suite's settings, paths or virtualenv."""
    drop = {"DJANGO_SETTINGS_MODULE", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(*args, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env or clean_env(), capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> tuple[Path, Path, str]:
    """The wheel, the sdist and what building them printed: `python -m build`, once per session."""
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=ROOT)
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return wheel, sdist, built.stdout + built.stderr


SETUPTOOLS_WARNING = re.compile(r"^\s*warning:|Setuptools\w*Warning|absent from the `packages`", re.I | re.M)


def test_building_prints_no_setuptools_warning(dist):
    *_, output = dist
    assert not SETUPTOOLS_WARNING.search(output) and "!!" not in output, output[-5000:]


def test_an_editable_install_prints_no_setuptools_warning(tmp_path):
    """`pip install -e .` (what `make install` runs): setuptools says nothing of the package's data
    directories. Its note that every editable install gets ("Editable installation.") is information."""
    run(sys.executable, "-m", "venv", "--without-pip", tmp_path, cwd=tmp_path)
    installed = run(sys.executable, "-m", "pip", "--python", tmp_path / "bin" / "python", "install", "-v",
                    "--no-deps", "--no-compile", "-e", ROOT, cwd=tmp_path)
    output = installed.stdout + installed.stderr
    assert "Successfully installed django-mcp-transport" in output, output[-3000:]
    assert not SETUPTOOLS_WARNING.search(output), output[-5000:]


def test_the_wheel_and_sdist_pass_twine_and_hold_what_the_app_needs(dist):
    wheel, sdist, _ = dist
    checked = run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist, cwd=ROOT)
    assert checked.stdout.count("PASSED") == 2, checked.stdout

    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("mcp_transport/py.typed", "mcp_transport/static/mcp_transport/admin.css",
                   "mcp_transport/templates/admin/mcp_transport/stream/change_form.html",
                   "mcp_transport/migrations/0001_initial.py", "mcp_transport/management/commands/mcp_status.py"):
        assert needed in names, needed
    assert {name.split("/")[0] for name in names if not name.startswith("django_mcp_transport-")} == {"mcp_transport"}
    assert not [name for name in names if "__pycache__" in name]
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    for field in ("License: MIT", "Author: ", "Project-URL: ", "License-File: LICENSE"):
        assert field in metadata, field
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)

    members = [name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name]
    for needed in ("LICENSE", "CHANGELOG.md", "README.md", "mcp_transport/py.typed",
                   "mcp_transport/static/mcp_transport/admin.css", "mcp_transport/migrations/0001_initial.py"):
        assert needed in members, needed
    assert not [name for name in members if name.startswith(("tests/", "example_project/"))]


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A brand-new virtualenv with the README's `pip install` line, the built wheel in place of the
    package's name, and uvicorn. This suite's pip installs into it (`--python`), from pip's cache, without
    byte-compiling: the same packages in a third of the time."""
    wheel, *_ = dist
    [install] = [line for line in readme_block("pip install django-mcp-transport", "bash").splitlines()
                 if line.startswith("pip install ")]
    packages = [str(wheel) if name == "django-mcp-transport" else name for name in install.split()[2:]]
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-compile",
        *packages, "uvicorn", cwd=venv)
    return venv


@pytest.fixture(scope="module")
def project(venv, tmp_path_factory) -> Path:
    """startproject and startapp with the virtualenv's Django, the README's settings and asgi.py, an
    mcp.py with an ORM tool and a progress tool; migrated, a user created, collectstatic run."""
    project = tmp_path_factory.mktemp("new-project")
    bin_ = venv / "bin"
    run(bin_ / "django-admin", "startproject", "myproject", ".", cwd=project)
    run(bin_ / "python", "manage.py", "startapp", "myapp", cwd=project)
    apply_readme_settings(project)
    (project / "myproject" / "asgi.py").write_text(readme_block("application = mcp_application(django_app)"))
    (project / "myapp" / "mcp.py").write_text(MCP_PY)
    (project / "myproject" / "settings_production.py").write_text(PRODUCTION_SETTINGS)
    run(bin_ / "python", "manage.py", "migrate", "-v", "0", cwd=project)
    run(bin_ / "python", "manage.py", "createsuperuser", "--noinput", "--username", "ada", "--email",
        "ada@example.com", cwd=project, env=clean_env(DJANGO_SUPERUSER_PASSWORD="not-a-secret-1"))
    run(bin_ / "python", "manage.py", "collectstatic", "--noinput", "-v", "0", cwd=project)
    return project


def test_the_installed_project_passes_its_checks(venv, project):
    """The wheel, not this work tree, is what the project imports; its checks pass with DEBUG on and off."""
    where = run(venv / "bin" / "python", "-c", "import mcp_transport; print(mcp_transport.__file__)", cwd=project)
    assert where.stdout.startswith(str(venv)), where.stdout
    for settings in ("myproject.settings", "myproject.settings_production"):
        checked = run(venv / "bin" / "python", "manage.py", "check", "--settings", settings, cwd=project)
        assert "System check identified no issues" in checked.stdout, checked.stdout + checked.stderr


SERVERS = {
    "daphne": lambda port: ["daphne", "-b", "127.0.0.1", "-p", str(port), "myproject.asgi:application"],
    "uvicorn": lambda port: ["uvicorn", "--host", "127.0.0.1", "--port", str(port), "myproject.asgi:application"],
}


class Server:
    """One of the virtualenv's ASGI servers serving the project on a free port of 127.0.0.1."""

    def __init__(self, venv: Path, project: Path, server: str, settings: str):
        self.port = free_port()
        command = SERVERS[server](self.port)
        self.log = project / f"{server}-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(venv / "bin" / command[0]), *command[1:]], cwd=project,
                                         env=clean_env(DJANGO_SETTINGS_MODULE=settings), stdout=log,
                                         stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"

    def wait(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.logs()
            try:
                httpx.get(f"{self.base}/admin/login/", timeout=2)
                return self
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"not serving after 60 s:\n{self.logs()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]


async def call_tools(url: str) -> tuple:
    """The official client's session: the ORM tool, then the progress tool with its notifications."""
    from mcp import ClientSession

    from tests.test_interop import RecordingHTTP, py_client

    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    http, transport = py_client(url, RecordingHTTP())
    with anyio.fail_after(60):  # a hang guard
        async with transport as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                counted = await session.call_tool("count_users", {"username": "ada"})
                counted_down = await session.call_tool("countdown", {"steps": 3}, progress_callback=on_progress,
                                                       read_timeout_seconds=timedelta(seconds=30))
    if http is not None:
        await http.aclose()
    return counted, counted_down, progress


@pytest.mark.parametrize("settings", ["myproject.settings", "myproject.settings_production"],
                         ids=["debug", "production"])
@pytest.mark.parametrize("server", list(SERVERS))
async def test_the_new_project_serves_mcp_and_a_styled_admin(venv, project, server, settings):
    """startproject's DEBUG on (WhiteNoise finds the files in the apps) and DEBUG off (WhiteNoise serves
    what collectstatic copied): every stylesheet the admin's login page links loads as text/css."""
    served = Server(venv, project, server, settings)
    try:
        await anyio.to_thread.run_sync(served.wait)
        counted, counted_down, progress = await call_tools(f"{served.base}/mcp")
        assert not counted.isError and counted.structuredContent == {"result": 1}, counted
        assert not counted_down.isError and counted_down.content[0].text == "done 3", counted_down
        assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

        async with httpx.AsyncClient(base_url=served.base, timeout=10) as http:
            login = await http.get("/admin/login/")
            assert login.status_code == 200
            sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', login.text)
            assert "/static/admin/css/base.css" in sheets, login.text[:2000]
            for href in [*sheets, "/static/mcp_transport/admin.css"]:
                sheet = await http.get(href)
                assert sheet.status_code == 200, (href, served.logs())
                assert sheet.headers["content-type"].startswith("text/css"), (href, sheet.headers)
                assert len(sheet.content) > 100, href
    finally:
        served.stop()
