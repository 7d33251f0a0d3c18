"""Delivering a reply: split to fit, formatted safely, retried only when that cannot duplicate it.

aiogram raises ``TelegramRetryAfter`` on a 429 and never retries by itself. A
429 (and a 5xx, and a connection that never opened) means Telegram did not
take the message, so sending again cannot duplicate it: those are retried,
after the wait Telegram asks for, within a bounded number of attempts. A
timeout or a dropped connection may mean Telegram *did* take it, so those are
not retried: a lost reply is better than a doubled one the customer has to read
twice. A 400 for a formatted message is re-sent once as plain text.
"""

import asyncio
import contextlib
import logging

from aiogram import Bot
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.types import ReplyKeyboardMarkup, ReplyKeyboardRemove
from aiohttp import ClientConnectorError
from redis.exceptions import RedisError

from bot.ops.log_context import chat_label
from bot.ops.retry import Backoff, RetryCounter, Sleep, retrying
from bot.telegram.blocked_chats import BlockedChats
from bot.telegram.formatting import FormattedText, markdown_to_entities, split_formatted

logger = logging.getLogger(__name__)

ReplyKeyboard = ReplyKeyboardMarkup | ReplyKeyboardRemove
"""A keyboard under the message box sent with a reply, or the order to remove it."""


class ReplyNotDeliveredError(RuntimeError):
    """Telegram did not take a piece of the reply within the allowed attempts."""


class ReplySender:
    """Sends texts to a chat with bounded, duplicate-free retries.

    With ``blocked`` it sends nothing to a chat that blocked the bot, and
    remembers a chat whose send Telegram refused with 403; ``check_blocked=False``
    leaves the check to a caller that read the flag already (a worker reads it
    with the chat's state, in the same round trip).
    """

    def __init__(
        self,
        *,
        max_attempts: int,
        max_retry_after_seconds: float = 60.0,
        backoff_seconds: float = 0.5,
        sleep: Sleep = asyncio.sleep,
        blocked: BlockedChats | None = None,
        check_blocked: bool = True,
        retries: RetryCounter | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._max_attempts = max_attempts
        self._max_retry_after = max_retry_after_seconds
        self._backoff = Backoff(first_seconds=backoff_seconds)
        self._retries = retries
        self._sleep = sleep
        self._blocked = blocked
        self._check_blocked = check_blocked

    async def send_answer(
        self, bot: Bot, chat_id: int, markdown: str, *, keyboard: ReplyKeyboard | None = None
    ) -> int:
        """Send a model answer (Markdown) as formatted pieces; returns how many were sent.

        ``keyboard`` (a reply keyboard, or its removal) goes with the last piece.
        """
        pieces = split_formatted(markdown_to_entities(markdown))
        return await self._send_all(bot, chat_id, pieces, keyboard)

    async def send_plain(
        self, bot: Bot, chat_id: int, text: str, *, keyboard: ReplyKeyboard | None = None
    ) -> int:
        """Send the bot's own text, unformatted; returns how many pieces were sent."""
        return await self._send_all(bot, chat_id, split_formatted(FormattedText(text)), keyboard)

    async def _send_all(
        self,
        bot: Bot,
        chat_id: int,
        pieces: list[FormattedText],
        keyboard: ReplyKeyboard | None = None,
    ) -> int:
        if (
            self._blocked is not None
            and self._check_blocked
            and await self._blocked.is_blocked(chat_id)
        ):
            # Not delivered, and said so: the history and the audit must not call it answered.
            raise ReplyNotDeliveredError("the customer blocked the bot; not sent")
        for number, piece in enumerate(pieces, start=1):
            await self._send_piece(bot, chat_id, piece, keyboard if number == len(pieces) else None)
        return len(pieces)

    async def _send_piece(
        self, bot: Bot, chat_id: int, piece: FormattedText, keyboard: ReplyKeyboard | None
    ) -> None:
        entities = list(piece.entities)

        async def send() -> None:
            try:
                await bot.send_message(
                    chat_id=chat_id,
                    text=piece.text,
                    entities=entities or None,
                    parse_mode=None,
                    reply_markup=keyboard,
                )
            except TelegramForbiddenError as error:
                # Blocked by the user or removed from the group: every later send would fail.
                if self._blocked is not None:
                    with contextlib.suppress(RedisError, OSError):
                        await self._blocked.block(chat_id)
                raise ReplyNotDeliveredError("the chat does not accept our messages") from error

        def decide(error: Exception, attempt: int) -> float:
            """The pause before sending again; raises when another send could double it."""
            nonlocal entities
            if isinstance(error, TelegramRetryAfter):
                if error.retry_after > self._max_retry_after:
                    raise ReplyNotDeliveredError(
                        f"Telegram asked to wait {error.retry_after} s, over the "
                        f"{self._max_retry_after} s allowed"
                    ) from error
                delay = float(error.retry_after)
            elif isinstance(error, TelegramBadRequest):
                if not entities:
                    raise ReplyNotDeliveredError("Telegram refused the message") from error
                logger.warning(
                    "Telegram refused a formatted message to %s (%s); re-sending as plain text",
                    chat_label(chat_id),
                    error.message,
                )
                entities = []
                return 0.0
            elif isinstance(error, TelegramServerError):
                delay = self._backoff.pause(attempt)
            elif isinstance(error, TelegramNetworkError):
                if not isinstance(error.__cause__, ClientConnectorError):
                    # The request may have reached Telegram: do not risk a duplicate.
                    raise ReplyNotDeliveredError("delivery uncertain; not retried") from error
                delay = self._backoff.pause(attempt)
            else:
                raise error
            if attempt >= self._max_attempts:
                raise ReplyNotDeliveredError(f"not delivered after {attempt} attempts") from error
            logger.info(
                "Sending to %s failed (%s); retry %d in %.1f s",
                chat_label(chat_id),
                type(error).__name__,
                attempt,
                delay,
            )
            return delay

        await retrying(
            "telegram_send", send, decide=decide, counter=self._retries, sleep=self._sleep
        )
