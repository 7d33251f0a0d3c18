"""Fixtures of the durability suite: a private Redis (DEBUG allowed), the model, bot processes."""

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import Cluster


@pytest.fixture
def debug_redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test alone that accepts ``DEBUG SLEEP``."""
    server = RedisServer(extra_args=("--enable-debug-command", "yes"))
    server.start()
    yield server
    server.close()


@pytest.fixture
async def store(debug_redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """The test's client to its Redis (no retries: it observes, it does not write for the bot)."""
    client = aioredis.Redis.from_url(debug_redis_server.url, decode_responses=False)
    yield client
    await client.aclose()


@pytest.fixture
async def model() -> AsyncIterator[ScriptedOpenAIServer]:
    """The scripted OpenAI-compatible server of this test."""
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def cluster(
    tmp_path: Path,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    debug_redis_server: RedisServer,
) -> AsyncIterator[Cluster]:
    """Bot processes of this test; whatever still runs at the end is killed."""
    group = Cluster(tmp_path, telegram, model, debug_redis_server.url)
    try:
        yield group
    finally:
        await group.close()
