"""Fixtures shared by the whole suite: a private redis-server and clients, fake servers."""

import gc
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from bot.settings import RedisSettings
from bot.storage.connection import AsyncRedisClient, RetryPolicy, async_client, every_master
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_cluster import RedisClusterProcesses
from bot.testing.redis_sentinel import SentinelGroup
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Collect garbage now for tests marked ``leaves_connections_to_gc``.

    Runs after the test's fixtures (its event loop included) are torn down and
    before pytest gathers unraisable warnings: what the test left to the collector
    is reported, or filtered, as this test's, never blamed on a later one.
    """
    if item.get_closest_marker("leaves_connections_to_gc") is not None:
        gc.collect()


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


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``standalone_only`` gets no cluster variant (rather than one skipped).

    Runs before pytest parametrizes the fixtures: a test's own ``parametrize`` of
    ``storage_client`` takes precedence over the fixture's params.
    """
    if (
        "storage_client" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("standalone_only") is not None
    ):
        metafunc.definition.add_marker(
            pytest.mark.parametrize("storage_client", ["standalone"], indirect=True)
        )


@pytest.fixture(params=["standalone", "cluster"])
async def storage_client(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> AsyncIterator[AsyncRedisClient]:
    """A client built by the bot's factory, on standalone and on the cluster, data flushed.

    Modules whose claims are about storage use it as their ``redis_client``, so
    they run on both. Tests about one standalone server are marked ``standalone_only``.
    """
    if request.param == "standalone":
        settings = RedisSettings(REDIS_URL=redis_server.url)
    else:
        cluster: RedisClusterProcesses = request.getfixturevalue("redis_cluster")
        settings = RedisSettings(REDIS_MODE="cluster", REDIS_URL=cluster.url)
    client = async_client(settings, retry=RetryPolicy(retries=0))
    for where in await every_master(client):
        await client.flushdb(**where)
    yield client
    await client.aclose()
