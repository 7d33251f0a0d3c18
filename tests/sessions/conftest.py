"""Storage claims hold on standalone Redis and on a cluster: ``redis_client`` is both."""

import pytest

from bot.storage.connection import AsyncRedisClient


@pytest.fixture
def redis_client(storage_client: AsyncRedisClient) -> AsyncRedisClient:
    """The factory's client, once per Redis topology."""
    return storage_client
