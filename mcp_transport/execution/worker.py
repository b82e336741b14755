"""This process as an MCP worker: its identity and everything it holds in memory, in one object.

Nothing below keeps per-process state of its own: the bus, the relay, the requests in flight,
the heartbeat, the shutdown handler and the reconnect guard are the worker's, and each part is
given the others it needs. Its background duties start with its first request (daphne has no
lifespan).
"""
from __future__ import annotations

from ..limits import ReconnectGuard
from ..storage import store
from ..storage.executor import BatchExecutor, executor
from ..wakeups import relay as wakeups
from ..wakeups.bus import Bus
from ..wakeups.relay import Relay
from .heartbeat import Heartbeat
from .runner import Requests
from .shutdown import Shutdown


class Worker:
    def __init__(self, worker_id: str, db: BatchExecutor):
        self.id = worker_id
        self.executor = db
        self.bus = Bus()
        self.relay = Relay(worker_id, self.bus)
        self.requests = Requests(worker_id, db, self.relay)
        self.heartbeat = Heartbeat(self.relay)
        self.shutdown = Shutdown(self)
        self.reconnects = ReconnectGuard()
        self.relay.on(wakeups.CANCEL, self.requests.cancel_delivered)
        self.relay.on(wakeups.RESPOND, self.requests.resolve_here)
        self.relay.on(wakeups.SESSION_END, self.requests.cancel_session)

    def __repr__(self):
        return f"<Worker {self.id}>"

    async def start(self):
        """Idempotent: the graceful-shutdown handler, the relay between workers, the heartbeat."""
        self.shutdown.install()
        await self.relay.start()
        self.heartbeat.start()


worker = Worker(store.WORKER, executor)
