"""A brand-new project (`django-admin startproject`) wired up as the README says, its tests run by both
test runners: `manage.py test` and pytest with the app's plugin. The README's asgi.py and test examples
are taken from the README itself."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readme_project import apply_readme_settings, readme_block

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


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    result = subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """startproject, startapp, then the README's steps: settings.py, asgi.py, mcp.py."""
    project = tmp_path_factory.mktemp("first-hour")
    run(project, "-m", "django", "startproject", "myproject", ".")
    run(project, "manage.py", "startapp", "myapp")
    apply_readme_settings(project)
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
