"""The same in-process tests on PostgreSQL (psycopg 3): `pytest --ds=tests.settings_postgres`."""
import os

from tests.settings import *  # noqa: F401,F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("MCP_TEST_PG_NAME", "mcp_transport"),
        "USER": os.environ.get("MCP_TEST_PG_USER", "postgres"),
        "HOST": os.environ.get("MCP_TEST_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_TEST_PG_PORT", "5432"),
        "CONN_MAX_AGE": 0,
    }
}
# Set up only for the tests that ask for it (the store following a database router).
DATABASES["second"] = {**DATABASES["default"], "NAME": DATABASES["default"]["NAME"] + "_second"}
