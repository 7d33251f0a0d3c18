"""Confirmation cards in Telegram: sent with two inline buttons, edited once settled.

Both go through the worker's retrying sender (:class:`~bot.telegram.sending.ReplySender`).
A card that could not be delivered withdraws its pending action
(:class:`CardWithdrawal`): nobody is told to press a button that is not there.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from redis.exceptions import RedisError

from bot.actions.buttons import card_buttons
from bot.customer_texts import gettext_of
from bot.language.texts import Texts
from bot.queue.jobs import CardEdit
from bot.sessions.pending import ActionCard, PendingAction
from bot.sessions.store import SessionStore, SessionStoreError
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.telegram.sending import ReplyNotDeliveredError, ReplySender

logger = logging.getLogger(__name__)


def keyboard(card: ActionCard, texts: Texts | None = None) -> InlineKeyboardMarkup:
    """One row: «Подтвердить» first, «Не нужно» second (in ``texts``' language)."""
    buttons = card_buttons(card, gettext_of(texts))
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [InlineKeyboardButton(text=label, callback_data=data) for label, data in buttons]
        ]
    )


async def send_card(
    replies: ReplySender, bot: Bot, chat_id: int, card: ActionCard, texts: Texts | None = None
) -> int | None:
    """Send the card (retried as any reply); its message id, or ``None`` when not delivered."""
    try:
        return await replies.send_with_buttons(bot, chat_id, card.text, keyboard(card, texts))
    except (ReplyNotDeliveredError, TelegramAPIError) as error:
        logger.warning("Card of action %s not sent: %s", card.action_id, type(error).__name__)
        return None


async def edit_card(replies: ReplySender, bot: Bot, chat_id: int, edit: CardEdit) -> bool:
    """Rewrite a settled card: its new text, no keyboard (edited before: fine too)."""
    return await replies.edit_text(bot, chat_id, edit.message_id, edit.text)


@dataclass(frozen=True, kw_only=True)
class CardWithdrawal:
    """Withdraws the pending action whose card never reached the customer.

    Under the worker's lease: the action leaves the session with the text the
    customer is told (the model's next turn reads it as the application's
    outcome), so no later turn says a card waits.
    """

    sessions: SessionStore
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    async def withdraw(
        self, conversation_key: str, token: str, action_id: str, turn_id: str, told: str
    ) -> PendingAction | None:
        """The withdrawn action; ``None`` when it no longer waits (settled, superseded)."""
        try:
            locked = await self.sessions.reload(conversation_key, token)
            session = locked.session
            pending = session.pending_action if session is not None else None
            if session is None or pending is None or pending.action_id != action_id:
                return None
            await self.sessions.commit(
                locked,
                session.with_action_outcome(action_id, told, self.clock(), turn_id),
                release=False,
            )
        except SessionStoreError as error:
            # The action stays pending: a press on no card cannot come, and it expires.
            logger.warning("Action %s not withdrawn: %s", action_id, type(error).__name__)
            return None
        return pending


class CardIndex:
    """Which message shows which action's card, per chat: to edit a superseded card later."""

    def __init__(self, redis: AsyncRedisClient, keys: RedisKeys, ttl_seconds: int) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = ttl_seconds

    async def remember(self, conversation_key: str, action_id: str, message_id: int) -> None:
        """Note the card's message (setting it again is harmless); never raises."""
        key = self._keys.conversation(conversation_key).cards
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(key, action_id, str(message_id))
                pipe.expire(key, self._ttl)
                await pipe.execute()
        except RedisError:
            logger.warning("Card of action %s not indexed: Redis unavailable", action_id)

    async def find(self, conversation_key: str, action_id: str) -> int | None:
        """The message id of the action's card, if it was sent and noted."""
        key = self._keys.conversation(conversation_key).cards
        try:
            raw = await self._redis.hget(key, action_id)
        except RedisError:
            return None
        return int(raw) if raw else None
