"""The same in-process tests on MariaDB/MySQL (mysqlclient), through the store's ORM path:
`pytest --ds=tests.settings_mariadb`.

As a project gets it: the server's collation (MariaDB's utf8mb4_general_ci folds case and trailing
spaces), and READ COMMITTED, which Django's MySQL backend sets unless OPTIONS isolation_level says
otherwise (the server's own default is REPEATABLE READ)."""
from tests.settings import *  # noqa: F401,F403
from tests.settings import second_database, server_database

DATABASES = {"default": server_database("django.db.backends.mysql", "MYSQL", "3306", "root",
                                        TEST={"CHARSET": "utf8mb4"})}
DATABASES["second"] = second_database(DATABASES["default"])
