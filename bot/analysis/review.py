"""Quality reviews: a conversation the bot handled alone that scored low is shown to staff.

When an idle analysis scores a conversation below ``QUALITY_REVIEW_BELOW``,
:class:`QualityReviews` queues a check job in the customer's chat
(``Notice.QUALITY_REVIEW``); the worker holding the chat posts the score, the
failed criteria and the turn codes in the customer's topic (made if needed). It
is not a handoff: the customer is told nothing. Built only with a staff group
and the threshold set.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from bot.analysis.model import QualityScore
from bot.queue.admission import Intake
from bot.queue.jobs import Notice

REVIEW_UPDATE_ID_OFFSET = 5 * 10**13
"""A review job's update id is minus this plus when it was queued (ms): never a Telegram
id, nor a handoff idle check's, a CSAT question's or an escalation offer's (below it)."""

logger = logging.getLogger(__name__)


def review_update_id(queued_ms: int) -> int:
    """The update id of a review job queued at ``queued_ms``."""
    return -(REVIEW_UPDATE_ID_OFFSET + queued_ms)


@dataclass(frozen=True, kw_only=True)
class QualityReviews:
    """Queues the review of a conversation scored below ``below`` (see the module)."""

    intake: Intake
    below: int
    clock: Callable[[], float] = time.time

    def due(self, quality: QualityScore | None) -> bool:
        """Whether ``quality`` is low enough to review."""
        return quality is not None and quality.score < self.below

    async def consider(self, conversation_key: str, quality: QualityScore | None) -> bool:
        """Queue the review if due; ``True`` when queued. Never raises."""
        if not self.due(quality):
            return False
        try:
            return await self.intake.queue_check(
                conversation_key,
                update_id=review_update_id(int(self.clock() * 1000)),
                notice=Notice.QUALITY_REVIEW,
            )
        except (RedisError, OSError) as error:
            logger.warning(
                "Quality review not queued: Redis unavailable (%s)", type(error).__name__
            )
            return False
