"""A Redis that stalls past the socket timeout (``DEBUG SLEEP``) during intake and the commit.

redis-py retries a command that timed out (the client's ``Retry``), and Redis
still runs the first attempt when it wakes up: every script therefore runs
twice. Nothing may be lost, nothing doubled, and a customer whose turn was
saved must get its answer, never "service unavailable".

The bot runs with ``REDIS_SOCKET_TIMEOUT_SECONDS=2`` (two retries after the
first attempt); a sleep of 3 s is ridden out by a retry, one of 7 s outlasts
every retry. The lease is long here (20 s) so that the stall, not the lease,
is what each test is about.
"""

import asyncio
import time
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.testing.openai_server import Reply, ScriptedOpenAIServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.durability.support import (
    Cluster,
    answer_for,
    asks,
    audit_turns,
    echo,
    post_update,
    stored_session,
    wait_until,
)

pytestmark = pytest.mark.timeout(150)

CHAT = 7007
QUESTION = "где мой заказ 8041?"
NEXT = "спасибо, а возврат?"
SOCKET_TIMEOUT = 2.0
RIDDEN_OUT = 3.0
OUTLASTS_RETRIES = 15.0
"""Longer than three attempts, each up to a connect and a read timeout."""
BOT_ENV = {"REDIS_SOCKET_TIMEOUT_SECONDS": str(SOCKET_TIMEOUT), "SESSION_LEASE_SECONDS": "20"}


async def debug_sleep(store: aioredis.Redis, seconds: float) -> "asyncio.Task[None]":
    """Start ``DEBUG SLEEP`` and return once Redis is asleep (it answers when it wakes)."""
    # A client of its own, that waits for the answer as long as Redis sleeps.
    where = store.connection_pool.connection_kwargs
    sleeper = aioredis.Redis(host=where["host"], port=where["port"], socket_timeout=seconds + 10)

    async def sleep() -> None:
        try:
            await sleeper.execute_command("DEBUG", "SLEEP", str(seconds))
        finally:
            await sleeper.aclose()

    task = asyncio.create_task(sleep())
    # Asleep once a PING on a connection of its own gets no answer (not after a guess).
    async with asyncio.timeout(10):
        while not await _asleep(where["host"], where["port"]):
            assert not task.done(), "Redis woke before it was seen asleep"
            await asyncio.sleep(0.02)
    return task


async def _asleep(host: str, port: int) -> bool:
    """Whether Redis leaves a PING unanswered for a quarter of a second (one try only)."""
    probe = aioredis.Redis(host=host, port=port, socket_timeout=0.25, retry=Retry(NoBackoff(), 0))
    try:
        await probe.ping()
    except (RedisTimeoutError, TimeoutError):
        return True
    finally:
        await probe.aclose()
    return False


async def assert_answered_once(
    cluster: Cluster,
    *,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    hook: Any,
    http: aiohttp.ClientSession,
) -> None:
    await telegram.wait_for_texts(CHAT, 1, within=60)
    # The chat goes on normally afterwards.
    assert await post_update(http, hook, telegram.message_update(CHAT, NEXT)) == 200
    await telegram.wait_for_texts(CHAT, 2, within=30)
    # A turn queued twice, or a reply left in the outbox, is run and sent before counting.
    await cluster.finish(store, [CHAT], turns=2)
    # A turn whose save never reached Redis may run again; one whose save did, never.
    print(f"model requests: {len(model.requests)} for 2 turns")
    session = await stored_session(store, CHAT)
    stored = [(m.role, m.content) for m in session.messages]
    turns = await audit_turns(store)
    if stored[:2] == [("user", QUESTION), ("assistant", answer_for(QUESTION))]:
        # Saved: the customer gets the saved answer, whatever the commit's caller saw.
        assert telegram.sent_texts(CHAT) == [answer_for(QUESTION), answer_for(NEXT)], cluster.logs()
        assert stored[2:] == [("user", NEXT), ("assistant", answer_for(NEXT))]
        assert [turn["outcome"] for turn in turns] == ["answered", "answered"]
        saved_at = 1 + sum(asks(request.body, QUESTION) for request in model.requests)
        assert len(model.requests) == saved_at
    else:
        # Not saved (the failure's own commit reached Redis first and the stalled save
        # then found the job settled): the customer is told so, and history agrees.
        print("the stalled save lost the race: the turn was not saved")
        first, second = telegram.sent_texts(CHAT)
        assert first.startswith("Сервис временно недоступен"), cluster.logs()
        assert second == answer_for(NEXT)
        assert stored == [("user", NEXT), ("assistant", answer_for(NEXT))]
        assert [turn["outcome"] for turn in turns] == ["storage_unavailable", "answered"]
    assert "Traceback" not in cluster.logs()


@pytest.mark.parametrize("sleep_seconds", [RIDDEN_OUT, OUTLASTS_RETRIES], ids=["short", "long"])
async def test_redis_stall_during_intake_loses_and_doubles_nothing(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    sleep_seconds: float,
) -> None:
    """The intake script may run twice (its first run waits in the stalled Redis): queued once.

    A timed-out command is not re-sent by the client, so the webhook answers 503
    and the update is posted again, as Telegram would; the stalled first run and
    the redelivery queue it once, and it is answered once.
    """
    model.responder = echo
    hook = await cluster.start("webhook", "hook", **BOT_ENV)
    update = telegram.message_update(CHAT, QUESTION)
    async with aiohttp.ClientSession() as http:
        sleeping = await debug_sleep(store, sleep_seconds)
        started = time.monotonic()
        status = await post_update(http, hook, update)
        waited = time.monotonic() - started
        await sleeping
        assert waited > SOCKET_TIMEOUT, "the intake command timed out at least once"
        print(f"intake answered {status} after {waited:.1f} s")
        if status != 200:
            # Not acknowledged: Telegram delivers the update again.
            assert status == 503, cluster.logs()
            assert await post_update(http, hook, update) == 200
        await assert_answered_once(
            cluster, telegram=telegram, model=model, store=store, hook=hook, http=http
        )


@pytest.mark.parametrize("sleep_seconds", [RIDDEN_OUT, OUTLASTS_RETRIES], ids=["retried", "failed"])
async def test_redis_stall_during_the_commit_never_reports_a_saved_turn_as_failed(
    cluster: Cluster,
    telegram: FakeTelegramServer,
    model: ScriptedOpenAIServer,
    store: aioredis.Redis,
    sleep_seconds: float,
) -> None:
    """Redis falls asleep just as the model answers: the commit runs twice, the answer is sent."""
    stalls: list[float] = []

    async def stall_then_answer(body: Any) -> Reply:
        if not stalls:
            stalls.append(time.monotonic())
            stall = await debug_sleep(store, sleep_seconds)
            stall.add_done_callback(lambda _: stalls.append(time.monotonic()))
        return echo(body)

    model.responder = stall_then_answer
    hook = await cluster.start("webhook", "hook", **BOT_ENV)
    async with aiohttp.ClientSession() as http:
        assert await post_update(http, hook, telegram.message_update(CHAT, QUESTION)) == 200
        await wait_until(lambda: len(stalls) == 2, 30, "Redis woke up", cluster.logs)
        await assert_answered_once(
            cluster, telegram=telegram, model=model, store=store, hook=hook, http=http
        )
