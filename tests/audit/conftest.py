"""Fixtures of the audit tests: a synchronous client and the CLI's environment."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.testing.redis_server import RedisServer

STREAM = "support:audit"
HMAC_KEY = "test-audit-key-0123456789"


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI writes to a capture, not a terminal: no width limit unless a test sets one.

    The runner's own ``COLUMNS`` stays out (pytest-xdist's workers, for one, have 80).
    """
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def sync_redis(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A synchronous client (strings, not bytes) to the shared server, database flushed."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def cli_env(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, str]:
    """Environment of the CLI under test: the suite's Redis, the default stream, no key.

    The working directory moves to an empty folder so that no developer's ``.env``
    leaks into the settings the CLI reads.
    """
    monkeypatch.chdir(tmp_path)
    values = {
        "REDIS_URL": redis_server.url,
        "AUDIT_STREAM": STREAM,
        "AUDIT_PSEUDONYMIZE_CHAT_IDS": "false",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AUDIT_HMAC_KEY", raising=False)
    return values
