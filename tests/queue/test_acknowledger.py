"""Drained chats' signals are acknowledged together under load (real redis-server)."""

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from bot.queue.work_stream import GROUP, Acknowledger, WorkStream
from bot.storage.connection import text_of
from bot.storage.keys import RedisKeys
from bot.testing.redis_server import RedisServer


async def _signals(stream: WorkStream, count: int) -> list[str]:
    """``count`` signals read by this consumer, so pending until acknowledged."""
    await stream.ensure_group()
    for n in range(count):
        await stream.signal(f"tg:{n}")
    signals = await stream.read(count, block_ms=100)
    assert len(signals) == count
    return [signal.signal_id for signal in signals]


def _stream(redis: aioredis.Redis, prefix: str) -> tuple[WorkStream, str]:
    key = RedisKeys(prefix).work_stream
    return WorkStream(redis, stream=key, consumer="test"), key


async def _xack_calls(redis: aioredis.Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_xack", {}).get("calls", 0))


async def test_signals_finished_while_an_xack_is_in_flight_go_in_the_next_one(
    redis_client: aioredis.Redis,
) -> None:
    stream, key = _stream(redis_client, "acks")
    ids = await _signals(stream, 50)
    await redis_client.config_resetstat()
    acks = Acknowledger(stream)

    acks.ack(ids[0])
    await asyncio.sleep(0)  # the first XACK is on its way
    for signal_id in ids[1:]:
        acks.ack(signal_id)
    await acks.flush()

    assert await _xack_calls(redis_client) == 2
    assert (await redis_client.xpending(key, GROUP))["pending"] == 0


async def test_one_at_a_time_each_signal_is_acknowledged_at_once(
    redis_client: aioredis.Redis,
) -> None:
    stream, key = _stream(redis_client, "acks-seq")
    ids = await _signals(stream, 3)
    acks = Acknowledger(stream)

    for n, signal_id in enumerate(ids, start=1):
        acks.ack(signal_id)
        await acks.flush()
        pending = await redis_client.xpending(key, GROUP)
        assert pending["pending"] == len(ids) - n


async def test_redis_gone_leaves_the_signals_pending_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Acknowledged while Redis is down: one warning for the batch, and once Redis is back
    (from its append-only file) the signals are still pending, to be claimed again."""
    server = RedisServer(extra_args=("--appendonly", "yes", "--appendfsync", "always"))
    server.start()
    redis = aioredis.Redis.from_url(server.url, socket_timeout=1)
    stream, key = _stream(redis, "acks-down")
    try:
        ids = await _signals(stream, 2)
        server.stop()
        acks = Acknowledger(stream)
        with caplog.at_level(logging.WARNING, logger="bot.queue.work_stream"):
            for signal_id in ids:
                acks.ack(signal_id)
            await acks.flush()  # returns: nothing raised, nothing waits forever
        warnings = [r.getMessage() for r in caplog.records if r.name == "bot.queue.work_stream"]
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith("2 signal(s) not acknowledged")
        server.start()
        pending = await redis.xpending_range(key, GROUP, min="-", max="+", count=10)
        assert sorted(text_of(entry["message_id"]) for entry in pending) == sorted(ids)
    finally:
        await redis.aclose()
        server.close()
