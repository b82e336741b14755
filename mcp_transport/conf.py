"""The `MCP_TRANSPORT` setting, merged over defaults and re-read on `setting_changed`."""
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

SETTING_NAME = "MCP_TRANSPORT"

DEFAULTS = {
    # SSE `retry` field (ms), or a dotted path to a RetryPolicy class.
    "RETRY_MS": 1000,
    # "never" | "after_priming" | "after_seconds" | "idle" | dotted path to a DisconnectPolicy.
    "DISCONNECT_POLICY": "never",
    "DISCONNECT_AFTER_SECONDS": 30.0,
    # "after_priming" keeps a connection this long for an answer that is nearly there.
    "AFTER_PRIMING_GRACE_SECONDS": 0.05,
    "KEEPALIVE_SECONDS": 15.0,
    # Origins allowed besides same-origin and no Origin at all; "*" allows any.
    "ALLOWED_ORIGINS": [],
    "JSON_RESPONSE": False,
    "SESSION_IDLE_TIMEOUT": 24 * 3600,
    "EVENT_RETENTION_SECONDS": 3600,
    "MAX_REQUEST_BYTES": 4 * 1024 * 1024,
    # How long a server-to-client request (sampling, elicitation, roots) may wait, None = forever.
    "CLIENT_REQUEST_TIMEOUT": None,
    # How often a worker compares the streams it holds with the table (lost wake-ups, Redis restarts).
    "WAKEUP_SWEEP_SECONDS": 2.0,
    # A request's worker renews its lease every third of this; past it, the request is failed.
    "LEASE_SECONDS": 30.0,
    # On SIGTERM, how long running requests may take to finish before they are failed.
    "SHUTDOWN_GRACE_SECONDS": 20.0,
    # Authentication backends (dotted paths), tried in order; [] = no authentication at all.
    "AUTH_BACKENDS": [],
    # Refuse anonymous requests (401 with WWW-Authenticate) instead of serving them.
    "REQUIRE_AUTH": False,
    # For the OAuth protected resource metadata (RFC 9728) document and WWW-Authenticate.
    # The origin clients reach this server at ("https://mcp.example.com"): OAuth tokens must be bound
    # to it (RFC 8707), metadata names it. None = each request's scheme and Host (ALLOWED_HOSTS
    # checks the Host without its port: set this where tokens of another port must not fit).
    "RESOURCE_ORIGIN": None,
    # [] = the issuers the backends name (django-oauth-toolkit's: mcp_transport.oauth).
    "AUTHORIZATION_SERVERS": [],
    "SCOPES_SUPPORTED": [],
    # The scopes a 401 asks for (the baseline every client needs; tools, prompts and resources ask
    # for theirs with 403 insufficient_scope when used); None = SCOPES_SUPPORTED.
    "CHALLENGE_SCOPES": None,
    # Limits (each logged when hit): 429 for requests, a JSON-RPC error for streams.
    "MAX_SESSIONS_PER_PRINCIPAL": 100,
    "MAX_STREAMS_PER_SESSION": 32,
    "MAX_EVENTS_PER_STREAM": 100_000,
    "MAX_BYTES_PER_STREAM": 64 * 1024 * 1024,
    "MAX_EARLY_RECONNECTS": 3,
    "MAX_REQUESTS_PER_PRINCIPAL": 64,
    # Which protocol eras the endpoint serves: "modern" (2026-07-28: stateless, per-request _meta)
    # and "legacy" (2025-11-25 and earlier: initialize, sessions, the GET stream).
    "PROTOCOL_ERAS": ["modern", "legacy"],
    # Signs the requestState of multi round-trip requests (every worker needs the same); None = SECRET_KEY.
    "REQUEST_STATE_KEY": None,
    # How long a client may take to answer a tool's question before its requestState expires.
    "REQUEST_STATE_SECONDS": 900,
    # ttlMs on modern discovery and list results (how long a client may reuse them).
    "CACHE_TTL_MS": 60_000,
    # Tasks: a call of a tool that supports them, from a client that accepts them, becomes a task
    # when it has not finished after TASK_GRACE_SECONDS; it is kept TASK_TTL_SECONDS (None: until
    # pruned by hand), and clients are asked to poll every TASK_POLL_INTERVAL_MS.
    "TASK_GRACE_SECONDS": 0.5,
    "TASK_TTL_SECONDS": 86400,
    "TASK_POLL_INTERVAL_MS": 1000,
    # Where a task's work runs: "process" (the web process that received the call) or
    # "django_tasks" (Django's Tasks framework: django.tasks, or the django-tasks backport on 5.2;
    # TASK_BACKEND names its backend, e.g. django_tasks_db's, whose db_worker runs the work).
    "TASK_RUNNER": "process",
    "TASK_BACKEND": "default",
    # Prometheus metrics (mcp_transport.metrics), counted when prometheus-client is installed.
    "METRICS": True,
    # OpenTelemetry spans (mcp_transport.tracing), made when opentelemetry-api is installed.
    "TRACING": True,
    # Instructions returned by initialize for servers that set none themselves.
    "INSTRUCTIONS": None,
}

_cache = None


def get_config():
    global _cache
    if _cache is None:
        user = getattr(settings, SETTING_NAME, None) or {}
        _cache = {**DEFAULTS, **user}
    return _cache


class _Settings:
    """Attribute access to the merged dict: `mcp_settings.RETRY_MS`."""

    def __getattr__(self, name):
        try:
            return get_config()[name]
        except KeyError:
            raise AttributeError(f"Unknown MCP_TRANSPORT setting: {name}") from None


mcp_settings = _Settings()


@receiver(setting_changed)
def _reload(*, setting, **kwargs):
    global _cache
    if setting == SETTING_NAME:
        _cache = None
