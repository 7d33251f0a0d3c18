"""When to ask the satisfaction question, asking it once, and recording the one answer.

Two kinds of keys (:mod:`bot.storage.keys`):

- ``{csat}:due``, one zset for every chat: a conversation scored by when its
  question is due. The bot's answer (re)schedules it ``CSAT_AFTER_IDLE_MINUTES``
  ahead, so only the last answer counts; a closed handoff schedules it now.
  Sweepers claim due conversations with one script
  (:class:`~bot.storage.scripts.csat.ClaimDue`: each claimed
  score moves on by the retry delay, so a second sweeper, or a second run,
  finds nothing due) and queue a question job in the chat's queue.
- ``{<conv>}:csat``, the conversation's own hash: when it was last asked, the
  open question (id, who answered, turns, the score once pressed) and whether
  a person answered since. Its scripts run in the conversation's slot.

The worker that holds the chat decides (:meth:`CsatSchedule.decide`): the job
asks only if the due score is still the one it was claimed with (a newer
answer moved it, so the conversation goes on), the chat is not handed off or
blocked, and :class:`~bot.storage.scripts.csat.Ask` finds no question in
``CSAT_MIN_INTERVAL_HOURS``.
Every script is safe to run twice: a repeated ask of the same question id
answers the same, a repeated press of the same job records nothing new.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal

from redis.exceptions import RedisError

from bot.audit.feedback import AnsweredBy
from bot.sessions.models import ConversationSession
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.due_set import DueEntry, DueSet, schedule_together
from bot.storage.keys import RedisKeys, telegram_chat_id
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.csat import Ask, RecordPress

logger = logging.getLogger(__name__)

QUESTION_TTL_SECONDS = 7 * 24 * 3600
"""How long a question's buttons count (unless a newer question replaces it)."""

UPDATE_ID_OFFSET = 10**13
"""A question job's update id is minus this plus its claimed score: never a Telegram id,
never a handoff idle check's (minus a score alone)."""

