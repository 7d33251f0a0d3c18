"""A work-stream signal that names no valid conversation is acknowledged and logged once.

Real redis-server, the real WorkerPool claiming with a short lease: before,
such a signal stayed pending for ever, was claimed again every lease with a
traceback and counted in ``queue_depth``.
"""

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery
from bot.queue.job_results import JobDone
from bot.queue.work_stream import GROUP, WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.connection import text_of
from bot.storage.keys import RedisKeys

LEASE_SECONDS = 0.6
WITHIN = 10.0


class _NothingToRun:
    async def run(self, state: ChatState, lease: HeldLease) -> JobDone:
        raise AssertionError("no chat has work")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        raise AssertionError("nothing to deliver")

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("nothing to summarise")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


def _dropped(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "no valid conversation" in r.getMessage()]


async def _pending(redis: aioredis.Redis, stream: str) -> int:
    summary = await redis.xpending(stream, GROUP)
    return int(summary["pending"])


async def test_a_signal_without_a_valid_conversation_is_acknowledged_and_logged_once(
    redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = RedisKeys("signals")
    stream = WorkStream(redis_client, stream=keys.work_stream, consumer="test")
    await stream.ensure_group()
    missing = text_of(await redis_client.xadd(keys.work_stream, {"x": "1"}))
    invalid = text_of(await redis_client.xadd(keys.work_stream, {"c": "tg:1 {other}"}))
    pool = WorkerPool(
        stream=stream,
        queue=ChatQueue(
            redis_client, keys=keys, lease_seconds=LEASE_SECONDS, outbox_ttl_seconds=60
        ),
        runner=_NothingToRun(),
        settings=WorkerPoolConfig(
            concurrency=4, lease_seconds=LEASE_SECONDS, shutdown_grace_seconds=1, read_block_ms=50
        ),
    )
    with caplog.at_level(logging.INFO, logger="bot.queue"):
        running = asyncio.create_task(pool.run())
        deadline = asyncio.get_running_loop().time() + WITHIN
        try:
            while await _pending(redis_client, keys.work_stream) or len(_dropped(caplog)) < 2:
                assert asyncio.get_running_loop().time() < deadline, "still pending"
                await asyncio.sleep(0.05)
        finally:
            pool.stop()
            await running

    warnings = _dropped(caplog)
    assert sorted(r.getMessage().split()[1] for r in warnings) == sorted([missing, invalid])
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in warnings)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert await _pending(redis_client, keys.work_stream) == 0
