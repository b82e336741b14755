"""`from mcp_transport.routing import mcp_application` in asgi.py."""
from .transport.routing import mcp_application

__all__ = ["mcp_application"]
