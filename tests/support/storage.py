"""Helpers for tests that run on standalone Redis and on a cluster alike."""

from bot.redis_connection import AsyncRedisClient, every_master


async def all_keys(client: AsyncRedisClient, pattern: str) -> list[bytes]:
    """``KEYS pattern`` over every master (a cluster answers ``KEYS`` per node)."""
    found: list[bytes] = []
    for where in await every_master(client):
        found.extend(await client.keys(pattern, **where))
    return found
