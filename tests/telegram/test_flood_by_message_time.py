"""The flood limit is charged at the time the customer wrote, and presses are not charged.

A backlog (after a Redis outage, a polling pause, webhook redeliveries) reaches
intake in one batch: charged at intake's clock it looked like a burst and most
of it was refused. Each message is charged at its own Telegram ``date`` instead,
clamped to ``[now - FLOOD_BACKLOG_SECONDS, now]`` so an odd or forged date buys
nothing. Real intake, workers and dispatcher over a real Redis and the fake Bot
API (long polling where the claim is about a batch).
"""

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.csat.callback import FeedbackPress
from bot.queue.admission import IntakeVerdict
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.telegram.test_handlers import Stack, _stack
from turn import new_turn_id

pytestmark = pytest.mark.timeout(60)

CHATS = (801, 802, 803)
PER_CHAT = 12
PACE_SECONDS = 6  # half the allowed rate: one message per 3 s


@pytest.fixture
async def limited(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Stack]:
    """The default limits: a burst of 5, then one message per 3 s."""
    redis = {"REDIS_URL": redis_server.url}
    async for stack in _stack(redis, telegram, bot, FLOOD_BURST=5, FLOOD_INTERVAL_SECONDS=3):
        yield stack


def written_at(telegram: FakeTelegramServer, chat: int, text: str, at: float) -> dict[str, Any]:
    """A message update the customer wrote at ``at`` (Unix seconds: Telegram's ``date``)."""
    return telegram.message_update(chat, text, extra={"date": int(at)})


async def test_a_backlog_written_at_an_allowed_pace_is_answered_in_full(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    # Written one every 6 s during a 72 s pause, all taken in by one getUpdates batch.
    now = time.time()
    backlog = [
        written_at(telegram, chat, f"вопрос {n}", now - PACE_SECONDS * (PER_CHAT - n))
        for n in range(PER_CHAT)
        for chat in CHATS
    ]
    await telegram.push(*backlog)
    redis = {"REDIS_URL": redis_server.url}
    async for stack in _stack(redis, telegram, bot, FLOOD_BURST=5, FLOOD_INTERVAL_SECONDS=3):
        async with stack.running(work=False, poll=True):
            for chat in CHATS:
                answers = await telegram.wait_for_texts(chat, PER_CHAT, within=30)
                assert answers == [f"Ответ: вопрос {n}" for n in range(PER_CHAT)]
        for chat in CHATS:
            await stack.settle(chat)
            assert customer_texts.RATE_LIMITED not in telegram.sent_texts(chat)


@pytest.mark.parametrize(
    "dates",
    [
        # From the future: counted as now, so eight at once are a burst.
        lambda now, n: now + 3600 + PACE_SECONDS * n,
        # Older than the backlog window (24 h): counted as its edge, so a burst too.
        lambda now, n: now - 3 * 86400 + 3600 * n,
    ],
    ids=["future", "too_old"],
)
async def test_an_odd_date_buys_no_messages(
    limited: Stack, telegram: FakeTelegramServer, dates: Any
) -> None:
    chat = 810
    now = time.time()
    verdicts = [
        await limited.feed(written_at(telegram, chat, f"спам {n}", dates(now, n))) for n in range(8)
    ]
    assert verdicts == [IntakeVerdict.QUEUED] * 5 + [
        IntakeVerdict.RATE_WARN,
        IntakeVerdict.RATE_QUIET,
        IntakeVerdict.RATE_QUIET,
    ]
    texts = await telegram.wait_for_texts(chat, 6)
    assert texts[-1] == customer_texts.RATE_LIMITED


async def test_a_burst_written_at_once_is_still_limited(
    limited: Stack, telegram: FakeTelegramServer
) -> None:
    chat = 811
    now = time.time()
    # Six messages within one second, arriving late (a backlog): the sixth is over the limit.
    verdicts = [
        await limited.feed(written_at(telegram, chat, f"вопрос {n}", now - 60)) for n in range(6)
    ]
    assert verdicts[:5] == [IntakeVerdict.QUEUED] * 5
    assert verdicts[5] is IntakeVerdict.RATE_WARN


async def test_button_presses_do_not_spend_the_message_budget(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    chat = 812
    redis = {"REDIS_URL": redis_server.url}
    async for stack in _stack(redis, telegram, bot, FLOOD_BURST=2, FLOOD_INTERVAL_SECONDS=600):
        # Six quick presses on a satisfaction question (unknown here: they change nothing).
        question = new_turn_id()
        presses = [
            await stack.feed(
                telegram.callback_update(
                    chat, 1, FeedbackPress(question_id=question, score=score % 5 + 1).pack()
                )
            )
            for score in range(6)
        ]
        assert presses == [IntakeVerdict.QUEUED] * 6
        # The two messages of the burst are still the customer's.
        for text in ("первый", "второй"):
            assert await stack.feed(telegram.message_update(chat, text)) is IntakeVerdict.QUEUED
        assert await telegram.wait_for_texts(chat, 2) == ["Ответ: первый", "Ответ: второй"]
        assert customer_texts.RATE_LIMITED not in telegram.sent_texts(chat)
