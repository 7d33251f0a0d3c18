"""A turn in flight when Redis goes away: one true story for the customer and the audit.

The real runner polls the fake Bot API, the model is the real ``AsyncOpenAI``
client against the scripted server, Redis is a private redis-server killed
(SIGKILL) while the model writes its answer. The turn cannot save its outcome.
Restarted from its files (a ``SAVE`` taken while the job was queued), Redis still
holds the job: it runs again and is answered, so the customer must not hear first
that it failed, and the audit holds the answer only. Restarted empty, the job is
gone and never will be answered: then the customer is told, and the audit says so.
Away for longer than the worker waits (REDIS_OUTAGE_WAIT_SECONDS, short here), the
worker cannot know yet: it tells nobody, and the job Redis kept is answered later.
"""

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import Reply, ScriptedOpenAIServer, text_answer
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer

pytestmark = pytest.mark.timeout(90)

PREFIX = "outage"
CHAT = 7401
ANSWER = "Заказ 8041 приедет завтра."
STORAGE_FAILURE = "Сервис временно недоступен"
# The worker's wait for Redis in the "longer than the wait" case: short, so the test is.
SHORT_WAIT_SECONDS = 0.5


async def _turn_outcomes(redis_url: str) -> list[str]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        entries = await stream_entries(client, f"{PREFIX}:audit")
    finally:
        await client.aclose()
    return [entry["outcome"] for entry in entries if entry.get("type") == "turn"]


async def _until(check: Callable[[], Awaitable[bool]], what: str, within: float = 20.0) -> None:
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < within, f"not within {within} s: {what}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("restart", ["from its files", "empty", "from its files after the wait"])
async def test_a_turn_cut_off_by_a_redis_crash_tells_one_true_story(
    restart: str,
    own_redis_server: RedisServer,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = asyncio.Event()
    requests = 0

    async def answer(_body: object) -> Reply:
        nonlocal requests
        requests += 1
        if requests == 1:
            # The first run waits while the test kills Redis under it.
            await gate.wait()
        return text_answer(ANSWER)

    openai_server.responder = answer
    redis_url = own_redis_server.url
    longer = restart == "from its files after the wait"
    # Past the wait, the job runs again once its lease (the shortest allowed) expired.
    patience = (
        {"REDIS_OUTAGE_WAIT_SECONDS": SHORT_WAIT_SECONDS, "SESSION_LEASE_SECONDS": 3}
        if longer
        else {}
    )
    bot = PollingBot(
        stack_settings(
            telegram,
            openai_server,
            redis_url,
            prefix=PREFIX,
            STREAMING="off",
            CSAT="off",
            **patience,
        ),
        telegram,
    )
    with caplog.at_level(logging.INFO):
        await bot.start()
        try:
            await telegram.push_message(CHAT, "Где мой заказ?")
            await telegram.wait_for(lambda: len(openai_server.requests) == 1)
            if restart != "empty":
                # The job is queued and leased: the restarted server comes back with both.
                client = aioredis.Redis.from_url(redis_url)
                await client.save()
                await client.aclose()
            else:
                # Nothing was ever saved: the server comes back with nothing.
                assert "dump.rdb" not in await asyncio.to_thread(
                    os.listdir, own_redis_server.directory
                )
            own_redis_server.stop()
            gate.set()

            # The turn failed to save its outcome, and then to store its failure in the
            # outbox: the worker either waits for Redis (to look the job up) or, as it
            # did before, told the customer at once.
            async def outcome_not_stored() -> bool:
                return any(
                    message.startswith("Looking up a job whose outcome was not stored")
                    or "gone from Redis" in message
                    for message in (record.getMessage() for record in caplog.records)
                )

            async def wait_over() -> bool:
                # The worker decided: it tells nobody (still away), or told the customer.
                return any(
                    "Redis still away" in message or "gone from Redis" in message
                    for message in (record.getMessage() for record in caplog.records)
                )

            await _until(outcome_not_stored, "the turn's outcome could not be stored")
            if longer:
                # Redis stays away past the worker's wait: it gives up waiting, telling nobody.
                await _until(wait_over, "the worker's wait for Redis is over")
                assert telegram.sent_texts(CHAT) == []
            own_redis_server.start()

            [text] = await telegram.wait_for_texts(CHAT, 1, within=20)

            async def audited() -> bool:
                return bool(await _turn_outcomes(redis_url))

            await _until(audited, "the turn's audit entry")
            if restart != "empty":
                # The turn ran twice, but the customer and the audit know one answer.
                assert text == ANSWER
                assert requests == 2
                assert await _turn_outcomes(redis_url) == ["answered"]
            else:
                # The job is gone and nobody will answer it: now the failure is the truth.
                assert text.startswith(STORAGE_FAILURE), text
                assert requests == 1
                assert await _turn_outcomes(redis_url) == ["storage_unavailable"]
        finally:
            assert await bot.stop() == 0
    # Nothing else reached the customer (checked once the bot has stopped).
    assert telegram.sent_texts(CHAT) == [text]
