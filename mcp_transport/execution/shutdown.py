"""SIGTERM (and SIGINT under uvicorn): a deploy, not a crash.

Open connections close at once with `retry`, so clients resume on another worker (their
streams live in the database); a connection its client cannot resume (a session before
2025-11-25 has no event id until the first event) stays open instead. Requests running here get
SHUTDOWN_GRACE_SECONDS to finish; their events still reach the other workers' connections
through the relay. Whatever is still running then ends with a JSON-RPC error the client can
read, on whichever connection holds it, and the server stops.

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
    """SIGTERM for one worker (`execution.worker.Worker`).

    Under daphne it is installed lazily, on the first request, in Twisted's place. Under an ASGI
    server with a lifespan (uvicorn, gunicorn's UvicornWorker) `lifespan.startup` puts it in front
    of the server's own signal handler: such a server closes its listeners at the signal, then
    waits for every open connection to end before it sends `lifespan.shutdown`, so streams must be
    closed when the signal arrives, not at `lifespan.shutdown`, which waits for the rest of the work.
    """

    def __init__(self, worker):
        self.worker = worker
        self.installed = False
        self.task: asyncio.Future | None = None
        self.hurried = False

    @property
    def stopping(self) -> bool:
        return self.task is not None

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
        self.begin().add_done_callback(lambda _: reactor.stop())

    def install_before(self, signals=(signal.SIGTERM, signal.SIGINT)):
        """At `lifespan.startup`: begin the graceful shutdown at these signals, then let the
        server's handler (already installed, e.g. uvicorn's) stop the server as it would. A second
        signal cuts the grace short."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        self.installed = True
        loop = asyncio.get_running_loop()
        for signum in signals:
            previous = signal.getsignal(signum)

            def handler(signum, frame, previous=previous):
                loop.call_soon_threadsafe(self._signalled, signum, previous)
                if callable(previous):
                    previous(signum, frame)

            signal.signal(signum, handler)

    def _signalled(self, signum, previous):
        if self.stopping:
            self.hurry()
            return
        stopped = self.begin()
        if previous == signal.SIG_DFL:  # no server handler to stop the process: the default does, after
            stopped.add_done_callback(lambda _: (signal.signal(signum, signal.SIG_DFL), signal.raise_signal(signum)))

    def begin(self) -> asyncio.Future:
        """Start the graceful shutdown, once; the future ends when it has."""
        if self.task is None:
            logger.warning("SIGTERM: closing connections, letting requests finish (%ss)",
                           mcp_settings.SHUTDOWN_GRACE_SECONDS)
            self.task = asyncio.ensure_future(self._graceful())
        return self.task

    def hurry(self):
        """A second signal: what still runs gets the shutdown error now."""
        self.hurried = True

    async def _graceful(self):
        try:
            await self.graceful(float(mcp_settings.SHUTDOWN_GRACE_SECONDS))
        except Exception:
            logger.exception("Graceful shutdown failed")

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
                loop.time() < deadline) and not self.hurried:
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
