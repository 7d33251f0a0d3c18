"""Ends handoffs nobody wrote in for ``HANDOFF_IDLE_MINUTES``, without waiting for a message.

Every process with workers runs one. It does not touch a conversation
itself: it queues an idle check in the customer's chat queue (through intake),
and the worker holding the chat decides with the session in hand.

The check's update id is minus the handoff's score in the idle index, so
sweepers that saw the same score queue it once (intake de-duplicates ids for
24 h). After queueing, the sweeper moves the score on by the retry delay
(only if nobody moved it meanwhile): the handoff is not due again before
then, and if the check failed (the handoff is still open) the next attempt
has another score, so another id, and is queued. Queue first, then move: a
crash in between repeats the same id, which intake drops. A check still
queued after the retry delay is followed by a second one, which finds the
handoff ended and does nothing.
"""

from bot.handoff.topics import TopicDirectory
from bot.ops.periodic import Periodic
from bot.queue.admission import Intake
from bot.queue.jobs import Notice
from bot.sessions.handoff_machine import IdleRule


class HandoffSweeper(Periodic):
    """Queues idle checks for handoffs quiet longer than the idle rule's time.

    ``idle`` is the handoff machine's one idle rule (its time and its clock);
    ``retry_seconds`` is how long after queueing a check the handoff may be due
    again (default: a minute, or the idle time when shorter, at least a period).
    """

    def __init__(
        self,
        *,
        topics: TopicDirectory,
        intake: Intake,
        idle: IdleRule,
        period_seconds: float | None = None,
        retry_seconds: float | None = None,
    ) -> None:
        self._topics = topics
        self._intake = intake
        self._idle = idle
        self._idle_ms = int(idle.idle_seconds * 1000)
        super().__init__(
            "Handoff idle sweep", period_seconds or min(60.0, max(idle.idle_seconds / 4, 0.05))
        )
        retry = retry_seconds or max(self._period, min(idle.idle_seconds, 60.0))
        self._retry_ms = max(1, int(retry * 1000))

    async def sweep(self) -> int:
        """Queue one idle check per quiet handoff; returns how many were found."""
        now_ms = self._idle.now_ms()
        due = await self._topics.idle(now_ms - self._idle_ms)
        for conversation_key, due_ms in due:
            # Negative: never a Telegram update id; one per score seen.
            if not await self._intake.queue_check(
                conversation_key, update_id=-due_ms, notice=Notice.HANDOFF_IDLE
            ):
                await self._topics.ended(conversation_key)
                continue
            await self._topics.postpone(
                conversation_key, due_ms=due_ms, until_ms=now_ms - self._idle_ms + self._retry_ms
            )
        return len(due)
