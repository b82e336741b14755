"""MCP_TRANSPORT: defaults, override_settings reloads, system checks with stable ids."""
from django.core import checks
from django.test import override_settings

import pytest

from mcp_transport import policies
from mcp_transport.checks import (
    InvalidSettings, asgi_application_problems, check_deployment, check_settings, check_tools, daphne_problems,
)
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
    with override_settings(MCP_TRANSPORT={"AFTER_PRIMING_GRACE_SECONDS": -1}):
        assert ids(check_settings()) == ["mcp_transport.E032"]
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


def test_a_float_retry_is_an_error_that_says_so():
    """RETRY_MS counts milliseconds: 1.5 is E002 with a hint, not an error from deep in the import machinery."""
    with override_settings(MCP_TRANSPORT={"RETRY_MS": 1.5}):
        [error] = check_settings()
    assert error.id == "mcp_transport.E002" and "1.5 is neither" in error.msg and "rsplit" not in error.msg
    assert error.hint == "RETRY_MS counts milliseconds, in an int: 1500 for 1.5 s."
    for value in (True, None, [1000], {"ms": 1}):
        with override_settings(MCP_TRANSPORT={"RETRY_MS": value}):
            assert ids(check_settings()) == ["mcp_transport.E002"], value


def test_booleans_must_be_bools():
    with override_settings(MCP_TRANSPORT={"REQUIRE_AUTH": "yes", "AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]}):
        assert ids(check_settings()) == ["mcp_transport.E029"]
    with override_settings(MCP_TRANSPORT={"REQUIRE_AUTH": True, "AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"]}):
        assert check_settings() == []


def test_misspellings_get_a_did_you_mean():
    with override_settings(MCP_TRANSPORT={"RETRY_M": 500, "disconnect_policy": "never", "ZZZ": 1}):
        hints = {e.msg: e.hint for e in check_settings()}
    assert hints == {
        "MCP_TRANSPORT['RETRY_M'] is not a known setting.": "Did you mean 'RETRY_MS'?",
        "MCP_TRANSPORT['ZZZ'] is not a known setting.": None,
        "MCP_TRANSPORT['disconnect_policy'] is not a known setting.": "Did you mean 'DISCONNECT_POLICY'?",
    }
    with override_settings(MCP_TRANSPORT={"DISCONNECT_POLICY": "afterpriming"}):
        [error] = check_settings()
    assert error.id == "mcp_transport.E003" and error.hint == "Did you mean 'after_priming'?"


def test_a_session_timeout_below_the_last_seen_interval_is_flagged():
    """last_seen is written at most every 30 s (storage.orm.TOUCH_EVERY): a shorter idle timeout expires
    sessions that are in use."""
    with override_settings(MCP_TRANSPORT={"SESSION_IDLE_TIMEOUT": 30, "KEEPALIVE_SECONDS": 5}):
        assert ids(check_settings()) == ["mcp_transport.W009"]
    with override_settings(MCP_TRANSPORT={"SESSION_IDLE_TIMEOUT": 31, "KEEPALIVE_SECONDS": 5}):
        assert check_settings() == []


def test_a_tools_own_policy_is_checked():
    from mcp_transport import MCPServer
    from mcp_transport.protocol import server as servers

    other = MCPServer("policy-checks")
    try:
        @other.tool(disconnect_policy="afterpriming", retry_ms=2.5)
        def misspelled() -> str:
            """A policy that would fail its first call."""

        @other.tool(disconnect_policy="idle", retry_ms="mcp_transport.policies.ExponentialRetry")
        def fine() -> str:
            """Both valid."""

        errors = check_tools()
        assert ids(errors) == ["mcp_transport.E031"] * 2
        assert "Did you mean 'after_priming'?" in errors[0].msg and "retry_ms" in errors[1].msg
    finally:
        del servers.servers["policy-checks"]


def test_bad_settings_stop_mcp_application_at_startup():
    """Plain daphne and uvicorn run no system checks: mcp_application (what asgi.py calls when the server
    loads it) refuses a misspelled policy, instead of a 500 at the first tool call."""
    from django.core.asgi import get_asgi_application

    from mcp_transport.routing import mcp_application

    django_app = get_asgi_application()
    with override_settings(MCP_TRANSPORT={"DISCONNECT_POLICY": "after_primng"}):
        with pytest.raises(InvalidSettings, match=r"mcp_transport.E003: .*'after_primng'.* Did you mean 'after_priming'"):
            mcp_application(django_app)
    with override_settings(MCP_TRANSPORT={"DISCONNECT_POLICY": "after_primng"},
                           SILENCED_SYSTEM_CHECKS=["mcp_transport.E003"]):
        assert mcp_application(django_app).mcp_routes
    with override_settings(MCP_TRANSPORT={"TYPO": 1}):  # warnings do not stop it
        assert mcp_application(django_app).mcp_routes


def test_runserver_needs_daphne_and_an_asgi_application_that_routes_mcp():
    assert check_deployment() == []  # the example project
    assert ids(daphne_problems(["django.contrib.admin", "channels", "mcp_transport"])) == ["mcp_transport.W006"]
    assert ids(daphne_problems(["django.contrib.staticfiles", "daphne"])) == ["mcp_transport.W004"]
    assert daphne_problems(["daphne", "django.contrib.staticfiles"]) == []
    for name in ("routed", "in_a_router", "in_middleware", "in_a_function", "in_a_closure"):
        assert asgi_application_problems(f"tests.asgi_variants.{name}") == [], name
    assert ids(asgi_application_problems("tests.asgi_variants.django_only")) == ["mcp_transport.W008"]
    assert ids(asgi_application_problems(None)) == ["mcp_transport.W007"]
    assert ids(asgi_application_problems("tests.no_such_module.application")) == ["mcp_transport.E030"]
    with override_settings(MCP_TRANSPORT={"DISCONNECT_POLICY": "sometimes"}):
        # asgi.py refuses to load: the settings' own check (E003) says why, not a second error.
        assert asgi_application_problems("tests.asgi_variants_fresh.application") == []


def test_without_asgi_application_runserver_is_warned(settings):
    del settings.ASGI_APPLICATION
    assert ids(check_deployment()) == ["mcp_transport.W007"]


def test_tool_names_clients_may_refuse_are_a_warning():
    from mcp_transport import MCPServer
    from mcp_transport.checks import check_tools
    from mcp_transport.protocol import server as servers

    other = MCPServer("tool-names")
    try:
        other.tool(name="fine.name-1_x")(lambda: "ok")
        assert check_tools() == []
        other.tool(name="has space/slash")(lambda: "ok")
        other.tool(name="x" * 129)(lambda: "ok")
        assert ids(check_tools()) == ["mcp_transport.W011", "mcp_transport.W011"]
    finally:
        del servers.servers["tool-names"]


STATIC_UNSERVED = {"DEBUG": False, "STATIC_ROOT": None, "STATIC_URL": "/static/",
                   "ASGI_APPLICATION": "tests.asgi_variants.routed"}
WHITENOISE = "whitenoise.middleware.WhiteNoiseMiddleware"


def test_an_admin_nothing_serves_the_styles_of_is_a_warning(settings, tmp_path):
    """DEBUG off, no WhiteNoise, no STATIC_ROOT, nothing around the application: no server serves the
    admin's CSS (runserver neither). Each way a project serves them silences the warning."""
    from mcp_transport.checks import check_static_files, check_static_files_deployed

    with override_settings(**STATIC_UNSERVED):
        assert ids(check_static_files()) == ["mcp_transport.W016"]
        assert check_static_files_deployed() == []  # W016 says it already
        with override_settings(MIDDLEWARE=[WHITENOISE, *settings.MIDDLEWARE]):
            assert ids(check_static_files()) == ["mcp_transport.W016"]  # WhiteNoise with no files to serve
            with override_settings(STATIC_ROOT=str(tmp_path)):
                assert check_static_files() == []
            with override_settings(WHITENOISE_USE_FINDERS=True):
                assert check_static_files() == []
        with override_settings(STATIC_ROOT=str(tmp_path)):  # collectstatic, a proxy serving it
            assert check_static_files() == []
        with override_settings(STATIC_URL="https://cdn.example.com/static/"):
            assert check_static_files() == []
        remote = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
        with override_settings(STORAGES=remote):  # not on this disk: S3 and the like give their own URLs
            assert check_static_files() == []
        with override_settings(ASGI_APPLICATION="tests.asgi_variants.in_middleware"):  # ASGIStaticFilesHandler
            assert check_static_files() == []
        with override_settings(INSTALLED_APPS=[a for a in settings.INSTALLED_APPS if a != "django.contrib.admin"]):
            assert check_static_files() == []


def test_with_debug_on_only_the_deploy_checks_warn_that_runserver_alone_serves_the_styles():
    from django.core.checks import run_checks

    from mcp_transport.checks import check_static_files, check_static_files_deployed

    with override_settings(**{**STATIC_UNSERVED, "DEBUG": True}):
        assert check_static_files() == []  # runserver serves them
        assert ids(check_static_files_deployed()) == ["mcp_transport.W017"]
        assert "mcp_transport.W017" not in ids(run_checks(tags=["mcp_transport"]))
        assert "mcp_transport.W017" in ids(run_checks(tags=["mcp_transport"], include_deployment_checks=True))
        with override_settings(MIDDLEWARE=[WHITENOISE]):  # WhiteNoise's finders, DEBUG being on
            assert check_static_files_deployed() == []


def test_bad_oauth_settings_get_stable_ids(settings):
    from mcp_transport.checks import check_settings

    for value in ("mcp", [1], {"mcp": 1}):
        with override_settings(MCP_TRANSPORT={"CHALLENGE_SCOPES": value}):
            assert ids(check_settings()) == ["mcp_transport.E034"], value
    for value in ("https://mcp.example.com/mcp", "mcp.example.com", "ftp://x", "https://", 443):
        with override_settings(MCP_TRANSPORT={"RESOURCE_ORIGIN": value}):
            assert ids(check_settings()) == ["mcp_transport.E035"], value
    for value in ("https://mcp.example.com", "http://127.0.0.1:8000/", None):
        with override_settings(MCP_TRANSPORT={"RESOURCE_ORIGIN": value, "CHALLENGE_SCOPES": ["mcp"]}):
            assert check_settings() == [], value
    with override_settings(MCP_TRANSPORT={"AUTH_BACKENDS": ["mcp_transport.oauth.OAuthToolkitBackend"]}):
        assert ids(check_settings()) == ["mcp_transport.E036"]
        settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "oauth2_provider"]
        assert check_settings() == []
