"""One deadline per turn (TURN_DEADLINE_SECONDS), whatever the stream does.

The whole bot over real sockets: the runner polls the fake Bot API, the real
``AsyncOpenAI`` client streams from the scripted server, Redis is the suite's
redis-server. ``LLM_TIMEOUT_SECONDS`` bounds only the gap between two reads: a
stream that drips a piece now and then, or sends only SSE keep-alive comments,
never trips it. The turn's deadline does, and the customer and the audit say so.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from bot.testing.audit_entries import stream_entries
from bot.testing.openai_server import (
    Reply,
    ScriptedOpenAIServer,
    keep_alive_only,
    text_answer,
    trickle,
)
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import stack_settings
from bot.testing.telegram_server import FakeTelegramServer
from tests.queue.echo_pool import wait_until

pytestmark = pytest.mark.timeout(60)

PREFIX = "deadline"
CHAT = 7301
DEADLINE = 1.5
# Each gap (0.3 s, 0.1 s) is well inside the per-read timeout (LLM_TIMEOUT_SECONDS=5 in
# stack_settings), so only the deadline can end the turn.
APOLOGY = "Ответ готовился слишком долго"
NEXT_ANSWER = "Заказ 8041 приедет завтра."


@pytest.fixture
async def start_bot(
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_server: RedisServer,
) -> AsyncIterator[Callable[..., object]]:
    """Starts the bot with a short turn deadline; stops it after."""
    bots: list[PollingBot] = []

    async def start() -> PollingBot:
        settings = stack_settings(
            telegram,
            openai_server,
            redis_server.url,
            prefix=PREFIX,
            TURN_DEADLINE_SECONDS=DEADLINE,
        )
        bot = PollingBot(settings, telegram)
        await bot.start()
        bots.append(bot)
        return bot

    yield start
    for bot in bots:
        assert await bot.stop() == 0


async def turn_outcomes(redis: aioredis.Redis) -> list[str]:
    entries = await stream_entries(redis, f"{PREFIX}:audit")
    return [entry["outcome"] for entry in entries if entry.get("type") == "turn"]


async def wait_outcomes(redis: aioredis.Redis, count: int) -> list[str]:
    started = time.monotonic()
    while len(outcomes := await turn_outcomes(redis)) < count:
        assert time.monotonic() - started < 10, outcomes
        await asyncio.sleep(0.05)
    return outcomes


@pytest.mark.parametrize(
    "endless",
    [
        # 120 characters one at a time, 0.3 s apart: 36 s of answer without a deadline.
        trickle(text_answer("Ж" * 120), chunk_chars=1, interval_seconds=0.3),
        # Comments only, 0.1 s apart, until someone gives up.
        keep_alive_only(text_answer("никогда"), interval_seconds=0.1),
    ],
    ids=["drip", "keep-alive"],
)
async def test_a_stream_that_never_ends_is_cut_at_the_turn_deadline_and_said_so(
    endless: Reply,
    start_bot,
    telegram: FakeTelegramServer,
    openai_server: ScriptedOpenAIServer,
    redis_client: aioredis.Redis,
) -> None:
    openai_server.script(endless, trickle(text_answer(NEXT_ANSWER)))
    await start_bot()

    sent = time.monotonic()
    await telegram.push_message(CHAT, "Где мой заказ?")
    # The stream alone would take 36 s (drip) or forever (keep-alive): an answer while
    # it still runs is one the deadline cut.
    [apology] = await telegram.wait_for_texts(CHAT, 1, within=30)
    took = time.monotonic() - sent

    # The customer hears, kindly, that the answer was cut.
    assert apology.startswith(APOLOGY), apology
    assert "Код обращения" in apology
    assert "Ж" not in apology
    # Not before the deadline (a bound no load can break; how soon after is bench/'s).
    assert took >= DEADLINE, took
    # The audit tells the same story: one turn, ended by its deadline (not by the per-read
    # timeout, whose outcome is another).
    assert await wait_outcomes(redis_client, 1) == ["deadline"]
    # The stream was cut, not waited out: the model server was still sending it.
    await wait_until(lambda: openai_server.streams_cut == 1, 10, "the stream cut")

    # The chat is not stuck behind it: the next message is answered.
    await telegram.push_message(CHAT, "А сейчас?")
    texts = await telegram.wait_for_texts(CHAT, 2, within=10)
    assert texts[1] == NEXT_ANSWER
    assert await wait_outcomes(redis_client, 2) == ["deadline", "answered"]
    assert openai_server.unscripted == []
