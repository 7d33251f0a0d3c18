"""Stopping a test's worker pool (or bot) without waiting out its blocking read."""

import asyncio
import contextlib
from typing import TypeVar

from redis.exceptions import RedisError

from bot.queue.worker import WorkerPool
from bot.settings import RedisSettings
from bot.storage.connection import AsyncRedisClient, RetryPolicy, async_client, every_master

T = TypeVar("T")

# How often the blocked read is looked for again while the pool winds down.
_RECHECK_SECONDS = 0.05
# Bounds one look: the test's Redis may be stopped or asleep (then the read ends by itself).
_LOOK_SECONDS = 0.5


async def stop_pool(pool: WorkerPool, running: asyncio.Task[None], redis: AsyncRedisClient) -> None:
    """Stop ``pool`` (whose ``run()`` is ``running``) and wait until it has returned.

    The pool's claim loop sees the stop only between reads; a read blocks on
    ``XREADGROUP`` for up to a second, so each stop of a test would wait that
    second out. ``CLIENT UNBLOCK`` ends the blocked read as its timeout would:
    the pool then takes the path of a quiet stream, and winds down exactly as it
    does in production (chats in hand finish, acknowledgements are flushed).
    Raises whatever ``run()`` raised.
    """
    pool.stop()
    await _unblocking(running, redis)
    await running


async def until_stopped(running: "asyncio.Future[T]", redis: RedisSettings) -> T:
    """Await ``running`` (a bot told to stop), ending its workers' blocking reads meanwhile.

    For ``run_bot`` in this process, as :func:`stop_pool` for a bare pool; what
    the bot does while it stops is unchanged. Returns what ``running`` returns.
    """
    client = async_client(redis, retry=RetryPolicy(retries=0))
    try:
        await _unblocking(running, client)
    finally:
        await client.aclose()
    return await running


async def unblock_reads(redis: AsyncRedisClient) -> None:
    """End every blocked ``XREADGROUP`` on ``redis`` as its timeout would (it returns nothing).

    Also for pools in processes of their own: after SIGTERM, a process stops as
    soon as its read returns.
    """
    for where in await every_master(redis):
        clients = await redis.client_list(**where)
        for client in clients:
            if client.get("cmd") == "xreadgroup" and "b" in client.get("flags", ""):
                await redis.client_unblock(int(client["id"]), **where)


async def _unblocking(running: "asyncio.Future[T]", redis: AsyncRedisClient) -> None:
    while not running.done():
        # Redis down or asleep: the read ends on its own, as it would without the test.
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            async with asyncio.timeout(_LOOK_SECONDS):
                await unblock_reads(redis)
        await asyncio.wait({running}, timeout=_RECHECK_SECONDS)
