"""What a burst's new Redis connections send before their first command (real redis-server).

A burst opens hundreds of connections at once (bench/README.md, "Issue 49"); each
pays its handshake, and nothing more: redis-py's health check sent a ``PING``
before the handshake of every new connection.
"""

import asyncio

import redis.asyncio as aioredis

from bot.settings import RedisSettings
from bot.storage.connection import async_client
from bot.testing.redis_server import RedisServer

_AT_ONCE = 20


async def test_connections_opened_by_a_burst_send_their_handshake_and_no_ping(
    own_redis_server: RedisServer,
) -> None:
    client = async_client(RedisSettings(REDIS_URL=own_redis_server.url))
    admin = aioredis.Redis.from_url(own_redis_server.url)
    try:
        await admin.config_resetstat()
        # Blocking reads hold their connections until all are open: one connection each.
        await asyncio.gather(*(client.blpop([f"list:{n}"], timeout=0.1) for n in range(_AT_ONCE)))
        stats = await admin.info("commandstats")
        # Used again past their first command: still no PING (the interval has not passed).
        await asyncio.gather(*(client.get(f"key:{n}") for n in range(_AT_ONCE)))
        again = await admin.info("commandstats")
    finally:
        await client.aclose()
        await admin.aclose()
    assert stats["cmdstat_hello"]["calls"] == _AT_ONCE
    assert "cmdstat_ping" not in stats
    assert "cmdstat_ping" not in again
    assert again["cmdstat_hello"]["calls"] == _AT_ONCE
