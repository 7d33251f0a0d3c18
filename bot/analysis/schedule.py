"""When a conversation is analysed: once each time it goes idle, by one process.

Two kinds of keys (:mod:`bot.storage.keys`):

- ``{analysis}:due``, one zset for every chat, scored by when the conversation
  counts as idle: each delivered answer (re)schedules it the idle time ahead
  (``CSAT_AFTER_IDLE_MINUTES``, the moment the satisfaction question is due),
  a closed handoff schedules it now. Sweepers claim due conversations with
  :class:`~bot.storage.scripts.csat.ClaimDue` (a claimed score moves on by
  the retry delay, so a second sweeper finds nothing).
- ``{analysis}:soon``, the same for an early analysis: a customer's message
  that reads upset (:func:`bot.analysis.upset.looks_upset`, with a staff group
  and ``ANALYSIS_ESCALATION=on``) schedules it now, for the escalation offer.
- ``{<conv>}:analysis``, the conversation's own hash: which idle was analysed
  (the session id and turn count, claimed by one process with
  :class:`~bot.storage.scripts.analysis.BeginAnalysis`) and the analysis itself
  with its summary for staff, under the session's TTL, and ``esc`` once a
  person was offered (set once: the offer is made at most once). Never in the audit.

So a conversation is analysed at most once per idle, whatever the number of
processes; one that continues later is analysed again at its next idle. The
analysis never runs on a customer's turn: the sweeper reads the session
without its lease.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.analysis.model import RequestAnalysis
from bot.sessions.models import ConversationSession
from bot.storage.connection import AsyncRedisClient
from bot.storage.due_set import DueEntry, DueSet, schedule_together
from bot.storage.keys import RedisKeys
from bot.storage.scripts.analysis import BeginAnalysis
from bot.storage.scripts.base import Scripts

logger = logging.getLogger(__name__)


def idle_of(session: ConversationSession) -> str:
    """Which idle of the conversation this is: its session and how many turns it had."""
    return f"{session.session_id}:{session.turn_count}"


class StoredAnalysis(BaseModel):
    """An analysis as kept for staff under the conversation (with its summary)."""

    model_config = ConfigDict(frozen=True)

    idle: str
    analysed_at: float
    analysis: RequestAnalysis


@dataclass(eq=False)
class AnalysisSchedule:
    """The idle analysis's schedule and results in Redis (see the module docstring)."""

    redis: AsyncRedisClient
    _: KW_ONLY
    keys: RedisKeys
    idle_seconds: float
    ttl_seconds: int
    clock: Callable[[], float] = time.time
    _scripts: Scripts = field(init=False)
    _due_set: DueSet = field(init=False)
    _soon_set: DueSet = field(init=False)

    def __post_init__(self) -> None:
        self._scripts = Scripts(self.redis)
        self._due_set = DueSet(
            redis=self.redis, scripts=self._scripts, key=self.keys.analysis_due, what="Analysis"
        )
        self._soon_set = DueSet(
            redis=self.redis, scripts=self._scripts, key=self.keys.analysis_soon, what="Analysis"
        )

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def answered(self, conversation_key: str) -> None:
        """The bot answered: analyse after the idle time (only the last answer counts).

        Never raises: the answer went out either way.
        """
        await schedule_together([self.due_after_answer(conversation_key)])

    def due_after_answer(self, conversation_key: str) -> DueEntry:
        """What :meth:`answered` writes, to write it with other schedules in one round trip."""
        return self._due_set.due(conversation_key, self._now_ms() + int(self.idle_seconds * 1000))

    async def handoff_closed(self, conversation_key: str) -> None:
        """A handoff ended: the conversation is idle now. Never raises."""
        await self._due_set.schedule(conversation_key, self._now_ms())

    async def soon(self, conversation_key: str) -> None:
        """The customer reads upset: analyse now, off the turn path (the sweeper does).

        Never raises: the answer went out either way.
        """
        await self._soon_set.schedule(conversation_key, self._now_ms())

    async def claim(
        self, retry_seconds: float, limit: int = 100, *, early: bool = False
    ) -> list[tuple[str, int]]:
        """Due conversations, each with the score it now has (moved on by ``retry_seconds``).

        ``early``: those of ``{analysis}:soon`` instead of the idle ones.
        """
        due_set = self._soon_set if early else self._due_set
        return await due_set.claim(self._now_ms(), retry_seconds, limit)

    async def forget(self, conversation_key: str, claimed_ms: int, *, early: bool = False) -> None:
        """Done with this idle: off the schedule, unless a newer answer rescheduled it."""
        await (self._soon_set if early else self._due_set).forget(conversation_key, claimed_ms)

    async def offer_once(self, conversation_key: str) -> bool:
        """Whether a person may be offered now: ``True`` once per conversation, then never.

        ``HSETNX`` decides (safe to repeat: a second call finds the field and says no).
        """
        key = self.keys.conversation(conversation_key).analysis
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "esc", str(self._now_ms()))
            pipe.expire(key, self.ttl_seconds)
            first, _ = await pipe.execute()
        return int(first) == 1

    async def begin(self, conversation_key: str, session: ConversationSession, token: str) -> bool:
        """Whether ``token`` analyses this idle of the conversation (one process does)."""
        reply = await self._scripts.run(
            BeginAnalysis(
                chat=self.keys.conversation(conversation_key),
                version=idle_of(session),
                token=token,
                ttl=self.ttl_seconds,
            )
        )
        return int(reply) == 1

    async def store(
        self, conversation_key: str, session: ConversationSession, analysis: RequestAnalysis
    ) -> None:
        """Keep ``analysis`` for staff under the conversation, with the session's TTL."""
        stored = StoredAnalysis(idle=idle_of(session), analysed_at=self.clock(), analysis=analysis)
        key = self.keys.conversation(conversation_key).analysis
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, "a", stored.model_dump_json())
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def latest(self, conversation_key: str) -> StoredAnalysis | None:
        """The conversation's last stored analysis; ``None`` when there is none (or unreadable)."""
        raw = await self.redis.hget(self.keys.conversation(conversation_key).analysis, "a")
        if not raw:
            return None
        try:
            return StoredAnalysis.model_validate_json(raw)
        except ValidationError:
            logger.warning("A stored analysis is unreadable; treated as none")
            return None
