"""One helper for `asgi.py`: MCP paths go to the consumer, everything else to Django."""
from __future__ import annotations

from .consumer import MCPConsumer


def mcp_application(django_app, servers: dict | None = None, *, middleware=None):
    """Wrap Django's ASGI app.

    `servers` maps paths to servers (an MCPServer or its name); default `{"/mcp": "default"}`.
    `middleware` wraps each MCP consumer, e.g. `channels.auth.AuthMiddlewareStack`.
    """
    routes = {}
    for path, server in (servers or {"/mcp": "default"}).items():
        app = MCPConsumer.as_asgi(server=server)
        if middleware is not None:
            app = middleware(app)
        path = "/" + path.strip("/")
        routes[path] = app
        routes[path + "/"] = app

    async def application(scope, receive, send):
        if scope["type"] == "http":
            app = routes.get(scope["path"])
            if app is not None:
                return await app(scope, receive, send)
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        return await django_app(scope, receive, send)

    application.mcp_routes = routes
    return application


async def _lifespan(receive, send):
    """daphne has no lifespan; other ASGI servers get a polite answer."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
