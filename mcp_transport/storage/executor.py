"""One database thread per process, fed in batches: group commit for the event store.

Every store operation is a sync function. Callers on the event loop queue it and await
its result; the thread runs everything queued so far in one transaction, in order (a run of
calls to a function with a `many` twin, such as opening request streams, as one call). Under
load one commit (and one thread hop) serves many calls, which is what lets every event be
stored before it is sent and still be fast. If an operation fails, the batch is rolled
back and each operation re-run alone, so one failure never leaks into another's result. A batch
of one function whose calls open their own transaction (`own_transaction` in the store: one
statement on PostgreSQL) runs without one: BEGIN and COMMIT would be two more round trips.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from django.db import close_old_connections, connection, transaction

logger = logging.getLogger("mcp_transport")

# Loop turns between the first call queued and the batch taken. Measured (PostgreSQL SSE calls,
# interleaved runs, BENCHMARKS.md): 3 or 4 turns gave ~10 % more calls/s than 1 or 2 at C=16
# and C=64; SQLite and C=1 (latency) were the same either way.
BATCH_TURNS = 3


class BatchExecutor:
    def __init__(self):
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-db")
        self._queue: list[tuple] = []
        self._running = False
        self._loop = None

    def submit(self, fn, *args, **kwargs) -> asyncio.Future:
        """Queue now (the order of submission is the order of execution), await later or never."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (tests run one per test): what the old one queued died with it.
            self._loop, self._queue, self._running = loop, [], False
        future = loop.create_future()
        self._queue.append((fn, args, kwargs, future))
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
                results = await loop.run_in_executor(self._thread, _run_batch, batch)
                for (_, _, _, future), (ok, value) in zip(batch, results):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._running = False
            if self._queue:
                self._running = True
                loop.create_task(self._drain(loop))

    def close(self):
        """Close this thread's database connection (tests dropping their database need it)."""
        self._thread.submit(lambda: connection.close()).result()


def _run_alone(fn, calls):
    """One function's calls, alone in their batch, in a transaction unless `fn` opens its own;
    if a merged run fails, each call again on its own. -> [(ok, result or exception)]"""
    try:
        if getattr(fn, "own_transaction", False):
            return [(True, result) for result in _call(fn, calls)]
        with transaction.atomic():
            return [(True, result) for result in _call(fn, calls)]
    except Exception as exc:
        _checked_at[0] = float("-inf")  # the connection may be why: check it before the next batch
        if len(calls) == 1:
            return [(False, exc)]
        close_old_connections()
        return [outcome for call in calls for outcome in _run_alone(fn, [call])]


# How often the database thread checks its connection (CONN_MAX_AGE, CONN_HEALTH_CHECKS) between
# batches: a check per batch costs PostgreSQL a round trip per batch. After a failure the next
# batch checks at once.
CHECK_EVERY = 1.0
_checked_at = [float("-inf")]


def _check_connection():
    now = time.monotonic()
    if now - _checked_at[0] >= CHECK_EVERY:
        _checked_at[0] = now
        connection.close_if_unusable_or_obsolete()


def _runs(batch) -> list[tuple]:
    """The batch in order as (fn, [(args, kwargs)]): a run of calls to a function with a `many`
    twin is one entry."""
    runs = []
    for fn, args, kwargs, _ in batch:
        if runs and runs[-1][0] is fn and getattr(fn, "many", None) is not None:
            runs[-1][1].append((args, kwargs))
        else:
            runs.append((fn, [(args, kwargs)]))
    return runs


def _call(fn, calls) -> list:
    if len(calls) == 1:
        args, kwargs = calls[0]
        return [fn(*args, **kwargs)]
    return fn.many(calls)


def _run_batch(batch):
    _check_connection()
    runs = _runs(batch)
    if len(runs) == 1:
        return _run_alone(*runs[0])
    try:
        with transaction.atomic():
            return [(True, result) for fn, calls in runs for result in _call(fn, calls)]
    except Exception:
        close_old_connections()
        return [outcome for fn, args, kwargs, _ in batch for outcome in _run_alone(fn, [(args, kwargs)])]


executor = BatchExecutor()


def batched(fn):
    """`afn = batched(fn)`: the async twin of a store function, run by the database thread."""

    async def run(*args, **kwargs):
        return await executor.run(fn, *args, **kwargs)

    run.__name__ = f"a{fn.__name__}"
    run.__doc__ = fn.__doc__
    return run
