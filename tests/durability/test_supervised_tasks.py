"""A real webhook process whose Redis refuses writes for a while, then a task that keeps failing.

Each refusal is made by the private redis-server itself, the way production
meets it: ``NOREPLICAS`` (a master that lost its replicas:
``min-replicas-to-write 1``), ``READONLY`` (the master demoted to a replica of
a master it cannot reach yet, as in a fail-over, then promoted back), ``OOM``
(``maxmemory`` below what is used, ``noeviction``) and ``MISCONF`` (an RDB
snapshot that cannot be written, with ``stop-writes-on-bgsave-error``). Before
the supervisor, the first of them ended the claim loop for good: every later
message got its webhook 200 and was never answered, and ``/healthz`` said ok.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.queue.work_stream import GROUP
from bot.storage.keys import RedisKeys
from bot.testing.openai_server import ScriptedOpenAIServer
from bot.testing.redis_server import RedisServer, free_port
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    PREFIX,
    BotProcess,
    Cluster,
    answer_for,
    audit_turns,
    echo,
    post_update,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)

CHAT = 5150
ANSWER_WITHIN = 30.0
HEALTH_WITHIN = 20.0
BOT_ENV = {
    # Short pauses keep the test short; the defaults are 5 restarts and 5 s.
    "TASK_BACKOFF_MAX_SECONDS": "1",
    "TASK_MAX_RESTARTS": "3",
}
Fault = Callable[[aioredis.Redis, RedisServer], "contextlib.AbstractAsyncContextManager[None]"]


@pytest.fixture
def debug_redis_server() -> Iterator[RedisServer]:
    """This module's Redis: its snapshot file may be pointed elsewhere (``dbfilename``)."""
    server = RedisServer(extra_args=("--enable-protected-configs", "yes"))
    server.start()
    yield server
    server.close()


async def _info(store: aioredis.Redis, section: str) -> dict[str, Any]:
    return dict(await store.info(section))


async def _rejected_claims(store: aioredis.Redis) -> int:
    """How many of the claim loop's commands Redis refused so far."""
    stats = await _info(store, "commandstats")
    return sum(
        int(stats.get(f"cmdstat_{command}", {}).get("rejected_calls", 0))
        for command in ("xreadgroup", "xautoclaim", "xgroup|create")
    )


