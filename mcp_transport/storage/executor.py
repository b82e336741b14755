"""One database thread per process, fed in batches: group commit for the event store.

Every store operation is a sync function. Callers on the event loop queue it and await
its result; the thread runs everything queued so far in one transaction, in order. Under
load one commit (and one thread hop) serves many calls, which is what lets every event be
stored before it is sent and still be fast. If an operation fails, the batch is rolled
back and each operation re-run alone, so one failure never leaks into another's result.

An `Operation` tells the thread more about a store function: that alone in its batch it runs
without a transaction around it (`own_transaction`: it opens one where it needs one; on
PostgreSQL one statement needs none, and BEGIN and COMMIT would be two more round trips), and
how a run of calls to it in one batch is made as one call (`many`, such as opening request
streams). The transaction is on the database that `router.db_for_write(Stream)` names, where
every table of the store lives.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from django.db import close_old_connections, connections, router, transaction

from .. import tracing
from ..models import Stream

logger = logging.getLogger("mcp_transport")

# A call as the executor queues it: (positional arguments, keyword arguments).
Call = tuple[tuple, dict]


@dataclass(eq=False)
class Operation:
    """A store function with what the database thread needs to know to batch it (the thread
    treats any other callable as a plain call: in the batch's transaction, one call at a time).

    own_transaction: alone in its batch, it runs without a transaction around it.
    many: runs a run of adjacent calls to it in one batch as one call:
        many([(args, kwargs), ...]) -> [one result per call, in order].
    """

    fn: Callable
    own_transaction: bool = False
    many: Callable[[list[Call]], list] | None = None

    def __post_init__(self):
        functools.update_wrapper(self, self.fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def operation(*, own_transaction: bool = False, many: Callable[[list[Call]], list] | None = None):
    """Declare a store function an `Operation`: `@operation(own_transaction=True)`."""

    def declare(fn) -> Operation:
        return Operation(fn, own_transaction=own_transaction, many=many)

    return declare


def database_alias() -> str:
    """The database of the store's tables, as the project's routers name it (DEFAULT_DB_ALIAS
    without routers)."""
    return router.db_for_write(Stream)


# The connection of the batch the database thread is running: every call in it runs on the
# connection of the batch's transaction, found once per batch rather than once per call.
_batch = threading.local()


def batch_connection():
    """The connection of the batch this thread is running, or None (not the database thread, or
    between batches)."""
    return getattr(_batch, "db", None)


def count_on_commit(instrument, amount: int) -> bool:
    """Add `amount` to a counter (a metrics instrument) once the transaction of the calls this
    thread runs commits: once per counter and batch, not once per call; nothing if it rolls back.
    False when this thread runs no batch (the caller counts another way)."""
    counts = getattr(_batch, "counts", None)
    if counts is None:
        return False
    counts[instrument] = counts.get(instrument, 0) + amount
    return True


def _count(counts: dict):
    for instrument, amount in counts.items():
        instrument.inc(amount)

# How often the database thread checks its connection (CONN_MAX_AGE, CONN_HEALTH_CHECKS) between
# batches: a check per batch costs PostgreSQL a round trip per batch. After a failure the next
# batch checks at once.
CHECK_EVERY = 1.0


# Loop turns between the first call queued and the batch taken: enough for the tasks a batch wakes
# to queue their next writes into the next one, few enough not to delay a lone call
# (BENCHMARKS.md has the comparison).
BATCH_TURNS = 3


class BatchExecutor:
    def __init__(self):
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-db")
        self._queue: list[tuple] = []
        # With tracing on: the spans of the requests whose calls are queued. A batch with any gets a
        # span linked to them; one without (no request span was current) gets none, so the database
        # thread adds no trace of its own nobody could reach from a request.
        self._links: list = []
        self._running = False
        self._loop = None
        # When the database thread last checked its connection (monotonic); -inf: check before the next batch.
        self.checked_at = float("-inf")

    def submit(self, fn, *args, **kwargs) -> asyncio.Future:
        """Queue now (the order of submission is the order of execution), await later or never."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (tests run one per test): what the old one queued died with it.
            self._loop, self._queue, self._links, self._running = loop, [], [], False
        future = loop.create_future()
        self._queue.append((fn, args, kwargs, future))
        if tracing.on and tracing.active():
            link = tracing.current_link()
            if link is not None:
                self._links.append(link)
        if not self._running:
            self._running = True
            loop.create_task(self._drain(loop))
        return future

    def submit_items(self, fn, key, items: list, limit: int = 128) -> tuple[asyncio.Future, bool]:
        """Queue `fn(key, items)`, or add the items to the same call if it is the last one queued and
        not yet taken: one write for a tool's burst. Returns the future and whether it is a new call."""
        if self._queue and asyncio.get_running_loop() is self._loop:
            last_fn, last_args, last_kwargs, last_future = self._queue[-1]
            # Never into a call with options (an append that finishes the stream ends it there).
            if last_fn is fn and not last_kwargs and last_args[0] == key and len(last_args[1]) < limit:
                last_args[1].extend(items)
                return last_future, False
        return self.submit(fn, key, list(items)), True

    async def run(self, fn, *args, **kwargs):
        return await self.submit(fn, *args, **kwargs)

    async def _drain(self, loop):
        try:
            while self._queue:
                # A few turns of the loop first: the tasks just woken (by the last batch, or by
                # the request that queued this call) queue their writes into this batch, and the
                # last batch's responses go out before this one competes with them for the GIL.
                for _ in range(BATCH_TURNS):
                    await asyncio.sleep(0)
                batch, self._queue = self._queue, []
                links, self._links = self._links, []
                if links:
                    results = await self._traced(loop, batch, links)
                else:
                    results = await loop.run_in_executor(self._thread, self._run_batch, batch)
                for (_, _, _, future), (ok, value) in zip(batch, results):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._running = False
            # A loop closing under a batch (a test's, a server's at exit) takes its queue with it.
            if self._queue and not loop.is_closed():
                self._running = True
                loop.create_task(self._drain(loop))

    async def _traced(self, loop, batch, links):
        span = tracing.start_batch(len(batch), sorted({getattr(fn, "__name__", type(fn).__name__)
                                                      for fn, *_ in batch}), links)
        try:
            results = await loop.run_in_executor(self._thread, self._run_batch, batch)
            failed = sum(1 for ok, _ in results if not ok)
            if failed and span.is_recording():
                span.set_attribute("mcp_transport.batch.failed", failed)
            return results
        finally:
            span.end()

    def close(self):
        """Close this thread's database connections (tests dropping their database need it)."""
        self._thread.submit(connections.close_all).result()

    def settle(self):
        """Wait for the batch the database thread is running, if any: a test's event loop ends with
        its last write still in the thread, which would hold the tables its database teardown flushes."""
        self._thread.submit(int).result()

    # On the database thread

    def _run_batch(self, batch):
        alias = database_alias()
        self._check_connection(alias)
        _batch.db = connections[alias]
        try:
            runs = _runs(batch)
            if len(runs) == 1:
                return self._run_alone(alias, *runs[0])
            counts = _batch.counts = {}
            try:
                with transaction.atomic(using=alias):
                    outcomes = [(True, result) for fn, calls in runs for result in _call(fn, calls)]
            except Exception:
                close_old_connections()
                return [outcome for fn, args, kwargs, _ in batch
                        for outcome in self._run_alone(alias, fn, [(args, kwargs)])]
            _count(counts)
            return outcomes
        finally:
            _batch.db = _batch.counts = None

    def _run_alone(self, alias, fn, calls):
        """One function's calls, alone in their batch, in a transaction unless `fn` opens its own;
        if a merged run fails, each call again on its own. -> [(ok, result or exception)]"""
        counts = _batch.counts = {}
        try:
            if isinstance(fn, Operation) and fn.own_transaction:
                outcomes = [(True, result) for result in _call(fn, calls)]
            else:
                with transaction.atomic(using=alias):
                    outcomes = [(True, result) for result in _call(fn, calls)]
            _count(counts)
            return outcomes
        except Exception as exc:
            self.checked_at = float("-inf")  # the connection may be why: check it before the next batch
            if len(calls) == 1:
                return [(False, exc)]
            close_old_connections()
            return [outcome for call in calls for outcome in self._run_alone(alias, fn, [call])]

    def _check_connection(self, alias):
        now = time.monotonic()
        if now - self.checked_at >= CHECK_EVERY:
            self.checked_at = now
            connections[alias].close_if_unusable_or_obsolete()


def _runs(batch) -> list[tuple[Any, list[Call]]]:
    """The batch in order as (fn, [(args, kwargs)]): a run of calls to an Operation with `many`
    is one entry."""
    runs = []
    for fn, args, kwargs, _ in batch:
        if runs and runs[-1][0] is fn and isinstance(fn, Operation) and fn.many is not None:
            runs[-1][1].append((args, kwargs))
        else:
            runs.append((fn, [(args, kwargs)]))
    return runs


def _call(fn, calls: list[Call]) -> list:
    if len(calls) == 1:
        args, kwargs = calls[0]
        return [fn(*args, **kwargs)]
    return fn.many(calls)


executor = BatchExecutor()


def batched(fn):
    """`afn = batched(fn)`: the async twin of a store function, run by the database thread."""

    async def run(*args, **kwargs):
        return await executor.run(fn, *args, **kwargs)

    run.__name__ = f"a{fn.__name__}"
    run.__doc__ = fn.__doc__
    return run
