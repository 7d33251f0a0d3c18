"""Intake: an accepted update is in Redis before Telegram is told it arrived.

One script under the chat's hash tag de-duplicates the update id, applies
flood control and the daily turn budget, and appends the job to the chat's
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
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from bot.queue.jobs import Notice, QueuedJob, turn_id_for
from bot.queue.work_stream import WorkStream
from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import RedisKeys

logger = logging.getLogger(__name__)

SEEN_TTL_SECONDS = 24 * 3600
_DAY_COUNTER_TTL_SECONDS = 2 * 24 * 3600

# A token bucket in hash KEYS[bucket]: 'ok' takes a token; over it, 'rate_warn' the
# first time (until a token is taken again), then 'rate_quiet'.
_BUCKET_LUA = """
local function take_token(bucket, burst, interval)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local state = redis.call('HMGET', bucket, 'tokens', 'ts', 'warned')
  local tokens = tonumber(state[1])
  local ts = tonumber(state[2])
  if tokens == nil or ts == nil then
    tokens = burst
    ts = now
  end
  tokens = math.min(burst, tokens + math.max(0, now - ts) / interval)
  local verdict = 'ok'
  if tokens < 1 then
    verdict = 'rate_quiet'
    if state[3] ~= '1' then verdict = 'rate_warn' end
    redis.call('HSET', bucket, 'tokens', tostring(tokens), 'ts', tostring(now), 'warned', '1')
  else
    redis.call('HSET', bucket, 'tokens', tostring(tokens - 1), 'ts', tostring(now), 'warned', '0')
  end
  redis.call('PEXPIRE', bucket, math.ceil(burst * interval) + 1000)
  return verdict
end
"""

# KEYS: seen, queue, lease, flood bucket, day counter, session, queue-full mark.
# ARGV: seen ttl, job, rate-notice job, daily-notice job, check flood (0/1),
#       counts a turn (0/1), burst, interval ms, daily limit, day counter ttl,
#       queue cap (0: none), full-notice job ('' : nobody to tell), full-mark ttl.
# Returns {verdict, signal}: signal is 1 when the queue has work and no worker holds it.
# A full queue takes nothing more (its notice aside, once per fill: the mark is
# cleared when intake finds room again); the flood bucket is not touched then.
_INTAKE = (
    _BUCKET_LUA
    + """
local function needs_signal()
  if redis.call('LLEN', KEYS[2]) > 0 and redis.call('EXISTS', KEYS[3]) == 0 then return 1 end
  return 0
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return {'duplicate', needs_signal()}
end
local cap = tonumber(ARGV[11])
if cap > 0 then
  if redis.call('LLEN', KEYS[2]) >= cap then
    if ARGV[12] ~= '' and redis.call('SET', KEYS[7], '1', 'NX', 'EX', ARGV[13]) then
      redis.call('RPUSH', KEYS[2], ARGV[12])
      return {'full_warn', needs_signal()}
    end
    return {'full_quiet', needs_signal()}
  end
  redis.call('DEL', KEYS[7])
end
local verdict = 'ok'
if ARGV[5] == '1' then
  verdict = take_token(KEYS[4], tonumber(ARGV[7]), tonumber(ARGV[8]))
  -- A message to a person (a handoff) is no model turn: the daily limit skips it.
  if verdict == 'ok' and ARGV[6] == '1' and redis.call('HEXISTS', KEYS[6], 'h') == 0 then
    local used = redis.call('INCR', KEYS[5])
    if used == 1 then redis.call('EXPIRE', KEYS[5], tonumber(ARGV[10])) end
    local limit = tonumber(ARGV[9])
    if used == limit + 1 then
      verdict = 'daily_warn'
    elseif used > limit then
      verdict = 'daily_quiet'
    end
  end
end
if verdict == 'ok' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
elseif verdict == 'rate_warn' then
  redis.call('RPUSH', KEYS[2], ARGV[3])
elseif verdict == 'daily_warn' then
  redis.call('RPUSH', KEYS[2], ARGV[4])
end
return {verdict, needs_signal()}
"""
)

# A staff member's message, before it joins the customer's queue: their bucket in
# the staff group (one for all the topics they write in).
# KEYS: the update's mark in the staff group, the member's bucket there.
# ARGV: mark ttl, burst, interval ms.
# The verdict is kept in the mark: a second run answers the first run's verdict.
_STAFF_FLOOD = (
    _BUCKET_LUA
    + """
