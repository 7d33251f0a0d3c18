"""Stopping a test's worker pool without waiting out its blocking read."""

import asyncio

from bot.queue.worker import WorkerPool
from bot.redis_connection import AsyncRedisClient, every_master

# How often the blocked read is looked for again while the pool winds down.
_RECHECK_SECONDS = 0.05


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
    while not running.done():
        await unblock_reads(redis)
        await asyncio.wait({running}, timeout=_RECHECK_SECONDS)
    await running


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
