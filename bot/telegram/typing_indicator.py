"""The "typing…" indicator while a turn runs, sent only once the turn takes a while."""

import asyncio
import contextlib
import logging
from typing import Self

from aiogram import Bot
from aiogram.enums import ChatAction
from aiogram.exceptions import TelegramAPIError

logger = logging.getLogger(__name__)

ACTION_INTERVAL_SECONDS = 5.0
"""Telegram shows a chat action for up to 5 s (or until the bot's next message)."""


class TypingIndicator:
    """Sends ``typing`` to a chat from ``delay`` seconds on, every 5 s, until the block ends.

    Telegram asks bots to show an action only when the answer takes a noticeable
    time. Until the delay has passed this costs one timer handle; aiogram's
    ``ChatActionSender`` starts a task, a lock, two events and a timed wait for
    every turn, even one answered in 200 ms. A send that fails (the customer
    blocked the bot, Telegram unreachable) ends the indicator quietly: the answer
    matters, the indicator does not.
    """

    def __init__(self, bot: Bot, chat_id: int, *, delay: float) -> None:
        self._bot = bot
        self._chat_id = chat_id
        self._delay = delay
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._timer = asyncio.get_running_loop().call_later(self._delay, self._start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _start(self) -> None:
        self._task = asyncio.create_task(self._keep_typing(), name=f"typing:{self._chat_id}")

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self._bot.send_chat_action(chat_id=self._chat_id, action=ChatAction.TYPING)
            except TelegramAPIError as error:
                logger.info("Typing indicator stopped: %s", type(error).__name__)
                return
            await asyncio.sleep(ACTION_INTERVAL_SECONDS)
