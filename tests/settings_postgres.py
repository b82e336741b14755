"""The same in-process tests on PostgreSQL (psycopg 3): `pytest --ds=tests.settings_postgres`."""
import hashlib
import os
from pathlib import Path

from tests.settings import *  # noqa: F401,F403

# One test database per checkout: two checkouts' suites on one server must not drop each other's.
_CHECKOUT = hashlib.sha1(str(Path(__file__).resolve().parent.parent).encode()).hexdigest()[:8]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("MCP_TEST_PG_NAME", "mcp_transport"),
        "USER": os.environ.get("MCP_TEST_PG_USER", "postgres"),
        "HOST": os.environ.get("MCP_TEST_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_TEST_PG_PORT", "5432"),
        "CONN_MAX_AGE": 0,
        "TEST": {"NAME": f"test_mcp_transport_{_CHECKOUT}"},
    }
}
