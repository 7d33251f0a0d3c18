"""A zset of conversations scored by when something is due for them (ms), claimed in one script.

The satisfaction question (``{csat}:due``) and the idle analysis
(``{analysis}:due``) are scheduled this way: a claim moves each due score on by
a retry delay in the same script (:class:`~bot.storage.scripts.csat.ClaimDue`),
so of two processes only one claims a conversation; one that dies leaves it to
be claimed again after the delay.
"""

import logging
from dataclasses import dataclass

from redis.exceptions import RedisError

from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.csat import ClaimDue, ForgetDue

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DueSet:
    """The schedule, claims and releases of one due zset (``key``); ``what`` names it in logs."""

    redis: AsyncRedisClient
    scripts: Scripts
    key: str
    what: str

    async def schedule(self, conversation_key: str, due_ms: int) -> None:
        """Due at ``due_ms`` (a later call moves it). Never raises: an answer went out anyway."""
        try:
            await self.redis.zadd(self.key, {conversation_key: due_ms})
        except (RedisError, OSError) as error:
            logger.warning(
                "%s not scheduled: Redis unavailable (%s)", self.what, type(error).__name__
            )

    async def claim(
        self, now_ms: int, retry_seconds: float, limit: int = 100
    ) -> list[tuple[str, int]]:
        """Due conversations, each with the score it now has (moved on by ``retry_seconds``)."""
        reply = await self.scripts.run(
            ClaimDue(
                due=self.key,
                now_ms=now_ms,
                retry_ms=max(1, int(retry_seconds * 1000)),
                limit=limit,
            )
        )
        moved = int(text_of(reply[0]))
        return [(text_of(member), moved) for member in reply[1:]]

    async def forget(self, conversation_key: str, claimed_ms: int) -> None:
        """Off the schedule, unless a newer event rescheduled it since the claim."""
        await self.scripts.run(
            ForgetDue(due=self.key, conversation_key=conversation_key, claimed_ms=claimed_ms)
        )
