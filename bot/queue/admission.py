"""Intake: an accepted update is in Redis before Telegram is told it arrived.

One script under the chat's hash tag de-duplicates the update id, applies
flood control (charged at the message's own time, so a backlog taken in at
once after an outage is no burst; button presses are not charged) and the
daily turn budget, and appends the job to the chat's
FIFO queue, atomically; it is safe to run twice (a redelivered update, or a
retried command, finds its ``seen`` mark and changes nothing). Then a signal
on the work stream tells workers the chat has work; that is a second key (of
another slot), so it is sent after the script, and again for a redelivered
update whose chat still waits with no worker on it.

A chat's queue holds at most ``CHAT_QUEUE_MAX`` jobs: past it a message is not
queued, and the customer is told once per fill. A staff member's message in a
customer's topic is flood-limited per member in the staff group first (its own
script, in the staff group's slot, which keeps its verdict for a redelivery).
"""

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from bot.queue.jobs import Notice, QueuedJob, turn_id_for
from bot.queue.work_stream import WorkStream
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys, telegram_chat_id
from bot.storage.scripts.admission_lua import Accept, StaffFlood
from bot.storage.scripts.base import Scripts

logger = logging.getLogger(__name__)

SEEN_TTL_SECONDS = 24 * 3600
DEFAULT_BACKLOG_SECONDS = 24 * 3600
"""How old a message's date may be and still count (Telegram keeps an update for 24 hours)."""
_DAY_COUNTER_TTL_SECONDS = 2 * 24 * 3600
ALBUM_CHARGE_SECONDS = 60
"""How long an album's one flood charge takes in its other photos (they come within a second)."""
ALBUM_SIZE = 10
"""Telegram's most items in an album: one charge takes in no more (a forged id gains little)."""


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


class IntakeVerdict(StrEnum):
    """What intake did with one update."""

    QUEUED = "ok"
    DUPLICATE = "duplicate"
    RATE_WARN = "rate_warn"
    RATE_QUIET = "rate_quiet"
    DAILY_WARN = "daily_warn"
    DAILY_QUIET = "daily_quiet"
    QUEUE_FULL_WARN = "full_warn"
    QUEUE_FULL_QUIET = "full_quiet"


@dataclass(frozen=True, slots=True, kw_only=True)
class FloodLimits:
    """A burst of ``burst`` messages, then one per ``interval_seconds``; ``daily_turns`` a day.

    Charged at each message's own time (Telegram's ``date``), believed as far back
    as ``backlog_seconds`` before Redis's clock and never ahead of it.
    """

    burst: int
    interval_seconds: float
    daily_turns: int
    backlog_seconds: float = DEFAULT_BACKLOG_SECONDS


@dataclass(frozen=True, slots=True, kw_only=True)
class StaffSender:
    """Who wrote a staff topic message: a member ``user_id`` of staff group ``staff_chat_id``."""

    staff_chat_id: int
    user_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingUpdate:
    """What intake needs to know of an update (the front end parses it)."""

    update_id: int
    chat_id: int
    conversation_key: str
    user_id: int | None
    counts_turn: bool
    payload: dict[str, object]
    notice: Notice | None = None
    # Written by a staff member in the customer's topic: flood-limited in the staff group.
    staff: StaffSender | None = None
    # Whether ``CHAT_QUEUE_MAX`` applies (a block or an unblock must never be dropped).
    capped: bool = True
    # When the customer wrote it (Telegram's ``date``, ms): the flood limit is charged
    # then, so a backlog taken in at once is no burst. ``None``: at intake.
    sent_ms: int | None = None
    # One photo of an album (Telegram's ``media_group_id``): the album is one message to the
    # flood limit and the daily budget, charged with the first of its photos taken in.
    media_group_id: str | None = None
    # Intake's decision that the message is meant for the bot (carried in the job).
    addressed: bool | None = None


