"""A batch from ``getUpdates`` is queued chat by chat side by side, each chat in its order.

The real :class:`Poller` reads the fake Bot API and queues through the production
intake into a real redis-server. In the first test the intake is the production
one holding back the first update of nine chats until a tenth chat's update is
queued: a poller that queued a batch one update after another, or a few chats at
a time (it was eight), would never get to that tenth chat (the test's bound fails
it). In the second, Redis is down while a batch of several chats comes, then back.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TypeVar

import pytest
import redis.asyncio as aioredis
from aiogram import Bot
from aiogram.types import Update

from bot.queue.admission import FloodLimits, Intake, IntakeVerdict
from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import WorkStream
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.telegram.callbacks import PressAnswers
from bot.telegram.polling import Poller
from bot.telegram.sending import ReplySender
from bot.telegram.update_intake import TelegramIntake
from bot.testing.redis_server import RedisServer
from bot.testing.telegram_server import FakeTelegramServer

PREFIX = "pbatch"
IntakeT = TypeVar("IntakeT", bound=TelegramIntake)
# More slow chats than the eight a batch was once queued at a time.
SLOW_CHATS, OTHER_CHAT = tuple(range(7001, 7010)), 7050


def _intake(kind: type[IntakeT], bot: Bot, redis: aioredis.Redis) -> IntakeT:
    """The production intake (or a subclass of it), flood limits out of the way."""
    keys = RedisKeys(PREFIX)
    work = WorkStream(redis, stream=keys.work_stream, consumer="tester")
    return kind(
        intake=Intake(
            redis,
            keys=keys,
            work=work,
            limits=FloodLimits(burst=1000, interval_seconds=0.01, daily_turns=1_000_000),
        ),
        bot=bot,
        allow_groups=False,
        presses=PressAnswers(bot=bot, sender=ReplySender(max_attempts=1)),
    )


class HoldingIntake(TelegramIntake):
    """The production intake; each slow chat's first update waits until ``OTHER_CHAT`` is queued."""

    other_queued: asyncio.Event
    held: set[int]
    gave_up_waiting: bool

    async def accept(
        self, update: Update, raw: Mapping[str, object] | None = None
    ) -> IntakeVerdict | None:
        """Queue ``update`` as production does, after the hold described above."""
        chat = update.message.chat.id if update.message is not None else None
        if chat in SLOW_CHATS and chat not in self.held:
            self.held.add(chat)
            try:
                async with asyncio.timeout(5):
                    await self.other_queued.wait()
            except TimeoutError:
                # Queued a few at a time: the other chat never came while these waited.
                self.gave_up_waiting = True
        verdict = await super().accept(update, raw)
        if chat == OTHER_CHAT:
            self.other_queued.set()
        return verdict


@pytest.fixture
async def polling(
    bot: Bot, telegram: FakeTelegramServer, redis_client: aioredis.Redis
) -> AsyncIterator[HoldingIntake]:
    """The poller running on the holding intake."""
    intake = _intake(HoldingIntake, bot, redis_client)
    intake.other_queued = asyncio.Event()
    intake.held = set()
    intake.gave_up_waiting = False
    poller = Poller(bot=bot, intake=intake, allowed_updates=[])
    task = asyncio.create_task(poller.run())
    yield intake
    poller.stop()
    async with asyncio.timeout(30):
        await task


async def test_a_batch_is_queued_chat_by_chat_side_by_side_and_in_order_within_a_chat(
    polling: HoldingIntake, telegram: FakeTelegramServer, redis_client: aioredis.Redis
) -> None:
    slow = {
        chat: [telegram.message_update(chat, f"вопрос {n}") for n in range(3)]
        for chat in SLOW_CHATS
    }
    other = telegram.message_update(OTHER_CHAT, "другой вопрос")
    # One getUpdates batch: the slow chats' three updates each first, the other chat's last.
    await telegram.push(*(update for updates in slow.values() for update in updates), other)
    # The batch is confirmed (the next getUpdates asks past it) only once all of it is queued.
    await telegram.wait_for(lambda: telegram.unconfirmed() == 0, within=15)
    assert polling.held == set(SLOW_CHATS)
    assert not polling.gave_up_waiting, "the other chat was queued only after slow ones"

    async def queued(chat: int) -> list[int]:
        key = RedisKeys(PREFIX).conversation(telegram_conversation(chat)).queue
        return [
            QueuedJob.model_validate_json(job).update_id
            for job in await redis_client.lrange(key, 0, -1)
        ]

    for chat, updates in slow.items():
        assert await queued(chat) == [update["update_id"] for update in updates]
    assert await queued(OTHER_CHAT) == [other["update_id"]]


async def test_an_outage_met_by_a_batch_of_chats_is_logged_once_and_its_end_once(
    bot: Bot,
    telegram: FakeTelegramServer,
    own_redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bot.telegram.polling")
    outage_told = asyncio.Event()
    watcher = _Told("Redis unavailable", outage_told)
    logging.getLogger("bot.telegram.polling").addHandler(watcher)
    redis = aioredis.Redis.from_url(
        own_redis_server.url, socket_timeout=1.0, socket_connect_timeout=0.5
    )
    poller = Poller(bot=bot, intake=_intake(TelegramIntake, bot, redis), allowed_updates=[])
    own_redis_server.stop()
    task = asyncio.create_task(poller.run())
    try:
        updates = [telegram.message_update(7100 + n, "вопрос") for n in range(5)]
        await telegram.push(*updates)

        def logged(text: str) -> int:
            return sum(text in record.getMessage() for record in caplog.records)

        async with asyncio.timeout(15):
            await outage_told.wait()
        own_redis_server.start()
        await telegram.wait_for(lambda: telegram.unconfirmed() == 0, within=30)
        for update in updates:
            chat = update["message"]["chat"]["id"]
            key = RedisKeys(PREFIX).conversation(telegram_conversation(chat)).queue
            assert await redis.llen(key) == 1
        # Five chats retried side by side: one outage, told once, and its end once.
        assert logged("Redis unavailable") == 1
        assert logged("queued after") == 1
    finally:
        logging.getLogger("bot.telegram.polling").removeHandler(watcher)
        poller.stop()
        async with asyncio.timeout(30):
            await task
        await redis.aclose()


class _Told(logging.Handler):
    """Sets ``event`` when a record containing ``text`` is logged (in the loop's thread)."""

    def __init__(self, text: str, event: asyncio.Event) -> None:
        super().__init__()
        self._text = text
        self._event = event

    def emit(self, record: logging.LogRecord) -> None:
        """Note the record if it is the one waited for."""
        if self._text in record.getMessage():
            self._event.set()