async def _until(condition: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def noreplicas(store: aioredis.Redis, server: RedisServer) -> AsyncIterator[None]:
    await store.config_set("min-replicas-to-write", 1)
    try:
        yield
    finally:
        await store.config_set("min-replicas-to-write", 0)


@contextlib.asynccontextmanager
async def readonly(store: aioredis.Redis, server: RedisServer) -> AsyncIterator[None]:
    # A master nobody listens on: the server stays a replica with its data, refusing writes.
    await store.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
    try:
        yield
    finally:
        await store.execute_command("REPLICAOF", "NO", "ONE")


@contextlib.asynccontextmanager
async def oom(store: aioredis.Redis, server: RedisServer) -> AsyncIterator[None]:
    await store.config_set("maxmemory-policy", "noeviction")
    await store.config_set("maxmemory", 1)
    try:
        yield
    finally:
        await store.config_set("maxmemory", 0)


@contextlib.asynccontextmanager
async def misconf(store: aioredis.Redis, server: RedisServer) -> AsyncIterator[None]:
    # The snapshot's target is a directory: the background save fails, as on a full disk.
    (Path(server.directory) / "unwritable.rdb").mkdir()
    await store.config_set("save", "3600 1")
    await store.config_set("dbfilename", "unwritable.rdb")
    await _bgsave(store, expect="err")
    try:
        yield
    finally:
        await store.config_set("dbfilename", "dump.rdb")
        await _bgsave(store, expect="ok")
        await store.config_set("save", "")


async def _bgsave(store: aioredis.Redis, *, expect: str) -> None:
    async def idle() -> bool:
        return int((await _info(store, "persistence"))["rdb_bgsave_in_progress"]) == 0

    await _until(idle, 20, "no snapshot in progress")
    await store.bgsave()

    async def saved() -> bool:
        persistence = await _info(store, "persistence")
        return (
            int(persistence["rdb_bgsave_in_progress"]) == 0
            and persistence["rdb_last_bgsave_status"] == expect
        )

    await _until(saved, 20, f"a background save ending {expect}")


async def _health(http: aiohttp.ClientSession, hook: BotProcess) -> tuple[int, dict[str, Any]]:
    try:
        async with http.get(
            f"http://127.0.0.1:{hook.port}/healthz", timeout=aiohttp.ClientTimeout(total=10)
        ) as response:
            return response.status, await response.json()
    except (aiohttp.ClientError, TimeoutError):
        return 0, {}


async def test_each_redis_refusal_is_ridden_out_and_the_next_message_answered(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    debug_redis_server: RedisServer,
) -> None:
    """NOREPLICAS, READONLY, OOM, MISCONF in one process run: every message is answered."""
    model.responder = echo
    hook = await cluster.start("webhook", **BOT_ENV)
    expected: list[str] = []
    keys = RedisKeys(PREFIX)
    faults: list[tuple[str, Fault, bool]] = [
        # (name, fault, whether the claim loop's XREADGROUP is refused by it)
        ("NOREPLICAS", noreplicas, True),
        ("READONLY", readonly, True),
        # XREADGROUP may run out of memory: only intake and the scripts are refused.
        ("OOM", oom, False),
        ("MISCONF", misconf, True),
    ]
    async with aiohttp.ClientSession() as http:

        async def answered(question: str) -> None:
            expected.append(answer_for(question))
            await wait_until(
                lambda: telegram.sent_texts(CHAT) == expected,
                ANSWER_WITHIN,
                f"the answer to {question!r}",
                cluster.logs,
            )

            # The turn's bookkeeping (delivered mark, audit, acknowledgement) is done
            # before the next fault: a fault right after a send is another test's subject.
            async def settled() -> bool:
                pending = await store.xpending(keys.work_stream, GROUP)
                return (
                    len(await audit_turns(store)) == len(expected)
                    and int(pending["pending"]) == 0
                    and not await store.exists(keys.conversation(f"tg:{CHAT}").lease)
                )

            await _until(settled, ANSWER_WITHIN, f"the turn of {question!r} is settled")

        async def healthy() -> bool:
            return (await _health(http, hook))[0] == 200

        first = "до сбоя: где мой заказ?"
        assert await post_update(http, hook, telegram.message_update(CHAT, first)) == 200
        await answered(first)

        for name, fault, refuses_reads in faults:
            rejected_before = await _rejected_claims(store)
            during = telegram.message_update(CHAT, f"во время {name}")
            async with fault(store, debug_redis_server):

                async def unhealthy() -> bool:
                    return (await _health(http, hook))[0] == 503

                await _until(unhealthy, HEALTH_WITHIN, f"/healthz says 503 under {name}")
                if refuses_reads:

                    async def claim_refused(before: int = rejected_before) -> bool:
                        return await _rejected_claims(store) > before

                    await _until(claim_refused, HEALTH_WITHIN, f"the claim loop meets {name}")
                # Telegram is told 200 (queued) or 503 (it sends the update again later).
                status = await post_update(http, hook, during)
                assert status in (200, 503), status
            await _until(healthy, HEALTH_WITHIN, f"/healthz says 200 after {name}")
            if status != 200:
                assert await post_update(http, hook, during) == 200
            await answered(f"во время {name}")
            after = f"после {name}"
            assert await post_update(http, hook, telegram.message_update(CHAT, after)) == 200
            await answered(after)

        status, body = await _health(http, hook)
        assert status == 200, body
        assert body.get("tasks") == {}, body

    log = hook.log()
    assert hook.alive, log
    # Each outage is one warning line of the claim loop, not one per retry, and no traceback.
    for name, _, refuses_reads in faults:
        lines = [line for line in log.splitlines() if "claim-loop" in line and name in line]
        assert len(lines) == (1 if refuses_reads else 0), (name, lines)
    assert "Traceback" not in log, log


async def test_a_task_that_keeps_failing_turns_health_503_and_exits_non_zero(
    cluster: Cluster, store: aioredis.Redis
) -> None:
    """The work stream replaced by a string: the claim loop fails, restarts, and is given up."""
    hook = await cluster.start("webhook", **BOT_ENV)
    stream = RedisKeys(PREFIX).work_stream
    seen: list[tuple[int, dict[str, Any]]] = []
    async with aiohttp.ClientSession() as http:
        status, body = await _health(http, hook)
        assert status == 200, body
        async with store.pipeline(transaction=True) as pipe:
            pipe.delete(stream)
            pipe.set(stream, b"not a stream")
            await pipe.execute()
        deadline = time.monotonic() + 30
        while hook.alive and time.monotonic() < deadline:
            status, body = await _health(http, hook)
            if status:
                seen.append((status, body))
            await asyncio.sleep(0.02)
    exited_by_itself = not hook.alive
    code = await hook.terminate(within=30)

    log = hook.log()
    assert exited_by_itself, log
    assert code == 1, log
    down = [
        body for status, body in seen if status == 503 and "claim-loop" in body.get("tasks", {})
    ]
    assert down, seen[-5:]
    # The Redis probe was fine all along: the 503 is the task's.
    assert all(body["redis"] is True for body in down), down
    assert "claim-loop cannot be restarted" in log
    # Every failure is logged with its traceback (4: three restarts, then given up).
    assert log.count("Traceback") == 4, log
