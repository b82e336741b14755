"""The same in-process tests on MariaDB/MySQL (mysqlclient), through the store's ORM path:
`pytest --ds=tests.settings_mariadb`.

As a project gets it: the server's collation (MariaDB's utf8mb4_general_ci folds case and trailing
spaces), and READ COMMITTED, which Django's MySQL backend sets unless OPTIONS isolation_level says
otherwise (the server's own default is REPEATABLE READ)."""
import hashlib
import os
from pathlib import Path

from tests.settings import *  # noqa: F401,F403

# One test database per checkout: two checkouts' suites on one server must not drop each other's.
_CHECKOUT = hashlib.sha1(str(Path(__file__).resolve().parent.parent).encode()).hexdigest()[:8]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("MCP_TEST_MYSQL_NAME", "mcp_transport"),
        "USER": os.environ.get("MCP_TEST_MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("MCP_TEST_MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("MCP_TEST_MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_TEST_MYSQL_PORT", "3306"),
        "TEST": {"NAME": f"test_mcp_transport_{_CHECKOUT}", "CHARSET": "utf8mb4"},
        "CONN_MAX_AGE": 0,
    }
}
