"""Escalation: an angry customer in a hurry is offered a person, once per conversation.

When an analysis (early or idle) :attr:`~bot.analysis.model.RequestAnalysis.escalates`
and the conversation is still the bot's, :class:`EscalationOffers` marks the
conversation offered (once: :meth:`~bot.analysis.schedule.AnalysisSchedule.offer_once`)
and queues a check job in the customer's chat (``Notice.ESCALATION``); the worker
holding the chat looks at the session again and sends the offer with its one
button. Built only when a staff group is configured and ``ANALYSIS_ESCALATION=on``.
Offers go to private chats only (like the satisfaction question): in a group the
button would be anyone's.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from bot.analysis.model import RequestAnalysis
from bot.analysis.schedule import AnalysisSchedule
from bot.queue.admission import Intake
from bot.queue.jobs import Notice
from bot.sessions.models import ConversationSession
from bot.storage.keys import telegram_chat_id

UPDATE_ID_OFFSET = 2 * 10**13
"""An offer job's update id is minus this plus when it was queued (ms): never a Telegram id,
never a handoff idle check's (minus a score alone) nor a CSAT question's (minus 10**13 plus
a score), until the year 2286."""

logger = logging.getLogger(__name__)


def offer_update_id(queued_ms: int) -> int:
    """The update id of an offer job queued at ``queued_ms``."""
    return -(UPDATE_ID_OFFSET + queued_ms)


@dataclass(frozen=True, kw_only=True)
class EscalationOffers:
    """Queues the offer of a person after an analysis that escalates (see the module)."""

    schedule: AnalysisSchedule
    intake: Intake
    clock: Callable[[], float] = time.time

    async def consider(
        self, conversation_key: str, session: ConversationSession, analysis: RequestAnalysis
    ) -> bool:
        """Queue the offer if due; ``True`` when queued. Never raises."""
        chat_id = telegram_chat_id(conversation_key)
        if not analysis.escalates or session.handoff != "bot":
            return False
        if chat_id is None or chat_id <= 0:
            # Telegram's private chats are the users' ids (positive); groups are negative.
            return False
        try:
            if not await self.schedule.offer_once(conversation_key):
                return False
            return await self.intake.queue_check(
                conversation_key,
                update_id=offer_update_id(int(self.clock() * 1000)),
                notice=Notice.ESCALATION,
            )
        except (RedisError, OSError) as error:
            # At most once: an offer marked and not queued is simply not made.
            logger.warning(
                "Escalation offer not queued: Redis unavailable (%s)", type(error).__name__
            )
            return False
