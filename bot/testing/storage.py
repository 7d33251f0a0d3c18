"""Helpers for tests that run on standalone Redis and on a cluster alike."""

from typing import Any

from bot.storage.connection import AsyncRedisClient, every_master


async def all_keys(client: AsyncRedisClient, pattern: str) -> list[Any]:
    """``KEYS pattern`` over every master (a cluster answers ``KEYS`` per node)."""
    found: list[Any] = []
    for where in await every_master(client):
        found.extend(await client.keys(pattern, **where))
    return found
