"""The same in-process tests on PostgreSQL (psycopg 3): `pytest --ds=tests.settings_postgres`."""
from tests.settings import *  # noqa: F401,F403
from tests.settings import second_database, server_database

DATABASES = {"default": server_database("django.db.backends.postgresql", "PG", "5432", "postgres")}
DATABASES["second"] = second_database(DATABASES["default"])