PressVerdict = Literal["recorded", "again", "unknown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CsatPolicy:
    """When to ask: ``after_idle_seconds`` after the bot's last answer, at most once per
    ``min_interval_seconds`` per chat."""

    after_idle_seconds: float
    min_interval_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A question the worker asks: its id, who answered the conversation, its turns."""

    question_id: str
    answered_by: AnsweredBy
    turns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PressResult:
    """What a press did: ``recorded`` (the first), ``again`` (nothing changed) or ``unknown``
    (no such open question: expired or replaced)."""

    verdict: PressVerdict
    answered_by: AnsweredBy = "bot"
    turns: int | None = None
    score: int | None = None


@dataclass(eq=False)
class CsatSchedule:
    """The satisfaction question's schedule and state in Redis (see the module docstring).

    ``policy`` says when questions are asked.
    """

    redis: AsyncRedisClient
    _: KW_ONLY
    keys: RedisKeys
    policy: CsatPolicy
    clock: Callable[[], float] = time.time
    _scripts: Scripts = field(init=False)
    _due: DueSet = field(init=False)

    def __post_init__(self) -> None:
        self._scripts = Scripts(self.redis)
        self._due = DueSet(
            redis=self.redis, scripts=self._scripts, key=self.keys.csat_due, what="CSAT"
        )

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def _ttl_seconds(self) -> int:
        return max(QUESTION_TTL_SECONDS, int(self.policy.min_interval_seconds) + 1)

    async def answered(self, conversation_key: str) -> None:
        """The bot answered: the question is due after the idle time (only the last counts).

        Private Telegram chats only; never raises (the answer went out either way).
        """
        entry = self.due_after_answer(conversation_key)
        if entry is not None:
            await schedule_together([entry])

    def due_after_answer(self, conversation_key: str) -> DueEntry | None:
        """What :meth:`answered` writes, to write it with other schedules in one round trip
        (``None``: no question in this conversation)."""
        if not _private(conversation_key):
            return None
        due = self._now_ms() + int(self.policy.after_idle_seconds * 1000)
        return self._due.due(conversation_key, due)

    async def handoff_closed(self, conversation_key: str) -> None:
        """A handoff ended: a person answered; the question is due now. Never raises."""
        if not _private(conversation_key):
            return
        csat = self.keys.conversation(conversation_key).csat
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hset(csat, "handed", "1")
                pipe.expire(csat, self._ttl_seconds)
                await pipe.execute()
        except (RedisError, OSError) as error:
            logger.warning("CSAT not scheduled: Redis unavailable (%s)", type(error).__name__)
            return
        await self._due.schedule(conversation_key, self._now_ms())

    async def claim(self, retry_seconds: float, limit: int = 100) -> list[tuple[str, int]]:
        """Due conversations, each with the score it now has (moved on by ``retry_seconds``)."""
        return await self._due.claim(self._now_ms(), retry_seconds, limit)

    async def forget(self, conversation_key: str, claimed_ms: int) -> None:
        """Not to be asked (handed off, blocked, asked recently): off the schedule, unless a
        newer answer rescheduled it meanwhile."""
        await self._due.forget(conversation_key, claimed_ms)

    async def still_due(self, conversation_key: str, claimed_ms: int) -> bool:
        """Whether the schedule still holds the score the question's job was claimed with."""
        score = await self.redis.zscore(self.keys.csat_due, conversation_key)
        return score is not None and int(score) == claimed_ms

    async def decide(
        self,
        conversation_key: str,
        *,
        claimed_ms: int,
        question_id: str,
        session: ConversationSession | None,
        blocked: bool,
    ) -> Question | None:
        """The question to ask now, or ``None`` (then it is off the schedule if still due).

        The worker holds the chat's lease: ``session`` and ``blocked`` are as it read them.
        """
        if not await self.still_due(conversation_key, claimed_ms):
            return None
        if blocked or (session is not None and session.handoff != "bot"):
            await self.forget(conversation_key, claimed_ms)
            return None
        reply = await self._scripts.run(
            Ask(
                chat=self.keys.conversation(conversation_key),
                now_ms=self._now_ms(),
                min_interval_ms=int(self.policy.min_interval_seconds * 1000),
                question_id=question_id,
                session_id=session.session_id if session is not None else "",
                session_turns=session.turn_count if session is not None else 0,
                ttl=self._ttl_seconds,
            )
        )
        await self.forget(conversation_key, claimed_ms)
        if text_of(reply[0]) == "recent":
            return None
        return Question(
            question_id=question_id,
            answered_by=_answered_by(text_of(reply[1])),
            turns=int(text_of(reply[2]) or "0"),
        )

    async def record(
        self, conversation_key: str, question_id: str, score: int, job_id: str
    ) -> PressResult:
        """Record the press once (the first press of the open question counts)."""
        reply = await self._scripts.run(
            RecordPress(
                chat=self.keys.conversation(conversation_key),
                question_id=question_id,
                score=score,
                job_id=job_id,
            )
        )
        verdict = text_of(reply[0])
        if verdict == "unknown":
            return PressResult(verdict="unknown")
        turns, recorded = text_of(reply[2]), text_of(reply[3])
        return PressResult(
            verdict="recorded" if verdict == "recorded" else "again",
            answered_by=_answered_by(text_of(reply[1])),
            turns=int(turns) if turns.isdigit() else None,
            score=int(recorded) if recorded.isdigit() else None,
        )


async def press_state(
    redis: AsyncRedisClient, keys: RedisKeys, conversation_key: str, question_id: str
) -> Literal["open", "answered", "closed"]:
    """What a press on ``question_id`` will find (intake's prediction; the worker decides)."""
    current, score = await redis.hmget(keys.conversation(conversation_key).csat, ["q", "score"])
    if current is None or text_of(current) != question_id:
        return "closed"
    return "open" if score is None else "answered"


def question_update_id(claimed_ms: int) -> int:
    """The update id of the question job claimed with score ``claimed_ms``."""
    return -(UPDATE_ID_OFFSET + claimed_ms)


def claimed_score(update_id: int) -> int | None:
    """The claimed score a question job's update id carries (``None``: not a question's id)."""
    value = -update_id - UPDATE_ID_OFFSET
    return value if update_id < 0 and value >= 0 else None


def _private(conversation_key: str) -> bool:
    # Telegram's private chats are the users' ids (positive); groups are negative.
    chat_id = telegram_chat_id(conversation_key)
    return chat_id is not None and chat_id > 0


def _answered_by(text: str) -> AnsweredBy:
    return "bot_then_person" if text == "bot_then_person" else "bot"
