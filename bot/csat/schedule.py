"""When to ask the satisfaction question, asking it once, and recording the one answer.

Two kinds of keys (:mod:`bot.redis_keys`):

- ``{csat}:due``, one zset for every chat: a conversation scored by when its
  question is due. The bot's answer (re)schedules it ``CSAT_AFTER_IDLE_MINUTES``
  ahead, so only the last answer counts; a closed handoff schedules it now.
  Sweepers claim due conversations with :data:`CLAIM` (one script: each claimed
  score moves on by the retry delay, so a second sweeper, or a second run,
  finds nothing due) and queue a question job in the chat's queue.
- ``{<conv>}:csat``, the conversation's own hash: when it was last asked, the
  open question (id, who answered, turns, the score once pressed) and whether
  a person answered since. Its scripts run in the conversation's slot.

The worker that holds the chat decides (:meth:`CsatSchedule.decide`): the job
asks only if the due score is still the one it was claimed with (a newer
answer moved it, so the conversation goes on), the chat is not handed off or
blocked, and :data:`ASK` finds no question in ``CSAT_MIN_INTERVAL_HOURS``.
Every script is safe to run twice: a repeated ask of the same question id
answers the same, a repeated press of the same job records nothing new.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from redis.exceptions import RedisError

from bot.audit.feedback import AnsweredBy
from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import RedisKeys, telegram_chat_id
from bot.sessions.models import ConversationSession

logger = logging.getLogger(__name__)

QUESTION_TTL_SECONDS = 7 * 24 * 3600
"""How long a question's buttons count (unless a newer question replaces it)."""

UPDATE_ID_OFFSET = 10**13
"""A question job's update id is minus this plus its claimed score: never a Telegram id,
never a handoff idle check's (minus a score alone)."""

