"""This process's background duties, started by its first MCP request (daphne has no lifespan)."""
from __future__ import annotations

from ..wakeups import relay
from . import shutdown
from .heartbeat import heartbeat


async def start():
    """Idempotent: the graceful-shutdown handler, the relay between workers, the heartbeat."""
    shutdown.install()
    await relay.relay.start()
    heartbeat.start()
