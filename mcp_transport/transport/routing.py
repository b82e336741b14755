"""One helper for `asgi.py`: MCP paths go to the endpoint, everything else to Django."""
from __future__ import annotations

import json

from django.core.exceptions import ImproperlyConfigured

from .. import auth, scrape
from .. import metrics as _metrics
from ..conf import mcp_settings
from ..execution import health
from ..execution.worker import worker
from .endpoint import MCPEndpoint


def mcp_application(django_app, servers: dict | None = None, *, middleware=None, health: str | None = "/mcp/health",
                    metrics: str | None = None):
    """Wrap Django's ASGI app.

    `servers` maps paths to servers (an MCPServer or its name); default `{"/mcp": "default"}`.
    `middleware` wraps each MCP endpoint, e.g. `channels.auth.AuthMiddlewareStack`.
    `health`: the path of the readiness check (database and channel layer; 200 or 503), None for none.
    `metrics`: the path of the Prometheus metrics (e.g. "/mcp/metrics"; prometheus-client needed),
    None for none. What it shows (tool names, traffic) is for operators: keep it off the public side.
    """
    routes = {}
    metadata = {}
    for path, server in (servers or {"/mcp": "default"}).items():
        app = MCPEndpoint.as_asgi(server=server)
        if middleware is not None:
            app = middleware(app)
        path = "/" + path.strip("/")
        routes[path] = app
        routes[path + "/"] = app
        metadata[auth.metadata_path(path)] = path

    health_path = "/" + health.strip("/") if health else None
    metrics_path = "/" + metrics.strip("/") if metrics else None
    if metrics_path and not _metrics.available():
        raise ImproperlyConfigured(f"mcp_application(metrics={metrics!r}) needs prometheus-client: "
                                   "pip install 'django-mcp-transport[metrics]'")

    async def application(scope, receive, send):
        if scope["type"] == "http":
            if scope["path"] == health_path:
                return await _health(scope, send)
            if scope["path"] == metrics_path:
                return await _metrics_page(scope, send)
            app = routes.get(scope["path"])
            if app is not None:
                return await app(scope, receive, send)
            if scope["path"] in metadata and auth.authorization_servers(_origin(scope)):
                return await _resource_metadata(scope, send, metadata[scope["path"]])
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        return await django_app(scope, receive, send)

    application.mcp_routes = routes
    return application


async def _health(scope, send):
    """For load balancers and orchestrators: 200 when this worker's database and channel layer
    answer, else 503; the JSON says which part failed and how long each took."""
    report = await health.check() if scope.get("method", "GET") in ("GET", "HEAD") else None
    if report is None:
        await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET, HEAD")]})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200 if report["ok"] else 503, "headers": [
        (b"content-type", b"application/json"), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": json.dumps(report).encode()})


async def _metrics_page(scope, send):
    """Prometheus scrapes this: the instruments of this process (of every process on the host in
    multiprocess mode) and the database's state. 404 while MCP_TRANSPORT["METRICS"] is off."""
    if scope.get("method", "GET") not in ("GET", "HEAD"):
        status, headers, body = 405, [(b"allow", b"GET, HEAD")], b""
    elif not _metrics.on:
        status, headers, body = 404, [(b"content-type", b"text/plain")], b"Metrics are off (MCP_TRANSPORT METRICS)"
    else:
        accept = dict(scope.get("headers", ())).get(b"accept", b"").decode("latin-1")
        body, content_type = await scrape.aexposition(accept)
        status, headers = 200, [(b"content-type", content_type.encode("latin-1")), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})


def _origin(scope) -> str:
    host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"host"), "")
    return auth.resource_origin(scope, {"host": host})


async def _resource_metadata(scope, send, mcp_path):
    """RFC 9728 protected resource metadata, so OAuth clients find the authorization server."""
    resource = f"{_origin(scope)}{mcp_path}"
    body = json.dumps(auth.resource_metadata(resource)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"access-control-allow-origin", b"*"),
        (b"cache-control", b"max-age=3600")]})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive, send):
    """ASGI servers with a lifespan (uvicorn, gunicorn's UvicornWorker; daphne has none, and the
    worker starts with its first request there). At startup the worker starts and its graceful
    shutdown goes in front of the server's SIGTERM and SIGINT handlers; `lifespan.shutdown` comes
    once the server's connections are closed, and answers when the work still running here has
    finished or its grace has run out."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await worker.start()
                worker.shutdown.install_before()
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await worker.shutdown.begin()
            await send({"type": "lifespan.shutdown.complete"})
            return
