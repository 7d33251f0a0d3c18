"""Queues the satisfaction question of conversations that are due, in their chats' queues.

Every process with workers runs one (supervised). It does not ask itself: it
claims due conversations (:meth:`bot.csat.schedule.CsatSchedule.claim`, one
script, so of two sweepers only one claims a conversation) and queues a
question job through intake, whose update id carries the claimed score; the
worker holding the chat then decides with the session in hand. A process dying
between the claim and the queueing leaves the conversation scored one retry
delay ahead: the next claim queues it then, with another id.
"""

from bot.csat.schedule import CsatSchedule, question_update_id
from bot.ops.periodic import Periodic
from bot.queue.admission import Intake
from bot.queue.jobs import Notice

RETRY_SECONDS = 30.0
"""How long after a claim a conversation still due is claimed again."""


class CsatSweeper(Periodic):
    """Claims due conversations every ``period_seconds`` and queues their question job.

    The period is a few seconds at most (a closed handoff asks about at once),
    a quarter of the idle time when that is shorter.
    """

    def __init__(
        self,
        *,
        schedule: CsatSchedule,
        intake: Intake,
        period_seconds: float | None = None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self._schedule = schedule
        self._intake = intake
        idle = schedule.policy.after_idle_seconds
        super().__init__("CSAT sweep", period_seconds or min(5.0, max(idle / 4, 0.05)))
        self._retry = max(retry_seconds, self._period)

    async def sweep(self) -> int:
        """Queue one question job per due conversation; returns how many were claimed."""
        claimed = await self._schedule.claim(self._retry)
        for conversation_key, claimed_ms in claimed:
            if not await self._intake.queue_check(
                conversation_key, update_id=question_update_id(claimed_ms), notice=Notice.CSAT
            ):
                await self._schedule.forget(conversation_key, claimed_ms)
        return len(claimed)
