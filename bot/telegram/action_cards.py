"""Confirmation cards in Telegram: sent with two inline buttons, edited once settled."""

import logging

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramBadRequest
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup
from redis.exceptions import RedisError

from bot.actions.pending import ActionCard
from bot.queue.jobs import CardEdit
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys

logger = logging.getLogger(__name__)


def keyboard(card: ActionCard) -> InlineKeyboardMarkup:
    """One row: «Подтвердить» first, «Не нужно» second."""
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [InlineKeyboardButton(text=label, callback_data=data) for label, data in card.buttons()]
        ]
    )


async def send_card(bot: Bot, chat_id: int, card: ActionCard) -> int | None:
    """Send the card; its message id, or ``None`` when Telegram refused it (logged)."""
    try:
        message = await bot.send_message(chat_id, card.text, reply_markup=keyboard(card))
    except TelegramAPIError as error:
        logger.warning("Card of action %s not sent: %s", card.action_id, type(error).__name__)
        return None
    return message.message_id


async def edit_card(bot: Bot, chat_id: int, edit: CardEdit) -> bool:
    """Rewrite a settled card: its new text, no keyboard (edited before: fine too)."""
    try:
        # Without reply_markup the edit removes the inline keyboard.
        await bot.edit_message_text(text=edit.text, chat_id=chat_id, message_id=edit.message_id)
    except TelegramBadRequest as error:
        # "message is not modified": a repeated delivery after a crash found it done.
        if "not modified" in str(error):
            return True
        logger.warning("Card %s not edited: %s", edit.message_id, type(error).__name__)
        return False
    except TelegramAPIError as error:
        logger.warning("Card %s not edited: %s", edit.message_id, type(error).__name__)
        return False
    return True


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