# KEYS: due zset. ARGV: now ms, retry ms, most to claim.
# Returns {new score, member...}: the claimed members, each now scored new score.
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local moved = tonumber(ARGV[1]) + tonumber(ARGV[2])
local out = {tostring(moved)}
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], moved, member)
  out[#out + 1] = member
end
return out
"""

# KEYS: due zset. ARGV: member, its score as claimed. Removes it only if still so scored.
FORGET = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
"""

# KEYS: the conversation's csat hash.
# ARGV: now ms, min interval ms, question id, session id, session turn count, ttl s.
# Returns {'ask'|'again', by, turns} or {'recent'}; 'again' for the same question id.
ASK = """
local h = KEYS[1]
if redis.call('HGET', h, 'q') == ARGV[3] then
  return {'again', redis.call('HGET', h, 'by') or 'bot', redis.call('HGET', h, 'turns') or '0'}
end
local last = tonumber(redis.call('HGET', h, 'asked') or '')
if last and tonumber(ARGV[1]) - last < tonumber(ARGV[2]) then return {'recent'} end
local by = 'bot'
if redis.call('HGET', h, 'handed') == '1' then by = 'bot_then_person' end
local base = 0
if redis.call('HGET', h, 'sid') == ARGV[4] then
  base = tonumber(redis.call('HGET', h, 'base') or '0') or 0
end
local turns = math.max(0, tonumber(ARGV[5]) - base)
redis.call('HDEL', h, 'handed', 'score', 'pj')
redis.call('HSET', h, 'asked', ARGV[1], 'q', ARGV[3], 'by', by, 'turns', tostring(turns),
  'sid', ARGV[4], 'base', ARGV[5])
redis.call('EXPIRE', h, tonumber(ARGV[6]))
return {'ask', by, tostring(turns)}
"""

# KEYS: the conversation's csat hash. ARGV: question id, score, the press's job id.
# Returns {'recorded'|'again'|'unknown', by, turns, score}: recorded once (HSETNX);
# the same job again answers 'recorded' with the score it recorded.
RECORD = """
local h = KEYS[1]
if redis.call('HGET', h, 'q') ~= ARGV[1] then return {'unknown', '', '', ''} end
local by = redis.call('HGET', h, 'by') or 'bot'
local turns = redis.call('HGET', h, 'turns') or ''
if redis.call('HSETNX', h, 'score', ARGV[2]) == 1 then
  redis.call('HSET', h, 'pj', ARGV[3])
  return {'recorded', by, turns, ARGV[2]}
end
if redis.call('HGET', h, 'pj') == ARGV[3] then
  return {'recorded', by, turns, redis.call('HGET', h, 'score')}
end
return {'again', by, turns, ''}
"""

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


class CsatSchedule:
    """The satisfaction question's schedule and state in Redis (see the module docstring)."""

    def __init__(
        self,
        redis: AsyncRedisClient,
        *,
        keys: RedisKeys,
        policy: CsatPolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._policy = policy
        self._clock = clock
        self._claim = redis.register_script(CLAIM)
        self._forget = redis.register_script(FORGET)
        self._ask = redis.register_script(ASK)
        self._record = redis.register_script(RECORD)

    @property
    def policy(self) -> CsatPolicy:
        """When questions are asked."""
        return self._policy

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def _ttl_seconds(self) -> int:
        return max(QUESTION_TTL_SECONDS, int(self._policy.min_interval_seconds) + 1)

    async def answered(self, conversation_key: str) -> None:
        """The bot answered: the question is due after the idle time (only the last counts).

        Private Telegram chats only; never raises (the answer went out either way).
        """
        if not _private(conversation_key):
            return
        due = self._now_ms() + int(self._policy.after_idle_seconds * 1000)
        try:
            await self._redis.zadd(self._keys.csat_due, {conversation_key: due})
        except (RedisError, OSError) as error:
            logger.warning("CSAT not scheduled: Redis unavailable (%s)", type(error).__name__)

    async def handoff_closed(self, conversation_key: str) -> None:
        """A handoff ended: a person answered; the question is due now. Never raises."""
        if not _private(conversation_key):
            return
        csat = self._keys.conversation(conversation_key).csat
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(csat, "handed", "1")
                pipe.expire(csat, self._ttl_seconds)
                await pipe.execute()
            await self._redis.zadd(self._keys.csat_due, {conversation_key: self._now_ms()})
        except (RedisError, OSError) as error:
            logger.warning("CSAT not scheduled: Redis unavailable (%s)", type(error).__name__)

    async def claim(self, retry_seconds: float, limit: int = 100) -> list[tuple[str, int]]:
        """Due conversations, each with the score it now has (moved on by ``retry_seconds``)."""
        reply = await self._claim(
            keys=[self._keys.csat_due],
            args=[self._now_ms(), max(1, int(retry_seconds * 1000)), limit],
        )
        moved = int(_text(reply[0]))
        return [(_text(member), moved) for member in reply[1:]]

    async def forget(self, conversation_key: str, claimed_ms: int) -> None:
        """Not to be asked (handed off, blocked, asked recently): off the schedule, unless a
        newer answer rescheduled it meanwhile."""
        await self._forget(keys=[self._keys.csat_due], args=[conversation_key, claimed_ms])

    async def still_due(self, conversation_key: str, claimed_ms: int) -> bool:
        """Whether the schedule still holds the score the question's job was claimed with."""
        score = await self._redis.zscore(self._keys.csat_due, conversation_key)
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
        reply = await self._ask(
            keys=[self._keys.conversation(conversation_key).csat],
            args=[
                self._now_ms(),
                int(self._policy.min_interval_seconds * 1000),
                question_id,
                session.session_id if session is not None else "",
                session.turn_count if session is not None else 0,
                self._ttl_seconds,
            ],
        )
        await self.forget(conversation_key, claimed_ms)
        if _text(reply[0]) == "recent":
            return None
        return Question(
            question_id=question_id,
            answered_by=_answered_by(_text(reply[1])),
            turns=int(_text(reply[2]) or "0"),
        )

    async def record(
        self, conversation_key: str, question_id: str, score: int, job_id: str
    ) -> PressResult:
        """Record the press once (the first press of the open question counts)."""
        reply = await self._record(
            keys=[self._keys.conversation(conversation_key).csat],
            args=[question_id, score, job_id],
        )
        verdict = _text(reply[0])
        if verdict == "unknown":
            return PressResult(verdict="unknown")
        turns, recorded = _text(reply[2]), _text(reply[3])
        return PressResult(
            verdict="recorded" if verdict == "recorded" else "again",
            answered_by=_answered_by(_text(reply[1])),
            turns=int(turns) if turns.isdigit() else None,
            score=int(recorded) if recorded.isdigit() else None,
        )


async def press_state(
    redis: AsyncRedisClient, keys: RedisKeys, conversation_key: str, question_id: str
) -> Literal["open", "answered", "closed"]:
    """What a press on ``question_id`` will find (intake's prediction; the worker decides)."""
    current, score = await redis.hmget(keys.conversation(conversation_key).csat, ["q", "score"])
    if current is None or _text(current) != question_id:
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


def _text(value: bytes | str | int) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return str(value)
