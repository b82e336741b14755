"""Settings for the daphne processes the tests start: the example project's, with overrides.

MCP_TEST_TRANSPORT (JSON) is merged over MCP_TRANSPORT; MCP_TEST_OAUTH2_PROVIDER (JSON) over OAUTH2_PROVIDER (with MCP_EXAMPLE_OAUTH=1); MCP_EXAMPLE_DB picks the SQLite file;
MCP_TEST_DRF=1 adds Django REST framework and its tokens;
MCP_TEST_SERVER_DB (JSON: DATABASES["default"]) a database on PostgreSQL or MariaDB instead (tests/live.py
sets it when the suite runs on one); MCP_TEST_SCALED=1 switches to the scaled-out settings (PostgreSQL + Redis).
"""
import json
import os

if os.environ.get("MCP_TEST_SCALED") == "1":
    from example_project.settings_scaled import *  # noqa: F401,F403
else:
    from example_project.settings import *  # noqa: F401,F403
from example_project.settings import MCP_TRANSPORT as _BASE

MCP_TRANSPORT = {**_BASE, **json.loads(os.environ.get("MCP_TEST_TRANSPORT", "{}"))}

if os.environ.get("MCP_TEST_OAUTH2_PROVIDER"):
    # Merged over the toolkit's settings of MCP_EXAMPLE_OAUTH=1 (a resource server's introspection, say).
    OAUTH2_PROVIDER = {**OAUTH2_PROVIDER, **json.loads(os.environ["MCP_TEST_OAUTH2_PROVIDER"])}  # noqa: F405

if os.environ.get("MCP_TEST_SERVER_DB"):
    DATABASES = {"default": json.loads(os.environ["MCP_TEST_SERVER_DB"])}

if os.environ.get("MCP_TEST_TASK_RUNNER") == "1":
    # Django's Tasks framework (the django-tasks backport on 5.2) with its database backend.
    INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks", "django_tasks_db"]  # noqa: F405
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

if os.environ.get("MCP_TEST_DRF") == "1":
    # Django REST framework's token and session authentication (tests/test_drf_auth.py).
    INSTALLED_APPS = [*INSTALLED_APPS, "rest_framework", "rest_framework.authtoken"]  # noqa: F405
    REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ]}

if os.environ.get("MCP_TEST_REDIS_LAYER"):
    # Processes that share a database also share wake-ups: channels-redis under this prefix.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0")],
        "prefix": os.environ["MCP_TEST_REDIS_LAYER"]}}}
