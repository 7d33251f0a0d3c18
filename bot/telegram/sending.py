"""Delivering to a chat: split to fit, formatted safely, retried only when that cannot duplicate it.

Every Bot API send and edit goes through :class:`ReplySender`: replies,
confirmation cards and their edits, the satisfaction question, the staff desk's
posts and topics, and the answers to button presses (:meth:`ReplySender.call`).

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiogram import Bot
from aiogram.exceptions import (
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.types import InlineKeyboardMarkup, ReplyKeyboardMarkup, ReplyKeyboardRemove
from aiohttp import ClientConnectorError
from redis.exceptions import RedisError

from bot.ops.log_context import chat_label
from bot.ops.retry import Backoff, RetryCounter, Sleep, retrying
from bot.storage.blocked_chats import BlockedChats
from bot.telegram.formatting import FormattedText, markdown_to_entities, split_formatted

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

ReplyKeyboard = ReplyKeyboardMarkup | ReplyKeyboardRemove
"""A keyboard under the message box sent with a reply, or the order to remove it."""


class ReplyNotDeliveredError(RuntimeError):
    """Telegram did not take a piece of the reply within the allowed attempts."""


@dataclass(frozen=True, kw_only=True)
class _NoRetry:
    """The retry rule's "do not send again": why (``None``: not a transient failure)."""

    reason: str | None


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

    async def send_with_buttons(
        self, bot: Bot, chat_id: int, text: str, buttons: InlineKeyboardMarkup
    ) -> int:
        """Send the bot's own ``text`` with inline ``buttons`` (a card, a question): its id.

        Raises :class:`ReplyNotDeliveredError` when Telegram did not take it.
        """
        message = await self._retrying(
            chat_id,
            lambda: bot.send_message(chat_id, text, reply_markup=buttons),
            refused="Telegram refused the message",
        )
        if message is None:  # only an edit can be "done already"
            raise ReplyNotDeliveredError("Telegram returned no message")
        return message.message_id

    async def edit_text(self, bot: Bot, chat_id: int, message_id: int, text: str) -> bool:
        """Rewrite a message the bot sent (its inline keyboard removed); ``False``: not done.

        An edit is safe to repeat, so a 429 or a 5xx is waited and retried like a
        send; an edit Telegram finds done already ("not modified") counts as done.
        """
        try:
            # Without reply_markup the edit removes the inline keyboard.
            await self._retrying(
                chat_id,
                lambda: bot.edit_message_text(text=text, chat_id=chat_id, message_id=message_id),
                refused="Telegram refused the edit",
                done_already=lambda error: "not modified" in str(error),
                repeatable=True,
            )
        except ReplyNotDeliveredError as error:
            logger.warning("Message %s not edited: %s", message_id, error)
            return False
        except TelegramAPIError as error:
            logger.warning("Message %s not edited: %s", message_id, type(error).__name__)
            return False
        return True

    async def call(
        self, chat_id: int, call: Callable[[], Awaitable[_T]], *, repeatable: bool = False
    ) -> _T:
        """Any other Bot API call (``lambda: bot.create_forum_topic(...)``), with the same retries.

        A 429 (within the allowed wait), a 5xx and a connection that never opened
        are retried up to the attempt bound; a timeout or a dropped connection only
        when ``repeatable`` (the call changes nothing if it reached Telegram).
        Every other error, and the last one once the bound is reached, is raised as
        Telegram's own (:class:`aiogram.exceptions.TelegramAPIError`), so a caller
        keeps telling a refusal's kinds apart (a deleted topic, a blocked chat);
        nothing is marked blocked here.
        """

        def decide(error: Exception, attempt: int) -> float:
            pause = self._retry_pause(chat_id, error, attempt, repeatable=repeatable)
            if isinstance(pause, _NoRetry):
                raise error
            return pause

        return await retrying(
            "telegram_send", call, decide=decide, counter=self._retries, sleep=self._sleep
        )

    async def _send_piece(
        self, bot: Bot, chat_id: int, piece: FormattedText, keyboard: ReplyKeyboard | None
    ) -> None:
        entities = list(piece.entities)

        def plain_instead(error: TelegramBadRequest) -> bool:
            nonlocal entities
            if not entities:
                return False
            logger.warning(
                "Telegram refused a formatted message to %s (%s); re-sending as plain text",
                chat_label(chat_id),
                error.message,
            )
            entities = []
            return True

        await self._retrying(
            chat_id,
            lambda: bot.send_message(
                chat_id=chat_id,
                text=piece.text,
                entities=entities or None,
                parse_mode=None,
                reply_markup=keyboard,
            ),
            refused="Telegram refused the message",
            bad_request=plain_instead,
        )

    async def _retrying(
        self,
        chat_id: int,
        call: Callable[[], Awaitable[_T]],
        *,
        refused: str,
        bad_request: Callable[[TelegramBadRequest], bool] | None = None,
        done_already: Callable[[TelegramBadRequest], bool] | None = None,
        repeatable: bool = False,
    ) -> _T | None:
        """``call()`` with the bounded, duplicate-free retries; ``None`` when done already.

        ``bad_request`` may change what the next attempt sends and answer ``True``
        to try again at once; ``done_already`` recognises a 400 that means the
        work was done before (an edit repeated after a crash). ``repeatable``: the
        call changes nothing when it reached Telegram already (an edit), so a
        timeout or a dropped connection is retried too.
        """

        async def attempt() -> _T | None:
            try:
                return await call()
            except TelegramForbiddenError as error:
                # Blocked by the user or removed from the group: every later send would fail.
                if self._blocked is not None:
                    with contextlib.suppress(RedisError, OSError):
                        await self._blocked.block(chat_id)
                raise ReplyNotDeliveredError("the chat does not accept our messages") from error
            except TelegramBadRequest as error:
                if done_already is not None and done_already(error):
                    return None
                raise

        def decide(error: Exception, attempt: int) -> float:
            """The pause before sending again; raises when another send could double it."""
            if isinstance(error, TelegramBadRequest):
                if bad_request is None or not bad_request(error):
                    raise ReplyNotDeliveredError(refused) from error
                return 0.0
            pause = self._retry_pause(chat_id, error, attempt, repeatable=repeatable)
            if isinstance(pause, _NoRetry):
                if pause.reason is None:
                    raise error
                raise ReplyNotDeliveredError(pause.reason) from error
            return pause

        return await retrying(
            "telegram_send", attempt, decide=decide, counter=self._retries, sleep=self._sleep
        )

    def _retry_pause(
        self, chat_id: int, error: Exception, attempt: int, *, repeatable: bool
    ) -> float | _NoRetry:
        """The one retry rule: the pause before another attempt, or why there is none.

        A 429 within the allowed wait, a 5xx and a connection that never opened
        mean Telegram did not take the call, so it is sent again; a timeout or a
        dropped connection may mean it did, so only a ``repeatable`` call (one that
        changes nothing the second time, such as an edit) is. Any other error is
        not a transient one (``_NoRetry`` without a reason: the caller's to raise).
        """
        if isinstance(error, TelegramRetryAfter):
            if error.retry_after > self._max_retry_after:
                return _NoRetry(
                    reason=f"Telegram asked to wait {error.retry_after} s, over the "
                    f"{self._max_retry_after} s allowed"
                )
            pause = float(error.retry_after)
        elif isinstance(error, TelegramServerError):
            pause = self._backoff.pause(attempt)
        elif isinstance(error, TelegramNetworkError):
            if not repeatable and not isinstance(error.__cause__, ClientConnectorError):
                # The request may have reached Telegram: do not risk a duplicate.
                return _NoRetry(reason="delivery uncertain; not retried")
            pause = self._backoff.pause(attempt)
        else:
            return _NoRetry(reason=None)
        if attempt >= self._max_attempts:
            return _NoRetry(reason=f"not delivered after {attempt} attempts")
        logger.info(
            "Sending to %s failed (%s); retry %d in %.1f s",
            chat_label(chat_id),
            type(error).__name__,
            attempt,
            pause,
        )
        return pause