local prior = redis.call('GET', KEYS[1])
if prior then return prior end
local verdict = take_token(KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]))
redis.call('SET', KEYS[1], verdict, 'EX', ARGV[1])
return verdict
"""
)


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
    """A burst of ``burst`` messages, then one per ``interval_seconds``; ``daily_turns`` a day."""

    burst: int
    interval_seconds: float
    daily_turns: int


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


class Intake:
    """Accepts updates into their chats' queues; raises ``RedisError`` when Redis is down."""

    def __init__(
        self,
        redis: AsyncRedisClient,
        *,
        keys: RedisKeys,
        work: WorkStream,
        limits: FloodLimits,
        staff_limits: FloodLimits | None = None,
        queue_max: int = 0,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        """``staff_limits``: staff topic messages per member (none without);
        ``queue_max``: the most jobs a chat's queue holds (0: no cap)."""
        self._script = redis.register_script(_INTAKE)
        self._staff_script = redis.register_script(_STAFF_FLOOD)
        self._keys = keys
        self._work = work
        self._limits = limits
        self._staff_limits = staff_limits
        self._queue_max = queue_max
        self._clock_ms = clock_ms or _now_ms

    async def accept(self, update: IncomingUpdate) -> IntakeVerdict:
        """Queue ``update`` in its chat (once, whatever the number of deliveries)."""
        if update.staff is not None:
            staff_verdict = await self._staff_flood(update.update_id, update.staff)
            if staff_verdict is not IntakeVerdict.QUEUED:
                if staff_verdict is IntakeVerdict.RATE_WARN:
                    logger.warning(
                        "Staff message %s over the flood limit; dropped (and the next ones "
                        "until the limit allows)",
                        update.update_id,
                    )
                return staff_verdict
        conversation = self._keys.conversation(update.conversation_key)
        day = datetime.now(UTC).strftime("%Y%m%d")
        user = update.user_id if update.user_id is not None else 0
        job = QueuedJob(
            job_id=str(update.update_id),
            update_id=update.update_id,
            turn_id=turn_id_for(update.conversation_key, update.update_id),
            enqueued_ms=self._clock_ms(),
            chat_id=update.chat_id,
            update=dict(update.payload),
            notice=update.notice,
        )
        rate_notice = job.model_copy(update={"notice": Notice.RATE_LIMITED, "update": {}})
        daily_notice = job.model_copy(update={"notice": Notice.DAILY_LIMIT, "update": {}})
        # Only the customer's own message is told the queue is full (not a staff one's).
        full_notice = (
            job.model_copy(update={"notice": Notice.QUEUE_FULL, "update": {}}).model_dump_json()
            if update.staff is None
            else ""
        )
        capped = update.capped and update.notice is not Notice.HANDOFF_IDLE
        reply = await self._script(
            keys=[
                conversation.seen(update.update_id),
                conversation.queue,
                conversation.lease,
                conversation.flood(user),
                conversation.daily_turns(user, day),
                conversation.session,
                conversation.queue_full,
            ],
            args=[
                SEEN_TTL_SECONDS,
                job.model_dump_json(),
                rate_notice.model_dump_json(),
                daily_notice.model_dump_json(),
                1 if update.user_id is not None else 0,
                1 if update.counts_turn else 0,
                self._limits.burst,
                self._limits.interval_seconds * 1000,
                self._limits.daily_turns,
                _DAY_COUNTER_TTL_SECONDS,
                self._queue_max if capped else 0,
                full_notice,
                SEEN_TTL_SECONDS,
            ],
        )
        verdict = IntakeVerdict(_text(reply[0]))
        if int(reply[1]) == 1:
            await self._work.signal(update.conversation_key)
        if verdict is IntakeVerdict.DUPLICATE:
            logger.info("Update %s was already accepted; not queued again", update.update_id)
        elif verdict is not IntakeVerdict.QUEUED:
            logger.info("Update %s over a limit: %s", update.update_id, verdict.value)
        return verdict

    async def _staff_flood(self, update_id: int, sender: StaffSender) -> IntakeVerdict:
        """The staff member's bucket in the staff group (the same verdict on a redelivery)."""
        limits = self._staff_limits
        if limits is None:
            return IntakeVerdict.QUEUED
        reply = await self._staff_script(
            keys=[
                self._keys.staff_seen(sender.staff_chat_id, update_id),
                self._keys.staff_flood(sender.staff_chat_id, sender.user_id),
            ],
            args=[SEEN_TTL_SECONDS, limits.burst, limits.interval_seconds * 1000],
        )
        return IntakeVerdict(_text(reply))


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
