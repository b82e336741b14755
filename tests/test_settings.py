"""MCP_TRANSPORT: defaults, override_settings reloads, system checks with stable ids."""
from django.core import checks
from django.test import override_settings

from mcp_transport import policies
from mcp_transport.checks import check_settings
from mcp_transport.conf import mcp_settings


def ids(errors):
    return sorted(e.id for e in errors)


def test_defaults():
    assert mcp_settings.RETRY_MS == 1000
    assert mcp_settings.DISCONNECT_POLICY == "never"
    assert mcp_settings.DISCONNECT_AFTER_SECONDS == 30.0
    assert mcp_settings.KEEPALIVE_SECONDS == 15.0
    assert mcp_settings.JSON_RESPONSE is False


def test_override_settings_reloads_values_and_policies():
    assert isinstance(policies.default_disconnect(), policies.Never)
    with override_settings(MCP_TRANSPORT={"RETRY_MS": 250, "DISCONNECT_POLICY": "after_priming"}):
        assert mcp_settings.RETRY_MS == 250
        assert mcp_settings.KEEPALIVE_SECONDS == 15.0
        assert isinstance(policies.default_disconnect(), policies.AfterPriming)
        assert policies.default_retry().retry_ms(policies.Connection(1, "request")) == 250
    assert mcp_settings.RETRY_MS == 1000
    assert isinstance(policies.default_disconnect(), policies.Never)


def test_valid_settings_pass_the_checks():
    with override_settings(MCP_TRANSPORT={"RETRY_MS": "mcp_transport.policies.ExponentialRetry",
                                          "DISCONNECT_POLICY": "mcp_transport.policies.Idle"}):
        assert check_settings() == []


def test_bad_settings_get_stable_ids():
    bad = {
        "RETRY_MS": "no.such.Policy",
        "DISCONNECT_POLICY": "sometimes",
        "DISCONNECT_AFTER_SECONDS": 0,
        "KEEPALIVE_SECONDS": "x",
        "SESSION_IDLE_TIMEOUT": -1,
        "EVENT_RETENTION_SECONDS": None,
        "MAX_REQUEST_BYTES": 0,
        "CLIENT_REQUEST_TIMEOUT": -5,
        "ALLOWED_ORIGINS": "https://a.example",
        "JSON_RESPONSE": "yes",
        "TYPO": 1,
    }
    with override_settings(MCP_TRANSPORT=bad):
        assert ids(check_settings()) == [
            "mcp_transport.E002", "mcp_transport.E003", "mcp_transport.E004", "mcp_transport.E005",
            "mcp_transport.E006", "mcp_transport.E007", "mcp_transport.E008", "mcp_transport.E009",
            "mcp_transport.E010", "mcp_transport.E011", "mcp_transport.W001",
        ]
    with override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["no.such.Backend"], "AUTHORIZATION_SERVERS": "x"}):
        assert ids(check_settings()) == ["mcp_transport.E015", "mcp_transport.E017"]
    with override_settings(MCP_TRANSPORT={"REQUIRE_AUTH": True}):
        assert ids(check_settings()) == ["mcp_transport.E016"]
    with override_settings(MCP_TRANSPORT=["not", "a", "dict"]):
        assert ids(check_settings()) == ["mcp_transport.E001"]
    with override_settings(MCP_TRANSPORT={"ALLOWED_ORIGINS": ["*"], "RETRY_MS": -1}):
        assert ids(check_settings()) == ["mcp_transport.E002", "mcp_transport.W002"]


