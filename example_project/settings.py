"""The example project: the embedded default (SQLite + in-memory channel layer, one process)."""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "mcp_transport",
    "example_project.example",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

ASGI_APPLICATION = "example_project.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCP_EXAMPLE_DB", str(BASE_DIR / "db.sqlite3")),
        # Keep the connection: reopening SQLite and re-running the PRAGMAs per query is costly.
        "CONN_MAX_AGE": None,
        # WAL lets readers and the writer overlap; IMMEDIATE + timeout queue concurrent writers.
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }
}

MCP_TRANSPORT = {
    "RETRY_MS": 1000,
    "DISCONNECT_POLICY": "never",
}

# MCP_EXAMPLE_OAUTH=1: the project is its own OAuth authorization server (django-oauth-toolkit,
# the `oauth` extra): its metadata, dynamic client registration, PKCE, a login and consent page,
# and tokens bound to the MCP endpoint (RFC 8707). Clients log in as a user of this project.
OAUTH = os.environ.get("MCP_EXAMPLE_OAUTH") == "1"
if OAUTH:
    INSTALLED_APPS.append("oauth2_provider")
    LOGIN_URL = "/accounts/login/"
    OAUTH2_PROVIDER = {
        "SCOPES": {"mcp": "Use the example MCP server", "profile": "See who you are"},
        "DEFAULT_SCOPES": ["mcp"],
        "PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        # MCP clients register themselves (RFC 7591), without an account here.
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        # Native clients (and the tests) listen on http://127.0.0.1 for the redirect.
        "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["client_secret_basic", "client_secret_post", "none"],
    }
    MCP_TRANSPORT.update({
        "AUTH_BACKENDS": ["mcp_transport.oauth.OAuthToolkitBackend", "mcp_transport.auth.BearerTokenBackend"],
        "REQUIRE_AUTH": True,
        "SCOPES_SUPPORTED": ["mcp", "profile"],
        # What a client is asked for first; `whoami` asks for profile when called (SEP-835).
        "CHALLENGE_SCOPES": ["mcp"],
        # Where clients reach the server (tokens are bound to it): MCP_EXAMPLE_ORIGIN, else each request's Host.
        "RESOURCE_ORIGIN": os.environ.get("MCP_EXAMPLE_ORIGIN"),
    })

STATIC_URL = "static/"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "mcp_transport": {
            "handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING"), "propagate": False,
        },
    },
}
