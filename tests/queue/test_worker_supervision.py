"""The claim loop outlives a Redis that refuses writes for a while (real redis-server).

``CONFIG SET min-replicas-to-write 1`` on a server without replicas makes every
write, ``XREADGROUP`` included, answer ``NOREPLICAS``: what a master that lost
its replicas says. The worker pool must keep claiming once it is back.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery
from bot.queue.job_results import JobDone
from bot.queue.work_stream import GROUP, WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.keys import RedisKeys
from bot.testing.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


class _EmptyChats:
    """A job runner for chats whose queue is empty: a drain takes, releases, acknowledges."""

    async def run(self, state: ChatState, lease: HeldLease) -> JobDone:
        raise AssertionError("no job is queued")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        raise AssertionError("nothing to deliver")

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("nothing to summarise")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


async def _wait(condition: Callable[[], Awaitable[bool]], what: str, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.02)


async def test_the_claim_loop_takes_the_next_chat_after_noreplicas(
    own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    redis = aioredis.Redis.from_url(own_redis_server.url, decode_responses=True)
    keys = RedisKeys("sup")
    stream = WorkStream(redis, stream=keys.work_stream, consumer="test")
    pool = WorkerPool(
        stream=stream,
        queue=ChatQueue(redis, keys=keys, lease_seconds=30, outbox_ttl_seconds=60),
        runner=_EmptyChats(),
        settings=WorkerPoolConfig(
            concurrency=4, lease_seconds=30, shutdown_grace_seconds=1, read_block_ms=100
        ),
    )

    async def taken(signal_id: str) -> bool:
        groups = await redis.xinfo_groups(keys.work_stream)
        group = next((g for g in groups if g["name"] == GROUP), None)
        return (
            group is not None
            and group["last-delivered-id"] == signal_id
            and int(group["pending"]) == 0
        )

    with caplog.at_level(logging.INFO):
        running = asyncio.create_task(pool.run())
        try:
            await stream.ensure_group()
            first = str(await redis.xadd(keys.work_stream, {"c": "tg:1"}))
            await _wait(lambda: taken(first), "the first chat is taken")

            await redis.config_set("min-replicas-to-write", 1)

            async def refused() -> bool:
                return running.done() or "NOREPLICAS" in caplog.text

            await _wait(refused, "the claim loop meets NOREPLICAS")
            await redis.config_set("min-replicas-to-write", 0)
            assert not running.done(), running.exception()

            second = str(await redis.xadd(keys.work_stream, {"c": "tg:2"}))
            await _wait(lambda: taken(second), "the next chat is taken after the outage")
        finally:
            pool.stop()
            async with asyncio.timeout(10):
                await running
            await redis.aclose()
    outage_lines = [r for r in caplog.records if "NOREPLICAS" in r.getMessage()]
    assert len(outage_lines) == 1, [r.getMessage() for r in outage_lines]
    assert outage_lines[0].levelno == logging.WARNING
    assert outage_lines[0].exc_info is None
