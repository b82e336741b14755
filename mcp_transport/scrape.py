"""What a scrape of the metrics returns: the instruments (`metrics.py`) and the database's state.

The state is read when scraped, with the QuerySet methods the admin and `mcp_status` use
(`models.py`), by whichever process answers: every worker shows the same numbers, none adds them
up twice. With PROMETHEUS_MULTIPROC_DIR set, the instruments are every process's on the host,
read from that directory; without it, this process's registry (prometheus-client's default,
django-prometheus's too, where the state collector is registered as well).
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections, connections
from django.db.models import Count

from . import metrics
from .models import Cutoffs, ModernRequest, Session, Stream, Task, Worker

logger = logging.getLogger("mcp_transport")

# Scrapes query the database on a thread of their own: never in the event loop, and never on the
# store's database thread, whose batches carry every request's writes.
_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-metrics")
_installed = []


class StateCollector:
    """The gauges that are database state: sessions active, open streams connected or resumable,
    listen streams, tasks by status, workers by liveness."""

    def describe(self):
        """Names only: registering must not query the database (it may not exist yet)."""
        return list(self._families())

    def collect(self):
        if not metrics.on:
            return []
        try:
            return list(self._families(self.read()))
        except Exception:
            logger.warning("Reading the MCP transport's state for a metrics scrape failed", exc_info=True)
            return []

    @staticmethod
    def read() -> dict:
        cutoffs = Cutoffs.at()
        streams = Stream.objects.open().order_by().aggregate(**{
            state.name.lower(): Count("id", filter=Stream.state_q(state, cutoffs,
                                                                  alive_workers=cutoffs.running_workers))
            for state in (Stream.State.CONNECTED, Stream.State.RESUMABLE)})
        workers = Worker.objects.order_by().aggregate(**{
            state.value: Count("id", filter=Worker.liveness_q(state, cutoffs)) for state in Worker.Liveness})
        tasks = dict.fromkeys(Task.Status.values, 0)
        tasks.update(Task.objects.order_by().values("status").annotate(n=Count("id")).values_list("status", "n"))
        return {
            "sessions": Session.objects.active(cutoffs).count(),
            "streams": streams,
            "listen": ModernRequest.objects.on_running_workers(cutoffs).filter(kind=ModernRequest.Kind.LISTEN).count(),
            "tasks": tasks,
            "workers": workers,
        }

    @staticmethod
    def _families(state: dict | None = None):
        from prometheus_client.core import GaugeMetricFamily

        def gauge(name, documentation, value=None, label=None, values=None):
            if label is None:
                return GaugeMetricFamily(name, documentation, value=value if state else None)
            family = GaugeMetricFamily(name, documentation, labels=[label])
            for key, count in (values or {}).items():
                family.add_metric([key], count)
            return family

        state = state or {}
        yield gauge("mcp_sessions_active", "Active sessions (2025-11-25): not terminated, seen within "
                    "SESSION_IDLE_TIMEOUT.", state.get("sessions"))
        yield gauge("mcp_streams_open", "Open streams whose connection a running worker holds (connected), or "
                    "that wait for their client to resume (resumable).", label="state", values=state.get("streams"))
        yield gauge("mcp_listen_streams", "2026-07-28 subscriptions/listen streams open on running workers.",
                    state.get("listen"))
        yield gauge("mcp_tasks", "Tasks kept in the table, by status.", label="status", values=state.get("tasks"))
        yield gauge("mcp_workers", "Workers by liveness (alive, stopping, stale).", label="state",
                    values=state.get("workers"))


STATE = StateCollector()


def install():
    """Register the state collector in prometheus-client's default registry (once; it reads
    nothing while metrics are off), for every exporter of that registry."""
    if metrics.available() and not _installed:
        from prometheus_client import REGISTRY

        REGISTRY.register(STATE)
        _installed.append(STATE)


def exposition(accept: str | None = None) -> tuple[bytes, str]:
    """-> (body, content type) of a scrape, in the format `accept` asks for (Prometheus text or
    OpenMetrics). Synchronous: it queries the database."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    if metrics.multiprocess_dir():
        from prometheus_client.multiprocess import MultiProcessCollector

        metrics.forget_dead_processes()
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(STATE)
    else:
        install()
        registry = REGISTRY
    encode, content_type = choose_encoder(accept or "")
    return encode(registry), content_type


def _scrape(accept: str | None) -> tuple[bytes, str]:
    close_old_connections()
    return exposition(accept)


async def aexposition(accept: str | None = None) -> tuple[bytes, str]:
    return await asyncio.get_running_loop().run_in_executor(_thread, _scrape, accept)


def close():
    """Close the scrape thread's database connections (tests dropping their database need it)."""
    _thread.submit(connections.close_all).result()
