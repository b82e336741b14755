"""A brand-new project (`django-admin startproject`) wired up as the README says, its tests run by both
test runners: `manage.py test` and pytest with the app's plugin. The README's asgi.py and test examples
are taken from the README itself."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MCP_PY = '''from django.contrib.auth.models import User

from mcp_transport import mcp


@mcp.tool
def count_books(author: str) -> int:
    """How many books this author wrote (here: users of that name)."""
    return User.objects.filter(username=author).count()
'''

PYTEST_INI = """[pytest]
DJANGO_SETTINGS_MODULE = myproject.settings
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def readme_block(containing: str) -> str:
    blocks = re.findall(r"^ *```python\n(.*?)^ *```", (ROOT / "README.md").read_text(), re.S | re.M)
    [block] = [b for b in blocks if containing in b]
    indent = min(len(line) - len(line.lstrip()) for line in block.splitlines() if line.strip())
    return "\n".join(line[indent:] for line in block.splitlines()) + "\n"


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    result = subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """startproject, startapp, then the README's steps: INSTALLED_APPS, ASGI_APPLICATION, asgi.py, mcp.py.
    No CHANNEL_LAYERS, no ALLOWED_HOSTS: what the README does not ask for stays as startproject made it."""
    project = tmp_path_factory.mktemp("first-hour")
    run(project, "-m", "django", "startproject", "myproject", ".")
    run(project, "manage.py", "startapp", "myapp")
    settings = project / "myproject" / "settings.py"
    text = settings.read_text()
    apps = re.search(r"INSTALLED_APPS = \[\n(.*?)\]", text, re.S)
    listed = apps.group(1)
    readme = readme_block('ASGI_APPLICATION = "myproject.asgi.application"')
    assert 'INSTALLED_APPS = ["daphne", ..., "channels", "mcp_transport", "myapp"]' in readme
    text = text.replace(apps.group(0), f'INSTALLED_APPS = [\n    "daphne",\n{listed}    "channels",\n'
                                       '    "mcp_transport",\n    "myapp",\n]')
    settings.write_text(text + '\nASGI_APPLICATION = "myproject.asgi.application"\n')
    (project / "myproject" / "asgi.py").write_text(readme_block("application = mcp_application(django_app)"))
    (project / "myapp" / "mcp.py").write_text(MCP_PY)
    return project


def test_the_readme_setup_passes_the_checks(project):
    result = run(project, "manage.py", "check")
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_manage_py_test_runs_the_readme_example(project):
    (project / "myapp" / "tests.py").write_text(readme_block("class MCPTests(TransactionTestCase)"))
    result = run(project, "manage.py", "test", "myapp", "-v", "2")
    assert "test_count_books" in result.stderr and "OK" in result.stderr, result.stderr


def test_pytest_runs_the_readme_example_with_the_plugin(project):
    conftest, test = readme_block('pytest_plugins = ["mcp_transport.pytest_plugin"]').split("# test_mcp.py")
    (project / "conftest.py").write_text(conftest)
    (project / "test_mcp.py").write_text("# test_mcp.py" + test)
    (project / "pytest.ini").write_text(PYTEST_INI)
    result = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mcp.py")
    assert "1 passed" in result.stdout, result.stdout
