"""The bot's Redis usage on a real 6-node cluster: spread, bounded bursts, one slot per script."""

import asyncio
import hashlib
import inspect
from pathlib import Path
from typing import Any, get_type_hints

import pytest
import redis
import redis.cluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from bot.sessions.redis_store import RedisSessionStore
from bot.settings import RedisSettings
from bot.storage.connection import RetryPolicy, async_client, every_master
from bot.storage.keys import ConversationKeys, RedisKeys
from bot.storage.scripts.base import Scripts, load_scripts
from bot.support_audit.cli import main as audit_main
from bot.testing.redis_cluster import RedisClusterProcesses
from tests.unit.test_redis_scripts import every_script_class, script_samples

ROOT = Path(__file__).resolve().parents[2]


def _cluster_settings(cluster: RedisClusterProcesses, **env: Any) -> RedisSettings:
    return RedisSettings(REDIS_MODE="cluster", REDIS_URL=cluster.url, **env)


async def test_conversations_spread_over_at_least_two_masters(
    redis_cluster: RedisClusterProcesses,
):
    client = async_client(_cluster_settings(redis_cluster))
    try:
        store = RedisSessionStore(
            client, keys=RedisKeys("spread"), ttl_seconds=60, archive_ttl_seconds=60
        )
        for conversation in range(12):
            locked = await store.acquire(str(conversation), lease_seconds=5, wait_seconds=1)
            await store.release(locked)
            await client.set(store.keys(str(conversation)).session, b"x", ex=60)
        masters_with_keys = 0
        for where in await every_master(client):
            if await client.keys("spread:*", **where):
                masters_with_keys += 1
        assert masters_with_keys >= 2
    finally:
        await client.aclose()


