"""A zset of conversations scored by when something is due for them (ms), claimed in one script.

The satisfaction question (``{csat}:due``) and the idle analysis
(``{analysis}:due``) are scheduled this way: a claim moves each due score on by
a retry delay in the same script (:class:`~bot.storage.scripts.csat.ClaimDue`),
so of two processes only one claims a conversation; one that dies leaves it to
be claimed again after the delay.
"""

from dataclasses import dataclass

from bot.storage.connection import text_of
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.csat import ClaimDue, ForgetDue


@dataclass(frozen=True, slots=True, kw_only=True)
class DueSet:
    """The claims and releases of one due zset (``key``)."""

    scripts: Scripts
    key: str

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
