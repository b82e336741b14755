"""The same in-process tests on MariaDB/MySQL (mysqlclient), through the store's ORM path:
`pytest --ds=tests.settings_mariadb`.

As a project gets it: the server's collation (MariaDB's utf8mb4_general_ci folds case and trailing
spaces), and READ COMMITTED, which Django's MySQL backend sets unless OPTIONS isolation_level says
otherwise (the server's own default is REPEATABLE READ)."""
import os

from tests.settings import *  # noqa: F401,F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("MCP_TEST_MYSQL_NAME", "mcp_transport"),
        "USER": os.environ.get("MCP_TEST_MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("MCP_TEST_MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("MCP_TEST_MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_TEST_MYSQL_PORT", "3306"),
        "TEST": {"CHARSET": "utf8mb4"},  # Django's connections are utf8mb4 already
        "CONN_MAX_AGE": 0,
    }
}