def test_a_redis_layer_that_times_out_while_idle_is_flagged():
    """W005: redis-py 8 reads with a 5 s timeout by default, channels_redis blocks 5 s per receive."""
    from redis.asyncio import Connection

    redis_default = Connection().socket_timeout
    layer = {"BACKEND": "channels_redis.core.RedisChannelLayer"}
    cases = [
        ({"hosts": ["redis://127.0.0.1:6379/0"]}, redis_default is not None and redis_default <= 5),
        ({"hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}]}, True),
        ({"hosts": [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 30}]}, False),
    ]
    for config, flagged in cases:
        with override_settings(CHANNEL_LAYERS={"default": {**layer, "CONFIG": config}}):
            assert ("mcp_transport.W005" in ids(check_settings())) is flagged, config
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        assert "mcp_transport.W005" not in ids(check_settings())
    from example_project import settings_scaled

    with override_settings(CHANNEL_LAYERS=settings_scaled.CHANNEL_LAYERS):
        assert "mcp_transport.W005" not in ids(check_settings())


def test_checks_are_registered():
    assert check_settings in checks.registry.registry.get_checks()


def test_policies():
    conn = policies.Connection(1, "request", opened_at=100.0, last_event_at=105.0)
    assert policies.Never().deadline(conn) is None
    assert policies.AfterPriming().deadline(conn) == 100.05
    assert policies.AfterPriming(0).deadline(conn) == 100.0
    assert policies.AfterSeconds(2).deadline(conn) == 102.0
    assert policies.Idle(2).deadline(conn) == 107.0
    backoff = policies.ExponentialRetry()
    assert [backoff.retry_ms(policies.Connection(1, "request", reconnects=n)) for n in (0, 1, 2, 10)] == [
        1000, 2000, 4000, 30000]


def test_bad_modern_era_settings_get_stable_ids():
    bad = {"PROTOCOL_ERAS": ["modern", "2026"], "REQUEST_STATE_KEY": "short", "REQUEST_STATE_SECONDS": 0,
           "CACHE_TTL_MS": -1}
    with override_settings(MCP_TRANSPORT=bad):
        assert ids(check_settings()) == ["mcp_transport.E019", "mcp_transport.E020", "mcp_transport.E021",
                                         "mcp_transport.E022"]
    with override_settings(MCP_TRANSPORT={"PROTOCOL_ERAS": [], "REQUEST_STATE_KEY": "k" * 40}):
        assert ids(check_settings()) == ["mcp_transport.E019"]
    with override_settings(MCP_TRANSPORT={"PROTOCOL_ERAS": ["legacy"], "CACHE_TTL_MS": 0}):
        assert check_settings() == []
    with override_settings(MCP_TRANSPORT={"TASK_GRACE_SECONDS": -1, "TASK_TTL_SECONDS": 0,
                                          "TASK_POLL_INTERVAL_MS": 1.5}):
        assert ids(check_settings()) == ["mcp_transport.E024", "mcp_transport.E025", "mcp_transport.E026"]
    with override_settings(MCP_TRANSPORT={"TASK_GRACE_SECONDS": 0, "TASK_TTL_SECONDS": None}):
        assert check_settings() == []
    with override_settings(MCP_TRANSPORT={"TASK_RUNNER": "celery"}):
        assert ids(check_settings()) == ["mcp_transport.E027"]
    with override_settings(MCP_TRANSPORT={"TASK_RUNNER": "django_tasks", "TASK_BACKEND": "nowhere"}):
        assert ids(check_settings()) == ["mcp_transport.E028"]


def test_header_params_clients_would_reject_are_check_errors():
    from typing import Annotated

    from mcp_transport import Header, MCPServer
    from mcp_transport.checks import check_tools, header_param_problems
    from mcp_transport.protocol import server as servers

    other = MCPServer("header-checks")
    try:
        @other.tool
        def good(region: Annotated[str, Header("Region")], count: Annotated[int | None, Header("Count")] = None):
            """Fine: a string and an optional integer."""

        @other.tool
        def bad(a: Annotated[float, Header("Ratio")], b: Annotated[str, Header("ratio")],
                c: Annotated[str, Header("Bad Name")]):
            """A number, a duplicate name (case-insensitively), a name that is no header token."""

        assert header_param_problems(other.tools["good"]) == []
        problems = header_param_problems(other.tools["bad"])
        assert len(problems) == 3 and "only string, integer and boolean" in problems[0]
        assert "used twice" in problems[1] and "not an HTTP header name token" in problems[2]
        assert ids(check_tools()) == ["mcp_transport.E023"] * 3
    finally:
        del servers.servers["header-checks"]
