"""An asgi.py imported only by the checks' test, while the settings are bad."""
from django.core.asgi import get_asgi_application

from mcp_transport.routing import mcp_application

application = mcp_application(get_asgi_application())
