"""A worker pool reports the backlog in its log while chats wait (real redis-server)."""

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from bot.queue.chat_queue import ChatQueue, ChatState
from bot.queue.delivery import Delivery
from bot.queue.job_results import JobDone
from bot.queue.work_stream import WorkStream
from bot.queue.worker import HeldLease, WorkerPool, WorkerPoolConfig
from bot.storage.keys import RedisKeys


class _NeverRuns:
    """A job runner for chats no worker can take here (another holds their lease)."""

    async def run(self, state: ChatState, lease: HeldLease) -> JobDone:
        raise AssertionError("no chat should be drained")

    async def deliver(self, reply: Delivery, lease: HeldLease, *, blocked: bool) -> None:
        raise AssertionError("nothing to deliver")

    async def summarise(self, lease: HeldLease) -> None:
        raise AssertionError("nothing to summarise")

    async def tell(self, reply: Delivery) -> None:
        raise AssertionError("Redis never loses a job here")


async def test_the_backlog_is_logged_with_the_oldest_wait(
    redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = RedisKeys("backlog")
    stream = WorkStream(redis_client, stream=keys.work_stream, consumer="test")
    queue = ChatQueue(redis_client, keys=keys, lease_seconds=30, outbox_ttl_seconds=60)
    # Another worker holds the chat: the signal stays pending, the chat waits.
    await redis_client.set(keys.conversation("tg:5").lease, "someone-else", px=30_000)
    await stream.ensure_group()
    await stream.signal("tg:5")
    pool = WorkerPool(
        stream=stream,
        queue=queue,
        runner=_NeverRuns(),
        settings=WorkerPoolConfig(
            concurrency=4,
            lease_seconds=30,
            shutdown_grace_seconds=1,
            read_block_ms=100,
            backlog_log_seconds=0.2,
        ),
    )
    reported = asyncio.Event()

    class _Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Backlog: 1 chat(s)"):
                reported.set()

    watch = _Watch()
    logging.getLogger("bot.queue.worker").addHandler(watch)
    try:
        with caplog.at_level(logging.INFO, logger="bot.queue.worker"):
            running = asyncio.create_task(pool.run())
            async with asyncio.timeout(10):
                await reported.wait()
            pool.stop()
            await running
    finally:
        logging.getLogger("bot.queue.worker").removeHandler(watch)
    assert "the oldest waiting" in caplog.text
