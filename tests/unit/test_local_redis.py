"""The try-out's private redis-server (bot/tryout/local_redis.py), real redis-servers."""

import json
import socket
from pathlib import Path

import pytest
import redis

from bot.settings import RedisSettings
from bot.testing.redis_server import RedisServer
from bot.tryout.local_redis import INSTALL_HINT, STATE_FILE, LocalRedis, LocalRedisError


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_the_last_user_stops_it_and_the_data_survive(tmp_path: Path):
    first = LocalRedis(tmp_path)
    second = LocalRedis(tmp_path)
    started = first.acquire()
    joined = second.acquire()
    assert started.started_here
    assert not joined.started_here
    assert (joined.port, joined.pid) == (started.port, started.pid)
    with redis.Redis(port=started.port) as client:
        client.set("kept", "yes")

    first.release()  # the one that started it leaves first: the other still uses it
    assert listening(started.port)
    second.release()
    assert not listening(started.port)
    assert not (tmp_path / STATE_FILE).exists()

    with LocalRedis(tmp_path) as again, redis.Redis(port=again.port) as client:
        assert client.get("kept") == b"yes"  # the append-only file, read back


def test_a_server_it_did_not_start_is_never_used(tmp_path: Path, own_redis_server: RedisServer):
    """A stale redis.json naming a port someone else's Redis took since: a new server."""
    (tmp_path / STATE_FILE).write_text(
        json.dumps({"port": own_redis_server.port, "pid": 1}), encoding="utf-8"
    )
    with LocalRedis(tmp_path) as server:
        assert server.started_here
        assert server.port != own_redis_server.port
    assert listening(own_redis_server.port)  # the other server was left alone


def test_without_redis_server_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalRedisError) as raised:
        LocalRedis(tmp_path / ".data").acquire()
    assert str(raised.value) == INSTALL_HINT
    assert "apt-get install redis-server" in INSTALL_HINT


def test_only_an_unset_redis_url_counts_as_unset(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert not RedisSettings(_env_file=None).url_is_set
    monkeypatch.setenv("REDIS_URL", "")  # "REDIS_URL=" in .env means not set
    assert not RedisSettings(_env_file=None).url_is_set
    monkeypatch.setenv("REDIS_URL", "redis://localhost:6379/0")
    assert RedisSettings(_env_file=None).url_is_set
