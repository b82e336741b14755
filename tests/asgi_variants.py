"""ASGI applications for the checks of ASGI_APPLICATION: Django's alone, and mcp_application's wrapped
in the ways projects wrap it."""
from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

from mcp_transport.routing import mcp_application

django_only = get_asgi_application()
routed = mcp_application(django_only)
in_a_router = ProtocolTypeRouter({"http": mcp_application(django_only)})
in_middleware = ASGIStaticFilesHandler(mcp_application(django_only))


async def in_a_function(scope, receive, send):
    await routed(scope, receive, send)


def _closure(inner):
    async def app(scope, receive, send):
        await inner(scope, receive, send)
    return app


in_a_closure = _closure(mcp_application(django_only))
