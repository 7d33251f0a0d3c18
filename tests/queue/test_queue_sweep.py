"""The sweep: a chat with queued work, no lease and no live signal is signalled again.

On standalone and on the cluster (``storage_client``), with the real pool and
intake. The lost signal is made the way the bug of issue 22 lost it: read and
acknowledged without the chat being drained.
"""

import asyncio
import contextlib
from typing import Any

import pytest

from bot.queue.work_stream import GROUP
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from tests.queue.echo_pool import echo_stack, wait_until, wait_until_redis

LEASE_SECONDS = 1.0


@pytest.fixture
def redis_client(storage_client: AsyncRedisClient) -> AsyncRedisClient:
    """Standalone and cluster."""
    return storage_client


async def _lose_signals(redis: AsyncRedisClient, stream: str) -> None:
    """Read every signal as another consumer and acknowledge it, draining nothing."""
    reply: Any = await redis.xreadgroup(GROUP, "careless", {stream: ">"}, count=100)
    ids = [entry_id for _stream, entries in reply or () for entry_id, _fields in entries]
    assert ids
    await redis.xack(stream, GROUP, *ids)


async def test_a_chat_whose_signal_was_lost_is_signalled_again_and_answered(
    redis_client: AsyncRedisClient,
) -> None:
    stack = echo_stack(redis_client, prefix="sweep", lease_seconds=LEASE_SECONDS)
    await stack.stream.ensure_group()
    await stack.send(31, "потерянный сигнал")
    await stack.send(32, "тоже")
    await _lose_signals(redis_client, stack.keys.work_stream)
    running = asyncio.create_task(stack.pool.run())
    try:
        # Nothing else signals them again: being answered at all is the sweep's doing.
        # (Stale after two leases, swept once a lease: about four leases on an idle
        # machine; the bound only stops a test that waits in vain.)
        await wait_until(
            lambda: (
                stack.runner.texts(31) == ["Ответ: потерянный сигнал"]
                and stack.runner.texts(32) == ["Ответ: тоже"]
            ),
            30 * LEASE_SECONDS,
            "both chats answered",
        )
    finally:
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await running


async def test_drained_chats_leave_the_index_and_are_not_signalled_again(
    redis_client: AsyncRedisClient,
) -> None:
    stack = echo_stack(redis_client, prefix="idx", lease_seconds=LEASE_SECONDS)
    index = RedisKeys.work_queued(stack.keys.work_stream)
    running = asyncio.create_task(stack.pool.run())
    try:
        for chat in range(40, 45):
            await stack.send(chat, "вопрос")
        assert await redis_client.zcard(index) == 5
        await wait_until(lambda: len(stack.runner.sent) == 5, 10, "five answers")

        async def index_empty() -> bool:
            return int(await redis_client.zcard(index)) == 0

        await wait_until_redis(index_empty, 6 * LEASE_SECONDS, "the index emptied by the sweep")
        # Five signals in all: the sweep found nothing to signal again.
        assert await redis_client.xlen(stack.keys.work_stream) == 5
        assert len(stack.runner.sent) == 5
    finally:
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):
                await running


async def test_a_chat_waiting_for_a_busy_worker_is_not_signalled_twice(
    redis_client: AsyncRedisClient,
) -> None:
    stack = echo_stack(redis_client, prefix="busy", lease_seconds=LEASE_SECONDS, concurrency=1)
    # The only slot is busy for four leases: the other chat's signal waits unread.
    stack.runner.slow[50] = 4 * LEASE_SECONDS
    running = asyncio.create_task(stack.pool.run())
    try:
        await stack.send(50, "долгий")
        await wait_until(lambda: stack.pool.active == 1, 5, "the slow chat in hand")
        await stack.send(51, "ждёт")
        await wait_until(lambda: len(stack.runner.sent) == 2, 12 * LEASE_SECONDS, "both answered")
        assert await redis_client.xlen(stack.keys.work_stream) == 2
    finally:
        stack.pool.stop()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(15):
                await running
