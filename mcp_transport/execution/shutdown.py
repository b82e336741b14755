"""SIGTERM under daphne: a deploy, not a crash.

Open connections close at once with `retry`, so clients resume on another worker (their
streams live in the database); a connection its client cannot resume (a session before
2025-11-25 has no event id until the first event) stays open instead. Requests running here get
SHUTDOWN_GRACE_SECONDS to finish; their events still reach the other workers' connections
through the relay. Whatever is still running then ends with a JSON-RPC error the client can
read, on whichever connection holds it, and daphne stops.

2026-07-28 requests have no stream to resume: each `subscriptions/listen` stream ends at once with
its result (its client listens again, through another worker), and the calls in flight get the
same grace period to answer on their own connections, as do the tasks running here; past it a
call answers a worker_shutdown error and a task ends `failed` with that reason.
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

from .. import metrics
from ..conf import mcp_settings
from ..models import Stream
from ..storage import store
from . import errors

logger = logging.getLogger("mcp_transport")


class Shutdown:
    """SIGTERM for one worker (`execution.worker.Worker`): installed once, lazily, on its loop."""

    def __init__(self, worker):
        self.worker = worker
        self.installed = False
        self.stopping = False

    def install(self):
        """Take SIGTERM from Twisted when running under daphne."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        reactor = sys.modules.get("twisted.internet.reactor")
        if reactor is None or not getattr(reactor, "running", False):
            return
        self.installed = True
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm, reactor)

    def _on_sigterm(self, reactor):
        if self.stopping:
            reactor.stop()
            return
        self.stopping = True
        logger.warning("SIGTERM: closing connections, letting requests finish (%ss)",
                       mcp_settings.SHUTDOWN_GRACE_SECONDS)

        async def run():
            try:
                await self.graceful(float(mcp_settings.SHUTDOWN_GRACE_SECONDS))
            except Exception:
                logger.exception("Graceful shutdown failed")
            finally:
                reactor.stop()

        asyncio.ensure_future(run())

    async def graceful(self, grace: float):
        worker = self.worker
        requests, bus, modern, tasks = worker.requests, worker.bus, worker.modern, worker.tasks
        modern.end_listens()
        await store.aheartbeat(socket.gethostname(), os.getpid(), stopping=True)
        retry_ms = mcp_settings.RETRY_MS if isinstance(mcp_settings.RETRY_MS, int) else None
        bus.close_all(retry_ms, reason="shutdown")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        # Until the listen streams have sent their result, and the modern calls and tasks are done, too.
        while (requests.running_streams() or modern.calls or modern.listens or tasks.running) and (
                loop.time() < deadline):
            modern.end_listens()  # and those opened here since
            await asyncio.sleep(0.05)
        modern.stop_calls(worker.id)
        tasks.stop_all("worker_shutdown")
        settle = loop.time() + 2.0
        while (modern.calls or tasks.running) and loop.time() < settle:
            await asyncio.sleep(0.02)
        for (session_id, key), stream_id in requests.running_streams().items():
            error = errors.worker_shutdown(json.loads(key), worker.id)
            events = await store.aappend(stream_id, [error], finish=Stream.Status.FAILED)
            worker.relay.publish(stream_id, events)
            requests.cancel(session_id, json.loads(key), "worker shutdown")
            logger.warning("Stream %s failed: the worker shut down before its request finished", stream_id)
        bus.close_all(retry_ms, reason="shutdown")
        await worker.heartbeat.flush()
        metrics.process_ending()
        await asyncio.sleep(0.1)
