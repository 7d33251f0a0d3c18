"""Fixtures shared by the whole suite: a private redis-server and clients, fake servers."""

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the session; tests that stop it use ``own_redis_server``."""
    server = RedisServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test alone, free to be stopped and restarted."""
    server = RedisServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """A client to the shared server, on a database flushed before the test."""
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=False)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    """A fresh fake Bot API server on a free port."""
    server = FakeTelegramServer()
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def openai_server() -> AsyncIterator[ScriptedOpenAIServer]:
    """A scripted OpenAI-compatible server of this test."""
    async with ScriptedOpenAIServer() as server:
        yield server
