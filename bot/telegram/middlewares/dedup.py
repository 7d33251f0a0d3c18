"""Dropping an update that was already handled (Telegram redelivers after crashes and retries).

The update id is claimed with ``SET NX EX`` *before* handling. An update whose
handling then crashes is not handled again when redelivered; handler failures
are answered with an incident message anyway, so only a process killed in the
middle of a turn loses that one message (the customer sees no reply and writes
again), which is better than answering twice. If Redis is unreachable the
update is handled (fail open): the customer should not be ignored because the
de-duplication store is down.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update
from redis.exceptions import RedisError

from bot.redis_connection import AsyncRedisClient

logger = logging.getLogger(__name__)

DEFAULT_DEDUP_TTL_SECONDS = 24 * 3600


def update_key(key_prefix: str, update_id: int) -> str:
    """The Redis key that marks ``update_id`` as taken."""
    return f"{key_prefix}:update:{update_id}"


class UpdateDeduplicationMiddleware(BaseMiddleware):
    """Outer update middleware: each update id is handled at most once across processes."""

    def __init__(
        self,
        redis: AsyncRedisClient,
        *,
        key_prefix: str,
        ttl_seconds: int = DEFAULT_DEDUP_TTL_SECONDS,
    ) -> None:
        self._redis = redis
        self._prefix = key_prefix
        self._ttl = ttl_seconds

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Claim the update id; skip the update if another delivery claimed it first."""
        if not isinstance(event, Update):
            return await handler(event, data)
        try:
            claimed = await self._redis.set(
                update_key(self._prefix, event.update_id), b"1", nx=True, ex=self._ttl
            )
        except (RedisError, OSError) as error:
            logger.warning(
                "De-duplication unavailable (%s); handling update %s anyway",
                type(error).__name__,
                event.update_id,
            )
            return await handler(event, data)
        if not claimed:
            logger.info("Update %s was already handled; dropped", event.update_id)
            return None
        return await handler(event, data)
