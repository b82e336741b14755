"""The example project scaled out: PostgreSQL for the tables, Redis for the channel layer and the cache.

Several daphne processes with these settings can sit behind a load balancer without sticky
sessions. Connection details come from the environment (defaults: this machine's services).
"""
import os

from .settings import *  # noqa: F401,F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("MCP_PG_NAME", "mcp_example"),
        "USER": os.environ.get("MCP_PG_USER", "postgres"),
        "PASSWORD": os.environ.get("MCP_PG_PASSWORD", ""),
        "HOST": os.environ.get("MCP_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_PG_PORT", "5432"),
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
        # Lets mcp_transport prepare its hot statements (Django's own queries stay unprepared with its
        # default client-side binding): a fifth less PostgreSQL CPU per call. Remove it behind
        # PgBouncer in transaction mode before 1.21 (or without max_prepared_statements).
        "OPTIONS": {"prepare_threshold": 5},
    }
}

REDIS_URL = os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # Above channels_redis's 5 s blocking receive (redis-py 8 defaults to 5 s): check W005.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                   "prefix": os.environ.get("MCP_REDIS_PREFIX", "mcp")},
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("MCP_REDIS_PREFIX", "mcp"),
    }
}
