"""This process as an MCP worker: its identity and everything it holds in memory, in one object.

Nothing below keeps per-process state of its own: the database thread and the store's short
memory (storage's, made there because storage sits below this layer), the bus, the relay, the
requests in flight, the tasks, the heartbeat, the shutdown handler and the reconnect guard are
the worker's, and each part is given the others it needs. Its background duties start with the
server's `lifespan.startup` (uvicorn, gunicorn's UvicornWorker), or with its first request under
daphne, which has no lifespan.
"""
from __future__ import annotations

import asyncio
import os

from ..limits import ReconnectGuard
from ..storage import store
from ..storage.executor import BatchExecutor, executor
from ..storage.recent import Recent
from ..wakeups import relay as wakeups
from ..wakeups.bus import Bus
from ..wakeups.relay import Relay
from .heartbeat import Heartbeat
from .modern import ModernRequests
from .runner import Requests
from .shutdown import Shutdown
from .tasks import Tasks


class Worker:
    def __init__(self, worker_id: str, db: BatchExecutor, recent: Recent):
        self.id = worker_id
        self.pid = os.getpid()  # the id's process: a fork shares the id, and must not serve
        self.executor = db
        self.recent = recent
        self.bus = Bus()
        self.relay = Relay(worker_id, self.bus)
        self.requests = Requests(worker_id, db, self.relay)
        self.tasks = self.requests.tasks = Tasks(self.relay, self.requests.send_to_session)
        self.modern = ModernRequests(db, self.relay, self.tasks)
        self.tasks.notify_listens = self.modern.notify
        self.heartbeat = Heartbeat(self.relay, self.tasks)
        self.shutdown = Shutdown(self)
        self.reconnects = ReconnectGuard()
        self._started_on = None  # the event loop everything was started on
        self.relay.on(wakeups.CANCEL, self.requests.cancel_delivered)
        self.relay.on(wakeups.RESPOND, self.requests.resolve_here)
        self.relay.on(wakeups.SESSION_END, self.requests.cancel_session)
        self.relay.on(wakeups.NOTIFY, self.modern.deliver)
        self.relay.on(wakeups.END_MODERN, self.modern.end_recorded)
        self.relay.on(wakeups.TASK, self.tasks.on_signal)

    def __repr__(self):
        return f"<Worker {self.id}>"

    async def start(self):
        """Idempotent: the graceful-shutdown handler, the relay between workers, the heartbeat.
        Every request asks, so once they run on this loop it returns at once."""
        loop = asyncio.get_running_loop()
        if self._started_on is loop:
            return
        if os.getpid() != self.pid:
            raise RuntimeError(
                f"mcp_transport was imported in process {self.pid}, which then forked this one ({os.getpid()}): "
                "forked workers would share one worker id (its leases, its channel-layer groups). "
                "Load the application in each worker (gunicorn: no --preload).")
        self.shutdown.install()
        await self.relay.start()
        self.heartbeat.start()
        self._started_on = loop

    # protocol.server.Notifier: a change reaches sessions (stored on their GET streams) and listen streams.

    async def notify_subscribers(self, server_name: str, uri: str):
        await self.modern.notify(server_name, "notifications/resources/updated", {"uri": uri})
        await self.requests.notify_subscribers(server_name, uri)

    async def broadcast(self, server_name: str, method: str):
        await self.modern.notify(server_name, method, None)
        await self.requests.broadcast(server_name, method)

    async def record_elicitation(self, server_name: str, elicitation_id: str, session_id: str | None,
                                 principal: str, url: str) -> bool:
        return await store.arecord_elicitation(server_name, elicitation_id, session_id, principal, url)

    async def elicitation_completed(self, server_name: str, elicitation_id: str, principal: str) -> bool:
        return await store.aelicitation_completed(server_name, elicitation_id, principal)


worker = Worker(store.WORKER, executor, store.recent)
