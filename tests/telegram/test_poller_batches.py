"""A batch from ``getUpdates`` is queued chat by chat side by side, each chat in its order.

The real :class:`Poller` reads the fake Bot API and queues through the production
intake into a real redis-server. The intake used here is the production one
holding back the first update of one chat until another chat's update is
queued: a poller that queued a batch one update after another would never get
to that other chat (the test's bound fails it).
"""

import asyncio
from collections.abc import AsyncIterator, Mapping

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
from bot.testing.telegram_server import FakeTelegramServer

PREFIX = "pbatch"
SLOW_CHAT, OTHER_CHAT = 7001, 7002


class HoldingIntake(TelegramIntake):
    """The production intake; ``SLOW_CHAT``'s first update waits until ``OTHER_CHAT`` is queued."""

    other_queued: asyncio.Event
    held_once: bool
    gave_up_waiting: bool

    async def accept(
        self, update: Update, raw: Mapping[str, object] | None = None
    ) -> IntakeVerdict | None:
        """Queue ``update`` as production does, after the hold described above."""
        chat = update.message.chat.id if update.message is not None else None
        if chat == SLOW_CHAT and not self.held_once:
            self.held_once = True
            try:
                async with asyncio.timeout(5):
                    await self.other_queued.wait()
            except TimeoutError:
                # Sequential queueing: the other chat never came while this one waited.
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
    keys = RedisKeys(PREFIX)
    work = WorkStream(redis_client, stream=keys.work_stream, consumer="tester")
    intake = HoldingIntake(
        intake=Intake(
            redis_client,
            keys=keys,
            work=work,
            limits=FloodLimits(burst=1000, interval_seconds=0.01, daily_turns=1_000_000),
        ),
        bot=bot,
        allow_groups=False,
        presses=PressAnswers(bot=bot, sender=ReplySender(max_attempts=1)),
    )
    intake.other_queued = asyncio.Event()
    intake.held_once = False
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
    slow = [telegram.message_update(SLOW_CHAT, f"вопрос {n}") for n in range(3)]
    other = telegram.message_update(OTHER_CHAT, "другой вопрос")
    # One getUpdates batch: the slow chat's three updates first, the other chat's last.
    await telegram.push(*slow, other)
    # The batch is confirmed (the next getUpdates asks past it) only once all of it is queued.
    await telegram.wait_for(lambda: telegram.unconfirmed() == 0, within=15)
    assert polling.held_once
    assert not polling.gave_up_waiting, "the other chat was queued only after the slow one"

    async def queued(chat: int) -> list[int]:
        key = RedisKeys(PREFIX).conversation(telegram_conversation(chat)).queue
        return [
            QueuedJob.model_validate_json(job).update_id
            for job in await redis_client.lrange(key, 0, -1)
        ]

    assert await queued(SLOW_CHAT) == [update["update_id"] for update in slow]
    assert await queued(OTHER_CHAT) == [other["update_id"]]
