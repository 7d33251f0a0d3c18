"""Scripts loaded before a process takes work (real redis-server).

A first burst against a Redis that had not seen the scripts met ``NOSCRIPT`` on
every concurrent first call, and each call loaded the script itself
(bench/README.md, "Issue 49"). Loaded at start, the burst's calls run at once.
"""

import asyncio

import redis.asyncio as aioredis

from bot.settings import RedisSettings
from bot.storage.connection import async_client
from bot.storage.keys import RedisKeys
from bot.storage.scripts.admission_lua import Accept
from bot.storage.scripts.base import Scripts, load_scripts
from bot.testing.redis_server import RedisServer

_AT_ONCE = 10


async def test_a_burst_after_the_scripts_were_loaded_meets_no_noscript(
    own_redis_server: RedisServer,
) -> None:
    client = async_client(RedisSettings(REDIS_URL=own_redis_server.url))
    admin = aioredis.Redis.from_url(own_redis_server.url)
    keys = RedisKeys("loaded")
    try:
        assert await load_scripts(client) >= 1
        await admin.config_resetstat()
        await asyncio.gather(
            *(
                Scripts(client).run(
                    Accept(
                        chat=keys.conversation(f"tg:{n}"),
                        update_id=n,
                        user_id=n,
                        day="20261207",
                        seen_ttl=60,
                        job="{}",
                        rate_notice="{}",
                        daily_notice="{}",
                        check_flood=True,
                        counts_turn=True,
                        burst=5,
                        interval_ms=3000,
                        daily_limit=200,
                        day_counter_ttl=60,
                        queue_cap=0,
                        full_notice="",
                        full_mark_ttl=60,
                    )
                )
                for n in range(_AT_ONCE)
            )
        )
        stats = await admin.info("commandstats")
    finally:
        await client.aclose()
        await admin.aclose()
    assert stats["cmdstat_evalsha"]["calls"] == _AT_ONCE
    assert stats["cmdstat_evalsha"]["failed_calls"] == 0
    assert "cmdstat_script|load" not in stats
