"""A zset of conversations scored by when something is due for them (ms), claimed in one script.

The satisfaction question (``{csat}:due``) and the idle analysis
(``{analysis}:due``) are scheduled this way: a claim moves each due score on by
a retry delay in the same script (:class:`~bot.storage.scripts.csat.ClaimDue`),
so of two processes only one claims a conversation; one that dies leaves it to
be claimed again after the delay.
"""

import asyncio
import logging
from collections.abc import Sequence
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
        await schedule_together([self.due(conversation_key, due_ms)])

    def due(self, conversation_key: str, due_ms: int) -> "DueEntry":
        """The schedule of ``conversation_key`` at ``due_ms``, to write with others at once."""
        return DueEntry(due_set=self, conversation_key=conversation_key, due_ms=due_ms)

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


@dataclass(frozen=True, slots=True, kw_only=True)
class DueEntry:
    """One conversation due at ``due_ms`` in ``due_set`` (see :func:`schedule_together`)."""

    due_set: DueSet
    conversation_key: str
    due_ms: int


async def schedule_together(entries: Sequence[DueEntry]) -> None:
    """Write every entry's ``ZADD`` in one pipeline per client; never raises.

    The due sets are of different slots: the pipeline is not a transaction (a
    cluster client splits it per node), and each ``ZADD`` stands alone, as it
    would sent by itself. One round trip instead of one per set after an answer.
    """
    clients: dict[int, list[DueEntry]] = {}
    for entry in entries:
        clients.setdefault(id(entry.due_set.redis), []).append(entry)
    await asyncio.gather(*(_schedule_on_one_client(group) for group in clients.values()))


async def _schedule_on_one_client(entries: list[DueEntry]) -> None:
    try:
        async with entries[0].due_set.redis.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.zadd(entry.due_set.key, {entry.conversation_key: entry.due_ms})
            await pipe.execute()
    except (RedisError, OSError) as error:
        for what in dict.fromkeys(entry.due_set.what for entry in entries):
            logger.warning("%s not scheduled: Redis unavailable (%s)", what, type(error).__name__)
