"""System checks on MCP_TRANSPORT, the tools and the project's wiring. Ids are stable; the README
lists them."""
import difflib
import re
import types
from numbers import Real

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from . import metrics, policies, tracing
from .conf import DEFAULTS, SETTING_NAME, get_config
from .storage.orm import TOUCH_EVERY


def _positive_number(value, allow_none=False):
    if value is None:
        return allow_none
    return isinstance(value, Real) and not isinstance(value, bool) and value > 0


@checks.register("mcp_transport")
def check_settings(app_configs=None, **kwargs):
    from django.conf import settings

    errors = []
    user = getattr(settings, SETTING_NAME, {})
    if not isinstance(user, dict):
        return [checks.Error(f"{SETTING_NAME} must be a dict.", id="mcp_transport.E001")]
    config = get_config()
    for key in sorted(set(user) - set(DEFAULTS), key=str):
        close = difflib.get_close_matches(str(key).upper(), DEFAULTS, n=1)
        errors.append(checks.Warning(f"{SETTING_NAME}[{key!r}] is not a known setting.",
                                     hint=f"Did you mean {close[0]!r}?" if close else None, id="mcp_transport.W001"))

    problem = retry_problem(config["RETRY_MS"])
    if problem:
        errors.append(checks.Error(
            f"RETRY_MS must be a non-negative int (milliseconds) or a dotted path to a RetryPolicy: {problem}.",
            hint=_retry_hint(config["RETRY_MS"]), id="mcp_transport.E002"))
    problem = disconnect_problem(config["DISCONNECT_POLICY"])
    if problem:
        errors.append(checks.Error(
            "DISCONNECT_POLICY must be never, after_priming, after_seconds, idle or a dotted path "
            f"to a DisconnectPolicy: {problem}.", hint=_disconnect_hint(config["DISCONNECT_POLICY"]),
            id="mcp_transport.E003"))
    for key, eid in (("DISCONNECT_AFTER_SECONDS", "E004"), ("KEEPALIVE_SECONDS", "E005"),
                     ("SESSION_IDLE_TIMEOUT", "E006"), ("EVENT_RETENTION_SECONDS", "E007"),
                     ("MAX_REQUEST_BYTES", "E008"), ("WAKEUP_SWEEP_SECONDS", "E012"),
                     ("LEASE_SECONDS", "E013"), ("SHUTDOWN_GRACE_SECONDS", "E014")):
        if not _positive_number(config[key]):
            errors.append(checks.Error(f"{key} must be a positive number.", id=f"mcp_transport.{eid}"))
    if not _positive_number(config["CLIENT_REQUEST_TIMEOUT"], allow_none=True):
        errors.append(checks.Error("CLIENT_REQUEST_TIMEOUT must be a positive number or None.",
                                   id="mcp_transport.E009"))
    origins = config["ALLOWED_ORIGINS"]
    if not isinstance(origins, (list, tuple)) or not all(isinstance(o, str) for o in origins):
        errors.append(checks.Error("ALLOWED_ORIGINS must be a list of strings.", id="mcp_transport.E010"))
    elif "*" in origins:
        errors.append(checks.Warning("ALLOWED_ORIGINS contains '*': any web page may call this server.",
                                     id="mcp_transport.W002"))
    if not isinstance(config["JSON_RESPONSE"], bool):
        errors.append(checks.Error("JSON_RESPONSE must be a bool.", id="mcp_transport.E011"))
    if (isinstance(config["KEEPALIVE_SECONDS"], Real) and isinstance(config["SESSION_IDLE_TIMEOUT"], Real)
            and config["KEEPALIVE_SECONDS"] >= config["SESSION_IDLE_TIMEOUT"]):
        errors.append(checks.Warning("KEEPALIVE_SECONDS should be well below SESSION_IDLE_TIMEOUT.",
                                     id="mcp_transport.W003"))
    touch = TOUCH_EVERY.total_seconds()
    if _positive_number(config["SESSION_IDLE_TIMEOUT"]) and config["SESSION_IDLE_TIMEOUT"] <= touch:
        errors.append(checks.Warning(
            f"SESSION_IDLE_TIMEOUT ({config['SESSION_IDLE_TIMEOUT']} s) is not above the {touch:g} s between "
            "writes of a session's last_seen: sessions in use would expire.",
            hint=f"Set it above {touch:g} s.", id="mcp_transport.W009"))
    for key in ("MAX_SESSIONS_PER_PRINCIPAL", "MAX_STREAMS_PER_SESSION", "MAX_EVENTS_PER_STREAM",
                "MAX_BYTES_PER_STREAM", "MAX_EARLY_RECONNECTS", "MAX_REQUESTS_PER_PRINCIPAL"):
        value = config[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            errors.append(checks.Error(f"{key} must be a non-negative int.", id="mcp_transport.E018"))
    backends = config["AUTH_BACKENDS"]
    if not isinstance(backends, (list, tuple)):
        errors.append(checks.Error("AUTH_BACKENDS must be a list of dotted paths.", id="mcp_transport.E015"))
    else:
        for path in backends:
            try:
                backend = import_string(path)
                if not callable(getattr(backend, "authenticate", None)):
                    raise TypeError("no authenticate() method")
            except Exception as exc:
                errors.append(checks.Error(f"AUTH_BACKENDS: cannot use {path!r} ({exc}).", id="mcp_transport.E015"))
        if config["REQUIRE_AUTH"] and not backends:
            errors.append(checks.Error("REQUIRE_AUTH needs at least one of AUTH_BACKENDS.", id="mcp_transport.E016"))
    if not isinstance(config["REQUIRE_AUTH"], bool):
        errors.append(checks.Error(f"REQUIRE_AUTH must be a bool, not {config['REQUIRE_AUTH']!r}.",
                                   id="mcp_transport.E029"))
    for key in ("AUTHORIZATION_SERVERS", "SCOPES_SUPPORTED"):
        value = config[key]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            errors.append(checks.Error(f"{key} must be a list of strings.", id="mcp_transport.E017"))
    errors += _check_redis_layer(getattr(settings, "CHANNEL_LAYERS", {}) or {})
    errors += _check_modern(config)
    errors += _check_metrics(config, user)
    errors += _check_oauth(config, settings)
    errors += _check_tracing(config, user)
    return errors


def _check_oauth(config: dict, settings) -> list:
    errors = []
    challenge = config["CHALLENGE_SCOPES"]
    if challenge is not None and (not isinstance(challenge, (list, tuple))
                                  or not all(isinstance(v, str) for v in challenge)):
        errors.append(checks.Error("CHALLENGE_SCOPES must be a list of strings or None.", id="mcp_transport.E034"))
    origin = config["RESOURCE_ORIGIN"]
    if origin is not None and not (isinstance(origin, str) and ORIGIN.fullmatch(origin.rstrip("/"))):
        errors.append(checks.Error(f"RESOURCE_ORIGIN must be None or scheme://host[:port], not {origin!r}.",
                                   hint="e.g. \"https://mcp.example.com\": no path, the MCP paths are added to it",
                                   id="mcp_transport.E035"))
    backends = config["AUTH_BACKENDS"] if isinstance(config["AUTH_BACKENDS"], (list, tuple)) else []
    if any(isinstance(p, str) and p.startswith("mcp_transport.oauth.") for p in backends) and (
            "oauth2_provider" not in settings.INSTALLED_APPS):
        errors.append(checks.Error("mcp_transport.oauth's backends read django-oauth-toolkit's tables and settings: "
                                   "add 'oauth2_provider' to INSTALLED_APPS.",
                                   hint="pip install 'django-mcp-transport[oauth]'", id="mcp_transport.E036"))
    return errors


ORIGIN = re.compile(r"https?://[^/\s?#]+")


def retry_problem(value) -> str | None:
    """What is wrong with a RETRY_MS (or a tool's retry_ms) value, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, str, type, policies.RetryPolicy)):
        return f"{value!r} is neither"
    if isinstance(value, int) and value < 0:
        return f"{value} is negative"
    try:
        policies.resolve_retry(value)
    except Exception as exc:
        return f"{value!r}: {exc}"
    return None


def _retry_hint(value):
    if isinstance(value, float) and value >= 0:
        return f"RETRY_MS counts milliseconds, in an int: {round(value * 1000)} for {value:g} s."
    return None


def disconnect_problem(value) -> str | None:
    """What is wrong with a DISCONNECT_POLICY (or a tool's disconnect_policy) value, or None."""
    if not isinstance(value, (str, type, policies.DisconnectPolicy)):
        return f"{value!r} is neither"
    try:
        policies.resolve_disconnect(value)
    except Exception as exc:
        return f"{value!r}: {exc}"
    return None


def _disconnect_hint(value):
    close = difflib.get_close_matches(value, policies.BUILTIN_DISCONNECT, n=1) if isinstance(value, str) else []
    return f"Did you mean {close[0]!r}?" if close else None


class InvalidSettings(ImproperlyConfigured):
    """The errors of the checks below, where no system checks run: an ASGI server loading asgi.py."""


def refuse_invalid_settings():
    """Raise InvalidSettings when the checks of the settings and the tools find errors (silenced ones
    aside): plain daphne or uvicorn then fails at startup, as runserver does, and not at the first call
    that needs the setting."""
    from django.conf import settings

    silenced = set(settings.SILENCED_SYSTEM_CHECKS)
    errors = [e for e in check_settings() + check_tools() if e.is_serious() and e.id not in silenced]
    if errors:
        raise InvalidSettings("System check errors in the MCP transport's settings or tools "
                              "(python manage.py check lists them):\n"
                              + "\n".join(f"{e.id}: {e.msg}" + (f" {e.hint}" if e.hint else "") for e in errors))


def _check_extra(config: dict, user: dict, key: str, module, ids: tuple[str, str], missing: str, extra: str) -> list:
    """A bool switch of an optional extra (`module.available()`): E if not a bool, W if asked for
    explicitly without the extra installed."""
    if not isinstance(config[key], bool):
        return [checks.Error(f"{key} must be a bool.", id=f"mcp_transport.{ids[0]}")]
    if user.get(key) is True and not module.available():
        return [checks.Warning(f"{key} is True, but {missing}", hint=f"pip install 'django-mcp-transport[{extra}]'",
                               id=f"mcp_transport.{ids[1]}")]
    return []


def _check_metrics(config: dict, user: dict) -> list:
    return _check_extra(config, user, "METRICS", metrics, ("E033", "W010"),
                        "prometheus-client is not installed: nothing is counted.", "metrics")


def _check_tracing(config: dict, user: dict) -> list:
    return _check_extra(config, user, "TRACING", tracing, ("E040", "W014"),
                        "opentelemetry-api is not installed: no span is made.", "otel")


def _check_modern(config: dict) -> list:
    errors = []
    eras = config["PROTOCOL_ERAS"]
    if (not isinstance(eras, (list, tuple)) or not eras or not all(e in ("modern", "legacy") for e in eras)):
        errors.append(checks.Error('PROTOCOL_ERAS must list "modern", "legacy" or both.', id="mcp_transport.E019"))
    key = config["REQUEST_STATE_KEY"]
    if key is not None and (not isinstance(key, str) or len(key) < 32):
        errors.append(checks.Error("REQUEST_STATE_KEY must be None (SECRET_KEY) or a secret string of 32 "
                                   "characters or more, the same on every worker.", id="mcp_transport.E020"))
    if not _positive_number(config["REQUEST_STATE_SECONDS"]):
        errors.append(checks.Error("REQUEST_STATE_SECONDS must be a positive number.", id="mcp_transport.E021"))
    priming_grace = config["AFTER_PRIMING_GRACE_SECONDS"]
    if not isinstance(priming_grace, Real) or isinstance(priming_grace, bool) or priming_grace < 0:
        errors.append(checks.Error("AFTER_PRIMING_GRACE_SECONDS must be a number of seconds, 0 or more.",
                                   id="mcp_transport.E032"))
    grace = config["TASK_GRACE_SECONDS"]
    if not isinstance(grace, Real) or isinstance(grace, bool) or grace < 0:
        errors.append(checks.Error("TASK_GRACE_SECONDS must be a number of seconds, 0 or more.",
                                   id="mcp_transport.E024"))
    if not _positive_number(config["TASK_TTL_SECONDS"], allow_none=True):
        errors.append(checks.Error("TASK_TTL_SECONDS must be a positive number or None.", id="mcp_transport.E025"))
    poll = config["TASK_POLL_INTERVAL_MS"]
    if not isinstance(poll, int) or isinstance(poll, bool) or poll <= 0:
        errors.append(checks.Error("TASK_POLL_INTERVAL_MS must be a positive int.", id="mcp_transport.E026"))
    errors += _check_task_runner(config)
    ttl = config["CACHE_TTL_MS"]
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        errors.append(checks.Error("CACHE_TTL_MS must be a non-negative int.", id="mcp_transport.E022"))
    return errors


def _check_task_runner(config: dict) -> list:
    runner = config["TASK_RUNNER"]
    if runner not in ("process", "django_tasks"):
        return [checks.Error('TASK_RUNNER must be "process" or "django_tasks".', id="mcp_transport.E027")]
    if runner != "django_tasks":
        return []
    try:
        try:
            from django.tasks import task_backends
        except ImportError:
            from django_tasks import task_backends
        task_backends[config["TASK_BACKEND"]]
    except Exception as exc:
        return [checks.Error(
            f"TASK_RUNNER is django_tasks, but the Tasks framework has no backend {config['TASK_BACKEND']!r} ({exc}).",
            hint="Django 6: TASKS in settings; Django 5.2: pip install 'django-tasks-db[compat]', add django_tasks "
                 "and django_tasks_db to INSTALLED_APPS, and configure TASKS.",
            id="mcp_transport.E028")]
    return []


@checks.register("mcp_transport")
def check_tools(app_configs=None, **kwargs):
    """Tool arguments mirrored as headers (`x-mcp-header`) must be what clients accept: clients
    drop a tool whose annotation breaks a rule, so it would silently vanish from their lists."""
    from .protocol.server import servers

    errors = []
    for server in servers.values():
        for tool in server.tools.values():
            for problem in header_param_problems(tool):
                errors.append(checks.Error(f"Tool {tool.name!r} of server {server.name!r}: {problem}",
                                           obj=tool.fn, id="mcp_transport.E023"))
            for problem in policy_problems(tool):
                errors.append(checks.Error(f"Tool {tool.name!r} of server {server.name!r}: {problem}",
                                           obj=tool.fn, id="mcp_transport.E031"))
            if not TOOL_NAME.fullmatch(tool.name):
                errors.append(checks.Warning(
                    f"Tool {tool.name!r} of server {server.name!r}: a tool name should be 1-128 letters, digits, "
                    "'_', '-' or '.' (SEP-986); some clients refuse other names.", obj=tool.fn,
                    id="mcp_transport.W011"))
    return errors


TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def policy_problems(tool) -> list[str]:
    """A tool's own disconnect_policy and retry_ms are resolved at its first call: check them now."""
    problems = []
    if tool.disconnect_policy is not None:
        problem = disconnect_problem(tool.disconnect_policy)
        if problem:
            hint = _disconnect_hint(tool.disconnect_policy)
            problems.append(f"disconnect_policy must be never, after_priming, after_seconds, idle or a dotted path "
                            f"to a DisconnectPolicy: {problem}." + (f" {hint}" if hint else ""))
    if tool.retry_ms is not None:
        problem = retry_problem(tool.retry_ms)
        if problem:
            problems.append(f"retry_ms must be a non-negative int (milliseconds) or a dotted path to a "
                            f"RetryPolicy: {problem}.")
    return problems


_TCHAR = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def header_param_problems(tool) -> list[str]:
    problems, seen = [], set()
    schema = tool.input_schema or tool.signature.schema()
    for path, name in tool.header_params:
        where = ".".join(path)
        if not name or not set(name) <= _TCHAR:
            problems.append(f"x-mcp-header {name!r} on {where} is not an HTTP header name token.")
        if name.lower() in seen:
            problems.append(f"x-mcp-header {name!r} is used twice (header names ignore case).")
        seen.add(name.lower())
        prop = schema
        for key in path:
            prop = prop["properties"][key]
        types = prop.get("type")
        if "type" not in prop and isinstance(prop.get("anyOf"), list):
            types = [option.get("type") for option in prop["anyOf"] if isinstance(option, dict)]
            types = [t for t in types if t != "null"]
        types = types if isinstance(types, list) else [types]
        if not types or any(t not in ("string", "integer", "boolean") for t in types):
            problems.append(f"x-mcp-header {name!r} is on {where}, of type {prop.get('type', types)}: only "
                            "string, integer and boolean arguments may be mirrored as headers.")
    return problems


@checks.register("mcp_transport")
def check_deployment(app_configs=None, **kwargs):
    """What runserver needs to serve MCP: daphne's runserver (a WSGI runserver answers 404 at /mcp) and an
    ASGI_APPLICATION that routes through mcp_application."""
    from django.conf import settings

    apps = list(settings.INSTALLED_APPS)
    errors = daphne_problems(apps)
    if "daphne" in apps:
        errors += asgi_application_problems(getattr(settings, "ASGI_APPLICATION", None))
    return errors


def daphne_problems(apps: list) -> list:
    if "daphne" not in apps:
        return [checks.Warning(
            "'daphne' is not in INSTALLED_APPS: runserver serves WSGI, and /mcp is a 404.",
            hint="Put 'daphne' first in INSTALLED_APPS (uvicorn or daphne run directly need not).",
            id="mcp_transport.W006")]
    if "django.contrib.staticfiles" in apps and apps.index("daphne") > apps.index("django.contrib.staticfiles"):
        return [checks.Warning("Put 'daphne' before django.contrib.staticfiles in INSTALLED_APPS so that "
                               "runserver serves MCP with daphne.", id="mcp_transport.W004")]
    return []


def asgi_application_problems(path) -> list:
    if not path:
        return [checks.Warning(
            "ASGI_APPLICATION is not set: runserver has no application to serve MCP with.",
            hint='ASGI_APPLICATION = "myproject.asgi.application", its asgi.py wrapping Django\'s application '
                 "with mcp_transport.routing.mcp_application.", id="mcp_transport.W007")]
    try:
        application = import_string(path)
    except InvalidSettings:
        return []  # the checks of the settings report it
    except Exception as exc:
        return [checks.Error(f"ASGI_APPLICATION {path!r} cannot be imported ({type(exc).__name__}: {exc}).",
                             id="mcp_transport.E030")]
    if not routes_mcp(application):
        return [checks.Warning(
            f"ASGI_APPLICATION {path!r} does not route through mcp_application: /mcp is a 404.",
            hint="In asgi.py: application = mcp_application(get_asgi_application()), "
                 "from mcp_transport.routing.", id="mcp_transport.W008")]
    return []


STATIC_MIDDLEWARE = ("whitenoise.middleware.WhiteNoiseMiddleware", "servestatic.middleware.ServeStaticMiddleware")
STATIC_HINT = ('Add "whitenoise.middleware.WhiteNoiseMiddleware" to MIDDLEWARE, right after SecurityMiddleware, '
               "set STATIC_ROOT and run collectstatic (README: Use it in your project); or serve STATIC_ROOT "
               "from your reverse proxy.")


@checks.register("mcp_transport")
def check_static_files(app_configs=None, **kwargs):
    """The admin's stylesheets under daphne, uvicorn or gunicorn, which serve no static files: warned
    only where no server can serve them (DEBUG off, so runserver does not either)."""
    from django.conf import settings

    if settings.DEBUG or not static_files_unserved():
        return []
    return [checks.Warning(
        "Nothing serves the static files: the admin is unstyled (DEBUG is off, no WhiteNoise middleware, "
        "no STATIC_ROOT for a proxy to serve).", hint=STATIC_HINT, id="mcp_transport.W016")]


@checks.register("mcp_transport", deploy=True)
def check_static_files_deployed(app_configs=None, **kwargs):
    """`manage.py check --deploy`: with DEBUG on only runserver serves static files, not the servers a
    deployment runs."""
    from django.conf import settings

    if not settings.DEBUG or not static_files_unserved():
        return []
    return [checks.Warning(
        "Only runserver serves the static files: under daphne, uvicorn or gunicorn the admin is unstyled.",
        hint=STATIC_HINT, id="mcp_transport.W017")]


def static_files_unserved() -> bool:
    """Whether the admin is installed and nothing but runserver (with DEBUG on) serves its static files:
    no absolute STATIC_URL (another host's), no storage of files elsewhere (S3 and the like: not on
    this machine's disk), no WhiteNoise with files to serve (STATIC_ROOT, or its finders), no
    STATIC_ROOT for a proxy, no ASGIStaticFilesHandler around ASGI_APPLICATION."""
    from urllib.parse import urlsplit

    from django.apps import apps
    from django.conf import settings

    if not apps.is_installed("django.contrib.admin") or not settings.STATIC_URL:
        return False
    if urlsplit(settings.STATIC_URL).netloc or not _static_files_on_disk():
        return False
    if any(path in STATIC_MIDDLEWARE for path in settings.MIDDLEWARE):
        finders = getattr(settings, "WHITENOISE_USE_FINDERS", settings.DEBUG)
        return not settings.STATIC_ROOT and not (finders and apps.is_installed("django.contrib.staticfiles"))
    if settings.STATIC_ROOT:
        return False
    return not _serves_static_files(getattr(settings, "ASGI_APPLICATION", None))


def _static_files_on_disk() -> bool:
    from django.conf import settings
    from django.core.files.storage import FileSystemStorage

    backend = settings.STORAGES.get("staticfiles", {}).get("BACKEND")
    try:
        return issubclass(import_string(backend), FileSystemStorage)
    except Exception:
        return True  # Django's own checks report a storage that cannot be imported


def _serves_static_files(path) -> bool:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    try:
        application = import_string(path) if path else None
    except Exception:
        return False  # check_deployment reports it
    return wraps(application, lambda inner: isinstance(inner, ASGIStaticFilesHandler))


def routes_mcp(app) -> bool:
    """Whether `app` is one that mcp_application made (it carries `mcp_routes`) or wraps one."""
    return wraps(app, lambda inner: "mcp_routes" in getattr(inner, "__dict__", {}))


def wraps(app, found, depth: int = 6, seen: set | None = None) -> bool:
    """Whether `found(a)` holds for `app` or for an application it wraps: through instance attributes,
    closures, the globals a function uses, and the dicts, lists and tuples among them (a
    ProtocolTypeRouter, a middleware, an application function of one's own)."""
    seen = set() if seen is None else seen
    if depth < 0 or id(app) in seen or isinstance(app, (str, bytes, int, float, types.ModuleType, type)):
        return False
    seen.add(id(app))
    if isinstance(app, dict):
        inner = list(app.values())
    elif isinstance(app, (list, tuple, set, frozenset)):
        inner = list(app)
    elif isinstance(app, types.MethodType):
        inner = [app.__func__, app.__self__]
    else:
        attributes = getattr(app, "__dict__", None)
        if not isinstance(attributes, dict):
            return False
        if found(app):
            return True
        inner = list(attributes.values())
        if isinstance(app, types.FunctionType):
            inner += [cell.cell_contents for cell in app.__closure__ or () if _filled(cell)]
            inner += [app.__globals__[name] for name in app.__code__.co_names if name in app.__globals__]
    return any(wraps(item, found, depth - 1, seen) for item in inner)


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _check_redis_layer(layers: dict) -> list:
    """redis-py 8 reads with a 5 s socket timeout by default, and channels_redis blocks 5 s waiting
    for a message: an idle worker's receive then fails every 5 s and the relay reconnects."""
    layer = layers.get("default") or {}
    if layer.get("BACKEND") != "channels_redis.core.RedisChannelLayer":
        return []
    try:
        from channels_redis.core import RedisChannelLayer
        from redis.asyncio import Connection

        default = Connection().socket_timeout  # no I/O until used
    except (ImportError, AttributeError, TypeError):
        return []
    blocking = RedisChannelLayer.brpop_timeout
    for host in (layer.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]:
        timeout = host.get("socket_timeout", default) if isinstance(host, dict) else default
        if timeout is not None and timeout <= blocking:
            return [checks.Warning(
                f"The Redis channel layer reads with a {timeout} s socket timeout, not above its {blocking} s "
                "blocking receive: idle workers lose their connection every few seconds.",
                hint='Give each host a longer timeout: {"address": "redis://...", "socket_timeout": 30}.',
                id="mcp_transport.W005")]
    return []