async def test_a_burst_over_max_connections_queues_instead_of_failing(
    redis_cluster: RedisClusterProcesses,
):
    client = async_client(_cluster_settings(redis_cluster, REDIS_MAX_CONNECTIONS="10"))
    try:
        # Read the topology first, as the bot's start-up PING does: redis-py 8.1 loses
        # a few commands of a burst that lands on a client that has not read it yet.
        await client.initialize()

        async def command(number: int) -> bool:
            # A script call blocks its connection for a moment, so the 50 really overlap.
            await client.eval("redis.call('SET', KEYS[1], ARGV[1]) return 1", 1, f"b{number}", 1)
            return bool(await client.blpop([f"never{{b{number}}}"], timeout=0.05) is None)

        results = await asyncio.gather(*(command(n) for n in range(50)), return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert all(results)
    finally:
        await client.aclose()


def _script_modules() -> list[Path]:
    return sorted(
        path
        for path in (ROOT / "bot").rglob("*.py")
        if "register_script(" in path.read_text(encoding="utf-8")
    )


def _conversation_keys(keys: ConversationKeys) -> list[str]:
    """Every key a conversation has: each property and key method of ConversationKeys.

    Found by looking, not listed: a key added there is checked here at once. A method
    is called with a sample of each parameter's type.
    """
    samples: dict[Any, Any] = {int: -1001234567890, str: "20260101T000000Z"}
    found: list[str] = []
    for name, member in vars(ConversationKeys).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            value = getattr(keys, name)
        elif inspect.isfunction(member):
            hints = get_type_hints(member)
            parameters = list(inspect.signature(member).parameters)[1:]
            value = getattr(keys, name)(*(samples[hints[p]] for p in parameters))
        else:
            continue
        if isinstance(value, str):
            found.append(value)
    return found


async def test_every_lua_script_gets_keys_of_one_hash_slot(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """Each script runs on the real cluster (a cross-slot call fails there), for every kind
    of conversation, prefix and audit stream; every key of a conversation is in its slot."""
    modules = {path.relative_to(ROOT).as_posix() for path in _script_modules()}
    # Every script is a call of bot/storage/scripts/, run by one runner.
    assert modules == {"bot/storage/scripts/base.py"}
    assert {type(call) for call in script_samples("support", "tg:1", "audit")} == (
        every_script_class()
    )
    client = async_client(_cluster_settings(redis_cluster), retry=RetryPolicy(retries=0))
    refused: list[tuple[str, str]] = []
    try:
        scripts = Scripts(client)
        for prefix in ("support", "a.b-c"):
            for conversation in ("tg:1", "tg:-1001234567890", "console-dev", "x" * 40):
                keys = _conversation_keys(RedisKeys(prefix).conversation(conversation))
                assert any(key.endswith(":csat") for key in keys)
                assert len({key_slot(key.encode()) for key in keys}) == 1, (prefix, conversation)
                for stream in ("support:audit", "audit", "a{b}c"):
                    for call in script_samples(prefix, conversation, stream):
                        try:
                            await scripts.run(call)
                        except RedisError as error:
                            refused.append((type(call).__name__, str(error)))
    finally:
        await client.aclose()
    assert refused == []
    for stream in ("support:audit", "audit", "a{b}c"):
        # The minute keys the audit script builds from its index's prefix, inside the Lua.
        index = RedisKeys.audit_index(stream)
        for key in (index.minute(29_000_000), index.minute_chats(29_000_000)):
            assert key_slot(key.encode()) == key_slot(stream.encode()), (stream, key)


def test_the_staff_cli_reads_a_stream_on_another_node_than_redis_url(
    redis_cluster: RedisClusterProcesses,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    first = redis_cluster.nodes[0]
    stream = next(
        name
        for name in (f"audit:{n}" for n in range(1000))
        if not _served_by(first.port, key_slot(name.encode()))
    )
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=first.port, decode_responses=True)
    client.delete(stream)
    client.xadd(stream, {"type": "turn", "turn_id": "t-cli-1", "outcome": "ok", "ts": "0"})
    client.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_MODE", "cluster")
    monkeypatch.setenv("REDIS_URL", first.url)
    monkeypatch.setenv("AUDIT_STREAM", stream)
    monkeypatch.setenv("AUDIT_PSEUDONYMIZE_CHAT_IDS", "false")
    monkeypatch.delenv("AUDIT_HMAC_KEY", raising=False)
    status = audit_main(["tail", "--json"])
    # The stream really is elsewhere: the node in REDIS_URL does not serve its slot.
    assert not _served_by(first.port, key_slot(stream.encode()))
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "t-cli-1" in out.out


def _served_by(port: int, slot: int) -> bool:
    client = redis.Redis(port=port)
    try:
        for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(master[1]) == port
        return False
    finally:
        client.close()


async def test_start_up_refuses_a_cluster_node_in_standalone_mode(
    redis_cluster: RedisClusterProcesses,
):
    from bot.ops.redis_startup import connect_redis  # noqa: PLC0415 - keeps collection fast
    from bot.ops.startup import StartupError  # noqa: PLC0415 - keeps collection fast
    from bot.settings import Settings  # noqa: PLC0415

    settings = Settings.from_env(
        {"REDIS_URL": redis_cluster.url, "LLM_BACKEND": "offline"}, env_file=None
    )
    with pytest.raises(StartupError, match="is a cluster node: set REDIS_MODE=cluster"):
        await connect_redis(settings)


async def test_the_scripts_loaded_at_start_are_on_every_master(
    redis_cluster: RedisClusterProcesses,
):
    """A process loads its scripts before it takes work: on a cluster, on every master."""
    client = async_client(_cluster_settings(redis_cluster))
    try:
        shas = [hashlib.sha1(script.SOURCE.encode()).hexdigest() for script in every_script_class()]  # noqa: S324 - Redis names scripts by SHA-1
        assert await load_scripts(client) == len(shas)
        for where in await every_master(client):
            assert all(await client.execute_command("SCRIPT EXISTS", *shas, **where))
    finally:
        await client.aclose()
