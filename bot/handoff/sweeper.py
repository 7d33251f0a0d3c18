"""Ends handoffs nobody wrote in for ``HANDOFF_IDLE_MINUTES``, without waiting for a message.

Every process with workers runs one. It does not touch a conversation
itself: it queues an idle check in the customer's chat queue (through intake,
de-duplicated by the activity it saw, so several sweepers queue it once), and
the worker holding the chat decides with the session in hand.
"""

import asyncio
import contextlib
import logging
import time

from redis.exceptions import RedisError

from bot.handoff.topics import TopicDirectory
from bot.queue.intake import IncomingUpdate, Intake
from bot.queue.jobs import Notice
from bot.redis_keys import telegram_chat_id

logger = logging.getLogger(__name__)


class HandoffSweeper:
    """Queues idle checks for handoffs quiet longer than ``idle_seconds``."""

    def __init__(
        self,
        *,
        topics: TopicDirectory,
        intake: Intake,
        idle_seconds: float,
        period_seconds: float | None = None,
    ) -> None:
        self._topics = topics
        self._intake = intake
        self._idle_ms = int(idle_seconds * 1000)
        self._period = period_seconds or min(60.0, max(idle_seconds / 4, 0.05))
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Stop after the current sweep."""
        self._stopping.set()

    async def run(self) -> None:
        """Sweep every period until :meth:`stop`."""
        while not self._stopping.is_set():
            try:
                await self.sweep()
            except (RedisError, OSError) as error:
                logger.warning("Handoff idle sweep failed (%s)", type(error).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._period):
                    await self._stopping.wait()

    async def sweep(self) -> int:
        """Queue one idle check per quiet handoff; returns how many were found."""
        due = await self._topics.idle(int(time.time() * 1000) - self._idle_ms)
        for conversation_key, last_activity_ms in due:
            chat_id = telegram_chat_id(conversation_key)
            if chat_id is None:
                await self._topics.ended(conversation_key)
                continue
            await self._intake.accept(
                IncomingUpdate(
                    # Negative: never a Telegram update id; one per activity seen.
                    update_id=-last_activity_ms,
                    chat_id=chat_id,
                    conversation_key=conversation_key,
                    user_id=None,
                    counts_turn=False,
                    payload={},
                    notice=Notice.HANDOFF_IDLE,
                )
            )
        return len(due)
