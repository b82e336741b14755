"""`from mcp_transport.routing import mcp_application` in asgi.py."""
from .checks import refuse_invalid_settings
from .transport import routing


def mcp_application(django_app, servers: dict | None = None, **options):
    """Wrap Django's ASGI app: `servers` maps paths to servers (an MCPServer or its name), default
    `{"/mcp": "default"}`; `options` as `transport.routing.mcp_application` takes them (`middleware`,
    `health`, `metrics`).

    The settings and tools are checked first (InvalidSettings): an ASGI server runs no system checks,
    and a bad setting must stop it at startup, not fail the first call that reads it."""
    refuse_invalid_settings()
    return routing.mcp_application(django_app, servers, **options)


__all__ = ["mcp_application"]
