"""SIGTERM under daphne: a deploy, not a crash.

Open connections close at once with `retry`, so clients resume on another worker (their
streams live in the database). Requests running here get SHUTDOWN_GRACE_SECONDS to finish;
their events still reach the other workers' connections through the relay. Whatever is
still running then ends with a JSON-RPC error the client can read, and daphne stops.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import threading

from ..conf import mcp_settings
from ..models import Stream
from ..storage import store
from ..wakeups import bus, relay
from . import errors, runner
from .heartbeat import heartbeat

logger = logging.getLogger("mcp_transport")

state = {"installed": False, "stopping": False}


def install():
    """Take SIGTERM from Twisted when running under daphne (called once, lazily, on the loop)."""
    if state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or not getattr(reactor, "running", False):
        return
    state["installed"] = True
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _on_sigterm, reactor)


def _on_sigterm(reactor):
    if state["stopping"]:
        reactor.stop()
        return
    state["stopping"] = True
    logger.warning("SIGTERM: closing connections, letting requests finish (%ss)", mcp_settings.SHUTDOWN_GRACE_SECONDS)

    async def run():
        try:
            await graceful(float(mcp_settings.SHUTDOWN_GRACE_SECONDS))
        except Exception:
            logger.exception("Graceful shutdown failed")
        finally:
            reactor.stop()

    asyncio.ensure_future(run())


async def graceful(grace: float):
    await store.aheartbeat(socket.gethostname(), os.getpid(), stopping=True)
    retry_ms = mcp_settings.RETRY_MS if isinstance(mcp_settings.RETRY_MS, int) else None
    bus.close_all(retry_ms, reason="shutdown")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while runner.running_streams() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for (session_id, key), stream_id in runner.running_streams().items():
        events = await store.aappend(stream_id, [errors.worker_shutdown(json.loads(key), store.WORKER)], finish=Stream.Status.FAILED)
        relay.publish(stream_id, events)
        runner.cancel(session_id, json.loads(key), "worker shutdown")
        logger.warning("Stream %s failed: the worker shut down before its request finished", stream_id)
    bus.close_all(retry_ms, reason="shutdown")
    await heartbeat.flush()
    await asyncio.sleep(0.1)
