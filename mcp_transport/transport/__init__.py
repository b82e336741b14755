"""Streamable HTTP on Channels: the consumer, SSE framing, request guards, routing."""
