"""The relay on a real Redis: a burst of group operations against channels-redis's bounded pool."""
import asyncio
import logging
import os
import secrets

from channels.layers import InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer

from mcp_transport.wakeups import relay
from mcp_transport.wakeups.bus import Bus

REDIS_URL = os.environ.get("MCP_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_layer(*hosts, **config) -> RedisChannelLayer:
    return RedisChannelLayer(hosts=list(hosts), prefix=f"mcp_test_{secrets.token_hex(4)}", **config)


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
        try:
            async with asyncio.timeout(2):
                while len(received) < sends:
                    received.append(await layer.receive(listener))
        except TimeoutError:
            pass
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
    assert any("delayed until the next sweep" in w for w in warnings)
