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
