"""Fixtures shared by the whole suite: a private redis-server, clients to it, a fake Bot API."""

from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from tests.fakes.telegram_server import FakeTelegramServer
from tests.support.redis_cluster import RedisClusterProcesses
from tests.support.redis_sentinel import SentinelGroup
from tests.support.redis_server import RedisServer


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


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterProcesses]:
    """One 6-node cluster (3 masters, 3 replicas) for the session."""
    cluster = RedisClusterProcesses()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def sentinel_group() -> Iterator[SentinelGroup]:
    """A master, a replica and three Sentinels of this test alone (tests kill the master)."""
    group = SentinelGroup()
    try:
        group.start()
        yield group
    finally:
        group.close()
