"""Settings for the suite's in-process tests (pytest-django). A file database, so threads share it."""
import os
import tempfile

from example_project.settings import *  # noqa: F401,F403
from example_project.settings import DATABASES as _EXAMPLE_DATABASES

_TEST_DB = os.path.join(tempfile.gettempdir(), f"mcp-transport-test-{os.getpid()}.sqlite3")
_SECOND_DB = os.path.join(tempfile.gettempdir(), f"mcp-transport-test-{os.getpid()}-second.sqlite3")
DATABASES = {
    "default": {**_EXAMPLE_DATABASES["default"], "NAME": _TEST_DB, "TEST": {"NAME": _TEST_DB}},
    # Set up only for the tests that ask for it (the store following a database router).
    "second": {**_EXAMPLE_DATABASES["default"], "NAME": _SECOND_DB, "TEST": {"NAME": _SECOND_DB}},
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MCP_TRANSPORT = {}


def server_database(engine: str, env: str, port: str, user: str, **options) -> dict:
    """A database server's settings for the suite, from MCP_TEST_<env>_NAME/USER/PASSWORD/HOST/PORT,
    with one test database per checkout (two checkouts' suites on one server must not drop each
    other's)."""
    import hashlib
    from pathlib import Path

    checkout = hashlib.sha1(str(Path(__file__).resolve().parent.parent).encode()).hexdigest()[:8]
    test = {"NAME": f"test_mcp_transport_{checkout}", **options.pop("TEST", {})}
    return {
        "ENGINE": engine,
        "NAME": os.environ.get(f"MCP_TEST_{env}_NAME", "mcp_transport"),
        "USER": os.environ.get(f"MCP_TEST_{env}_USER", user),
        "PASSWORD": os.environ.get(f"MCP_TEST_{env}_PASSWORD", ""),
        "HOST": os.environ.get(f"MCP_TEST_{env}_HOST", "127.0.0.1"),
        "PORT": os.environ.get(f"MCP_TEST_{env}_PORT", port),
        "CONN_MAX_AGE": 0,
        **options,
        "TEST": test,
    }


def second_database(default: dict) -> dict:
    """Set up only for the tests that ask for it (the store following a database router)."""
    return {**default, "NAME": default["NAME"] + "_second",
            "TEST": {**default["TEST"], "NAME": default["TEST"]["NAME"] + "_second"}}
