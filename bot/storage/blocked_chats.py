"""Chats that blocked the bot: a small Redis flag per chat, so no process sends to them.

Telegram tells the bot with a ``my_chat_member`` update (status ``kicked`` in a
private chat, ``kicked`` or ``left`` in a group) and again when the customer
unblocks it (status ``member``). A send refused with 403 also sets the flag.
The key is the chat's ``blocked`` key (:mod:`bot.storage.keys`), in the chat's slot;
it expires after 30 days, after which a send is tried again (and a 403 sets it again).
"""

import logging

from redis.exceptions import RedisError

from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys, telegram_conversation

logger = logging.getLogger(__name__)

BLOCKED_TTL_SECONDS = 30 * 24 * 3600


class BlockedChats:
    """Sets, clears and reads the per-chat "blocked the bot" flag."""

    def __init__(self, redis: AsyncRedisClient, keys: RedisKeys) -> None:
        self._redis = redis
        self._keys = keys

    def key(self, chat_id: int) -> str:
        """The flag's key for ``chat_id``."""
        return self._keys.conversation(telegram_conversation(chat_id)).blocked

    async def block(self, chat_id: int) -> None:
        """Remember that ``chat_id`` blocked the bot (setting it twice is harmless)."""
        await self._redis.set(self.key(chat_id), "1", ex=BLOCKED_TTL_SECONDS)

    async def unblock(self, chat_id: int) -> None:
        """Forget the flag (the customer unblocked the bot)."""
        await self._redis.delete(self.key(chat_id))

    async def is_blocked(self, chat_id: int) -> bool:
        """Whether ``chat_id`` blocked the bot; when Redis cannot say, the send is tried."""
        try:
            return bool(await self._redis.exists(self.key(chat_id)))
        except (RedisError, OSError) as error:
            logger.warning("Blocked-chat flag of %s unreadable: %s", chat_id, type(error).__name__)
            return False
