"""Limits at intake that no sender escapes: staff topic floods, a chat's queue cap, updates
without ``from``; and a command addressed to another bot in a staff topic.

The production intake, workers and dispatcher over a real Redis and the fake Bot
API (the handoff desk of :mod:`tests.telegram.test_handoff`).
"""

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot
from aiogram.types import Update

from bot import customer_texts
from bot.customer_texts import HANDOFF_IDLE_NOTE as IDLE_NOTE
from bot.queue.admission import IntakeVerdict
from bot.storage.keys import telegram_conversation
from bot.telegram.callbacks import PressAnswers
from bot.telegram.sending import ReplySender
from bot.telegram.update_intake import TelegramIntake
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer
from tests.telegram.test_handoff import CUSTOMER, STAFF, Desk, _desk

pytestmark = pytest.mark.timeout(90)

INTRUDER = 666


@pytest.fixture
async def desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    async for built in _desk(redis_server, telegram, bot):
        yield built


async def _accept(desk: Desk, intake: TelegramIntake, update: dict[str, Any]) -> Any:
    return await intake.accept(Update.model_validate(update, context={"bot": desk.bot}))


def _member_checks(telegram: FakeTelegramServer, user_id: int) -> int:
    return sum(c.params.get("user_id") == user_id for c in telegram.calls_of("getChatMember"))


async def test_a_non_member_flooding_a_customers_topic_queues_little_and_is_checked_once(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()
    telegram.non_members.add(INTRUDER)
    started = time.monotonic()

    verdicts = [
        await _accept(
            desk,
            desk.intake,
            telegram.topic_message_update(STAFF, thread, f"спам {n}", user_id=INTRUDER),
        )
        for n in range(1000)
    ]

    elapsed = time.monotonic() - started
    queued = verdicts.count(IntakeVerdict.QUEUED)
    # STAFF_FLOOD_BURST (20), then one a second (STAFF_FLOOD_INTERVAL_SECONDS).
    assert 20 <= queued <= 20 + elapsed + 1, (queued, elapsed)
    # The customer still gets an answer soon, and nothing of the spam.
    await desk.customer("Есть кто-нибудь?")
    await telegram.wait_for(
        lambda: "Ответ: Есть кто-нибудь?" in telegram.sent_texts(CUSTOMER), within=20
    )
    assert telegram.copies(CUSTOMER) == []
    # Membership is checked once for the burst, not once per message.
    assert _member_checks(telegram, INTRUDER) == 1


async def test_a_staff_member_within_the_limit_is_relayed_every_time(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()
    sent = [await desk.staff(thread, f"Ответ сотрудника {n}") for n in range(10)]
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == len(sent))
    assert [c["message_id"] for c in telegram.copies(CUSTOMER)] == sent
    assert _member_checks(telegram, 555) == 1


@pytest.fixture
async def capped_desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    """A queue of at most 5 jobs, and no flood control in the way."""
    async for built in _desk(redis_server, telegram, bot, CHAT_QUEUE_MAX=5, FLOOD_BURST=1000):
        yield built


async def test_a_full_queue_takes_nothing_more_and_the_customer_is_told_once_per_fill(
    capped_desk: Desk, telegram: FakeTelegramServer
) -> None:
    desk = capped_desk
    telegram.hold_sends(CUSTOMER)
    # The first message is in a worker's hands (its answer held); five more fill the queue.
    verdicts = [
        await _accept(desk, desk.intake, telegram.message_update(CUSTOMER, f"вопрос {n}"))
        for n in range(12)
    ]

    assert IntakeVerdict.QUEUE_FULL_WARN in verdicts
    full = verdicts.index(IntakeVerdict.QUEUE_FULL_WARN)
    assert 5 <= full <= 6  # 5 queued, and the one the worker took if it was popped already
    assert set(verdicts[:full]) == {IntakeVerdict.QUEUED}
    assert set(verdicts[full + 1 :]) == {IntakeVerdict.QUEUE_FULL_QUIET}

    await telegram.release_sends(CUSTOMER)
    await telegram.wait_for(
        lambda: f"Ответ: вопрос {full - 1}" in telegram.sent_texts(CUSTOMER), within=20
    )
    await telegram.wait_for(lambda: customer_texts.QUEUE_FULL in telegram.sent_texts(CUSTOMER))
    assert telegram.sent_texts(CUSTOMER).count(customer_texts.QUEUE_FULL) == 1
    # Room again: the next message is queued, and a new fill is told again.
    assert (
        await _accept(desk, desk.intake, telegram.message_update(CUSTOMER, "ещё вопрос"))
        is IntakeVerdict.QUEUED
    )
    key = desk.app.keys.conversation(telegram_conversation(CUSTOMER)).queue_full
    assert not await desk.app.redis.exists(key)


async def test_a_block_is_queued_even_in_a_full_queue(
    capped_desk: Desk, telegram: FakeTelegramServer
) -> None:
    desk = capped_desk
    telegram.hold_sends(CUSTOMER)
    for n in range(8):
        await _accept(desk, desk.intake, telegram.message_update(CUSTOMER, f"вопрос {n}"))

    blocked = telegram.member_update(CUSTOMER, old="member", new="kicked")

    assert await _accept(desk, desk.intake, blocked) is IntakeVerdict.QUEUED
    await telegram.release_sends(CUSTOMER)


async def test_group_messages_without_a_sender_are_flood_limited_by_chat(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    intake = TelegramIntake(
        intake=desk.app.intake,
        bot=desk.bot,
        allow_groups=True,
        presses=PressAnswers(bot=desk.bot, sender=ReplySender(max_attempts=1)),
    )
    group = -100_555
    updates = []
    for _ in range(8):
        update = telegram.message_update(group, "/help", chat_type="supergroup")
        del update["message"]["from"]
        updates.append(update)

    verdicts = [await _accept(desk, intake, update) for update in updates]

    # FLOOD_BURST (5), then told once, then quiet: as for a user.
    assert verdicts[:5] == [IntakeVerdict.QUEUED] * 5
    assert verdicts[5:] == [
        IntakeVerdict.RATE_WARN,
        IntakeVerdict.RATE_QUIET,
        IntakeVerdict.RATE_QUIET,
    ]


async def test_a_close_command_addressed_to_another_bot_does_not_close_the_handoff(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()

    await desk.staff(thread, "/close@some_other_bot")
    # A barrier: the message after it is relayed, so the command was handled before it.
    relayed = await desk.staff(thread, "Здравствуйте, я на связи")
    await telegram.wait_for(lambda: len(telegram.copies(CUSTOMER)) == 1)

    assert [c["message_id"] for c in telegram.copies(CUSTOMER)] == [relayed]
    assert IDLE_NOTE not in telegram.sent_texts(CUSTOMER)
    session = await desk.app.sessions.load(telegram_conversation(CUSTOMER))
    assert session is not None
    assert session.handoff == "human", "the handoff is still open"
    # Our own /close@<bot> still closes it.
    await desk.staff(thread, f"/close@{telegram.bot_username}")
    await telegram.wait_for(lambda: IDLE_NOTE in telegram.sent_texts(CUSTOMER))
    session = await desk.app.sessions.load(telegram_conversation(CUSTOMER))
    assert session is not None
    assert session.handoff == "bot", "the bot answers again"
    await asyncio.sleep(0)
