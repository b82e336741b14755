"""`daphne example_project.asgi:application`: /mcp goes to MCP, the rest (admin) to Django.

An existing DJANGO_SETTINGS_MODULE wins, so another settings module can serve this project.
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
django_app = get_asgi_application()

from mcp_transport.routing import mcp_application  # noqa: E402  (after Django is set up)

application = mcp_application(django_app)
