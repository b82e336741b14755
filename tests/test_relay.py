"""The relay on a real Redis: a burst of group operations against channels-redis's bounded pool; an
operator's cancel whose channel-layer message is lost."""
import asyncio
import logging
import os
import secrets

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer

from mcp_transport.wakeups import relay
from mcp_transport.wakeups.bus import Bus

REDIS_URL = os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_layer(*hosts, prefix=None, **config) -> RedisChannelLayer:
    return RedisChannelLayer(hosts=list(hosts), prefix=prefix or f"mcp_test_{secrets.token_hex(4)}", **config)


def test_send_slots_stay_under_half_of_every_pool():
    assert relay.send_slots(redis_layer(REDIS_URL)) == relay.MAX_CONCURRENT_SENDS
    assert relay.send_slots(redis_layer({"address": REDIS_URL, "max_connections": 10})) == 5
    assert relay.send_slots(redis_layer({"address": REDIS_URL, "max_connections": 1})) == 1
    two = redis_layer({"address": REDIS_URL, "max_connections": 1000}, {"address": REDIS_URL, "max_connections": 6})
    assert relay.send_slots(two) == 3
    assert relay.send_slots(InMemoryChannelLayer()) == relay.MAX_CONCURRENT_SENDS


def burst(slots: int | None, sends: int = 300) -> tuple[list[dict], list[str]]:
    """`sends` stream ends fired at once through a relay whose Redis pool holds 4 connections:
    -> (what the stream's group received, the warnings the relay logged)."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("mcp_transport")
    logger.addHandler(handler)

    async def main():
        layer = redis_layer({"address": REDIS_URL, "max_connections": 4}, capacity=10 * sends)
        r = relay.Relay("test-worker", Bus())
        r.layer, r.remote = layer, True
        r._slots = asyncio.Semaphore(slots or relay.send_slots(layer))
        listener = await layer.new_channel()
        await layer.group_add(relay.stream_group(1), listener)
        for _ in range(sends):
            r.end(1)
        await asyncio.gather(*r._tasks)
        received = []
        while len(received) < sends:  # until all arrived, or none for 2 s: the rest were lost
            try:
                async with asyncio.timeout(2):
                    received.append(await layer.receive(listener))
            except TimeoutError:
                break
        await layer.flush()
        await layer.close_pools()
        return received

    try:
        return asyncio.run(main()), records
    finally:
        logger.removeHandler(handler)


def test_a_burst_of_sends_waits_for_the_pool_instead_of_failing():
    received, warnings = burst(None)
    assert warnings == []
    assert len(received) == 300
    assert all(m["type"] == relay.END and m["stream"] == 1 for m in received)


def test_without_the_bound_the_same_burst_overflows_the_pool():
    """What the bound is for: past the pool, channels-redis raises and the wake-ups wait for the sweep."""
    received, warnings = burst(1000)
    assert len(received) < 300
    assert any("not sent; it waits for the receivers' next sweep" in w for w in warnings)


# An operator's cancel survives a lost channel-layer message


class LosingLayer:
    """A channel layer whose group sends are all lost (as channels-redis may lose one: capacity, a
    restart); it keeps what it lost. Everything else goes to the real layer underneath."""

    def __init__(self, layer):
        self.layer = layer
        self.lost: list[tuple[str, dict]] = []

    async def group_send(self, group, message):
        self.lost.append((group, message))

    def __getattr__(self, name):
        return getattr(self.layer, name)


async def _running(key, task):
    from mcp_transport.execution.worker import worker

    for _ in range(2000):
        if key in worker.requests.inflight or task.done():
            break
        await asyncio.sleep(0.005)
    assert key in worker.requests.inflight, "the request never started"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stored", [True, False], ids=["with-delivery", "without-delivery"])
async def test_a_terminate_whose_message_redis_lost_still_cancels_the_running_request(monkeypatch, stored):
    """The admin terminates a session while its request runs; every channel-layer message of it is
    lost. The worker, live on a real Redis, still cancels the request: its sweep reads the cancel's
    Delivery row, stored before the message was sent. Without that row (`without-delivery`: what
    `operations.terminate_session` did before) the request runs on."""
    from django.test import override_settings

    from example_project.asgi import application
    from mcp_transport import operations
    from mcp_transport.execution import runner
    from mcp_transport.execution.worker import worker as this_worker
    from mcp_transport.models import Delivery, Session, Stream
    from mcp_transport.storage import store
    from mcp_transport.testing import MCPCommunicator

    client = MCPCommunicator(application)
    await client.initialize()
    request_id = client._id + 1
    call = asyncio.ensure_future(client.request(
        "tools/call", {"name": "progress", "arguments": {"count": 2000, "delay": 0.01}, "_meta": {"progressToken": 1}},
        timeout=60,
    ))
    key = (client.session_id, runner.request_key(request_id))
    await _running(key, call)
    streams = Stream.objects.filter(session_id=client.session_id, kind=Stream.Kind.REQUEST)
    for _ in range(500):  # the request is under way: a few progress events stored
        if await sync_to_async(lambda: streams.filter(last_seq__gte=3).exists())():
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the request stored no progress")

    prefix = f"mcp_test_{secrets.token_hex(4)}"
    worker_layer, admin_layer = redis_layer(REDIS_URL, prefix=prefix), redis_layer(REDIS_URL, prefix=prefix)
    losing = LosingLayer(admin_layer)
    # This process's worker, on Redis, sweeping often; it cancels through the runner's own handlers.
    worker = relay.Relay(this_worker.id, this_worker.bus)
    worker.handlers = dict(this_worker.relay.handlers)
    received, swept = [], []
    handle, take = worker.handle, store.atake_deliveries

    async def atake_deliveries(worker_id):
        found = await take(worker_id)
        swept.extend(found)
        return found

    monkeypatch.setattr(worker, "handle", lambda message: (received.append(message), handle(message)))
    monkeypatch.setattr(store, "atake_deliveries", atake_deliveries)
    if not stored:  # the old terminate: a cancel message and no Delivery row
        monkeypatch.setattr(store, "deliver", lambda *args: None)
    try:
        with override_settings(MCP_TRANSPORT={"WAKEUP_SWEEP_SECONDS": 0.2}):
            monkeypatch.setattr(relay, "get_channel_layer", lambda alias="default": worker_layer)
            await worker.start()
            assert worker.remote and worker.channel
            monkeypatch.setattr(relay, "get_channel_layer", lambda alias="default": losing)

            session = await sync_to_async(Session.objects.get)(pk=client.session_id)
            outcome = await sync_to_async(operations.terminate_session)(session)
            assert outcome.done, outcome.message
            lost = {message["type"] for _, message in losing.lost}
            assert {relay.CANCEL, relay.SESSION_END} <= lost  # both would have cancelled the request
            assert [m for _, m in losing.lost if m["type"] == relay.CANCEL][0]["request"] == request_id

            if stored:
                response = await asyncio.wait_for(call, 10)  # the tool alone would run 20 s
                assert [(session_id, payload["request"]) for session_id, kind, payload in swept
                        if kind == Delivery.Kind.CANCEL] == [(client.session_id, request_id)]
                assert response.complete and response.messages[0]["method"] == "notifications/progress"
                assert not [m for m in response.messages if "result" in m or "error" in m]  # ended, unanswered
                assert key not in this_worker.requests.inflight
            else:
                await asyncio.sleep(2.0)  # ten sweeps
                assert not call.done() and key in this_worker.requests.inflight
                assert swept == []
            assert received == []  # nothing came over the channel layer
            assert await sync_to_async(Delivery.objects.count)() == 0
    finally:
        this_worker.requests.cancel(client.session_id, request_id)
        try:
            await asyncio.wait_for(call, 10)
        except Exception:
            pass
        tasks = list(worker._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=5)
            assert not pending, "the relay's loops did not stop when cancelled"
        await worker_layer.flush()
        await worker_layer.close_pools()
        await admin_layer.close_pools()


async def test_a_task_signal_is_heard_by_the_worker_running_the_task_or_waits_out_its_memory(monkeypatch):
    """A change to a task made on one worker is acknowledged once the worker running the task says
    it heard (it forgets what it remembered of the task first), from a worker or from the admin; a
    worker that never answers costs the sender the whole wait, no more."""
    prefix = f"mcp_test_{secrets.token_hex(4)}"
    layers = [redis_layer(REDIS_URL, prefix=prefix) for _ in range(2)]
    heard = []
    owner, asker = relay.Relay("owner-worker", Bus()), relay.Relay("asking-worker", Bus())
    owner.on(relay.TASK, lambda task_id, action: heard.append((task_id, action)))
    for r, layer in zip((owner, asker), layers):
        monkeypatch.setattr(relay, "get_channel_layer", lambda alias="default", layer=layer: layer)
        await r.start()
        assert r.remote
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await asker.task_heard("owner-worker", "t-1", "cancel", 5.0)
        assert heard == [("t-1", "cancel")] and loop.time() - started < 2.0
        admin = relay.Sender("admin", redis_layer(REDIS_URL, prefix=prefix))
        assert await sync_to_async(admin.task_heard)("owner-worker", "t-2", "wake", 5.0)
        assert heard[-1] == ("t-2", "wake")
        started = loop.time()
        assert not await asker.task_heard("gone-worker", "t-3", "cancel", 0.3)
        assert loop.time() - started >= 0.3 and not await sync_to_async(admin.task_heard)("gone-worker", "t-3",
                                                                                          "cancel", 0.3)
        assert not asker.heard
    finally:
        for r in (owner, asker):
            for task in list(r._tasks):
                task.cancel()
            await asyncio.gather(*r._tasks, return_exceptions=True)


@pytest.mark.django_db(transaction=True)
async def test_an_operators_cancel_returns_once_the_worker_running_the_task_heard_it(monkeypatch):
    """The admin, in a process of its own, cancels a task another worker runs: the cancel returns
    after that worker heard it (so none of that worker's polls says `working` after), without waiting
    once the task's lease has run out (its worker remembers nothing of it any more)."""
    from django.utils import timezone

    from mcp_transport import operations
    from mcp_transport.models import Task

    prefix = f"mcp_test_{secrets.token_hex(4)}"
    heard = []
    owner = relay.Relay("owner-worker", Bus())
    owner.on(relay.TASK, lambda task_id, action: heard.append((task_id, action)))
    monkeypatch.setattr(relay, "get_channel_layer", lambda alias="default": redis_layer(REDIS_URL, prefix=prefix))
    await owner.start()
    monkeypatch.setattr(operations, "sender", lambda: relay.Sender("admin", redis_layer(REDIS_URL, prefix=prefix)))
    waited = []
    task_heard = relay.Sender.task_heard
    monkeypatch.setattr(relay.Sender, "task_heard",
                        lambda self, *args: waited.append(args[1]) or task_heard(self, *args))
    now = timezone.now()
    try:
        for task_id, lease in (("running", 30), ("orphaned", -1)):
            await sync_to_async(Task.objects.create)(
                id=task_id, tool="slow_compute", request="{}", worker="owner-worker", status="working",
                lease_expires_at=now + timezone.timedelta(seconds=lease), created_at=now, updated_at=now)
        task = await sync_to_async(Task.objects.get)(pk="running")
        outcome = await sync_to_async(operations.cancel_task)(task)
        assert outcome.done and heard == [("running", "cancel")] and waited == ["running"]
        task = await sync_to_async(Task.objects.get)(pk="orphaned")
        assert (await sync_to_async(operations.cancel_task)(task)).done
        assert waited == ["running"]
    finally:
        for t in list(owner._tasks):
            t.cancel()
        await asyncio.gather(*owner._tasks, return_exceptions=True)
