"""`daphne example_project.asgi:application`: /mcp goes to MCP, the rest (admin) to Django.

/mcp/health is the readiness check, /mcp/metrics the Prometheus metrics (prometheus-client is in
requirements.txt; a project would keep that path to its operators). MCP_EXAMPLE_OTEL configures
the OpenTelemetry SDK (example_project/otel.py).

An existing DJANGO_SETTINGS_MODULE wins, so another settings module can serve this project.
With DEBUG on, static files (the admin's CSS) are served too, as `runserver` would.
"""
import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
django_app = get_asgi_application()

if settings.DEBUG:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_app = ASGIStaticFilesHandler(django_app)

from example_project import otel  # noqa: E402
from mcp_transport.routing import mcp_application  # noqa: E402  (after Django is set up)

otel.configure()

application = mcp_application(django_app, metrics="/mcp/metrics")
