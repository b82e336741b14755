"""Streamable HTTP: the endpoint (an ASGI application), SSE framing, request guards, routing."""