@dataclass(eq=False)
class Intake:
    """Accepts updates into their chats' queues; raises ``RedisError`` when Redis is down.

    ``staff_limits``: staff topic messages per member (none without);
    ``queue_max``: the most jobs a chat's queue holds (0: no cap).
    """

    redis: AsyncRedisClient
    _: KW_ONLY
    keys: RedisKeys
    work: WorkStream
    limits: FloodLimits
    staff_limits: FloodLimits | None = None
    queue_max: int = 0
    clock_ms: Callable[[], int] = _now_ms
    _scripts: Scripts = field(init=False)

    def __post_init__(self) -> None:
        self._scripts = Scripts(self.redis)

    async def accept(self, update: IncomingUpdate) -> IntakeVerdict:
        """Queue ``update`` in its chat (once, whatever the number of deliveries)."""
        if update.staff is not None:
            staff_verdict = await self._staff_flood(update.update_id, update.staff, update.sent_ms)
            if staff_verdict is not IntakeVerdict.QUEUED:
                if staff_verdict is IntakeVerdict.RATE_WARN:
                    logger.warning(
                        "Staff message %s over the flood limit; dropped (and the next ones "
                        "until the limit allows)",
                        update.update_id,
                    )
                return staff_verdict
        conversation = self.keys.conversation(update.conversation_key)
        day = datetime.now(UTC).strftime("%Y%m%d")
        user = update.user_id if update.user_id is not None else 0
        job = QueuedJob(
            job_id=str(update.update_id),
            update_id=update.update_id,
            turn_id=turn_id_for(update.conversation_key, update.update_id),
            enqueued_ms=self.clock_ms(),
            chat_id=update.chat_id,
            update=dict(update.payload),
            notice=update.notice,
            addressed=update.addressed,
        )
        rate_notice = job.model_copy(update={"notice": Notice.RATE_LIMITED, "update": {}})
        daily_notice = job.model_copy(update={"notice": Notice.DAILY_LIMIT, "update": {}})
        # Only the customer's own message is told the queue is full (not a staff one's).
        full_notice = (
            job.model_copy(update={"notice": Notice.QUEUE_FULL, "update": {}}).model_dump_json()
            if update.staff is None
            else ""
        )
        reply = await self._scripts.run(
            Accept(
                chat=conversation,
                update_id=update.update_id,
                user_id=user,
                day=day,
                seen_ttl=SEEN_TTL_SECONDS,
                job=job.model_dump_json(),
                rate_notice=rate_notice.model_dump_json(),
                daily_notice=daily_notice.model_dump_json(),
                check_flood=update.user_id is not None,
                counts_turn=update.counts_turn,
                burst=self.limits.burst,
                interval_ms=self.limits.interval_seconds * 1000,
                daily_limit=self.limits.daily_turns,
                day_counter_ttl=_DAY_COUNTER_TTL_SECONDS,
                queue_cap=self.queue_max if update.capped else 0,
                full_notice=full_notice,
                full_mark_ttl=SEEN_TTL_SECONDS,
                sent_ms=update.sent_ms or 0,
                backlog_ms=int(self.limits.backlog_seconds * 1000),
                media_group_id=update.media_group_id or "",
                album_ttl=ALBUM_CHARGE_SECONDS if update.media_group_id else 0,
                album_size=ALBUM_SIZE,
            )
        )
        verdict = IntakeVerdict(text_of(reply[0]))
        if int(reply[1]) == 1:
            await self.work.signal(update.conversation_key)
        if verdict is IntakeVerdict.DUPLICATE:
            logger.info("Update %s was already accepted; not queued again", update.update_id)
        elif verdict is not IntakeVerdict.QUEUED:
            logger.info("Update %s over a limit: %s", update.update_id, verdict.value)
        return verdict

    async def queue_check(self, conversation_key: str, *, update_id: int, notice: Notice) -> bool:
        """Queue a check of the application's own (no customer message) in the chat.

        A sweeper's: ``notice`` says what the worker checks (a handoff gone idle,
        a satisfaction question due); ``update_id`` is the sweeper's own, never a
        Telegram one. It is never dropped for a full queue, nor told the customer.
        ``False`` when ``conversation_key`` names no Telegram chat (nothing queued).
        """
        chat_id = telegram_chat_id(conversation_key)
        if chat_id is None:
            return False
        await self.accept(
            IncomingUpdate(
                update_id=update_id,
                chat_id=chat_id,
                conversation_key=conversation_key,
                user_id=None,
                counts_turn=False,
                payload={},
                notice=notice,
                capped=False,
            )
        )
        return True

    async def _staff_flood(
        self, update_id: int, sender: StaffSender, sent_ms: int | None
    ) -> IntakeVerdict:
        """The staff member's bucket in the staff group (the same verdict on a redelivery)."""
        limits = self.staff_limits
        if limits is None:
            return IntakeVerdict.QUEUED
        reply = await self._scripts.run(
            StaffFlood(
                seen=self.keys.staff_seen(sender.staff_chat_id, update_id),
                bucket=self.keys.staff_flood(sender.staff_chat_id, sender.user_id),
                seen_ttl=SEEN_TTL_SECONDS,
                burst=limits.burst,
                interval_ms=limits.interval_seconds * 1000,
                sent_ms=sent_ms or 0,
                backlog_ms=int(limits.backlog_seconds * 1000),
            )
        )
        return IntakeVerdict(text_of(reply))
