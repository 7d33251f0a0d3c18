"""Which staff topic is whose, and the failed turns that may call a person in.

The topic id is kept under the customer's hash tag; the reverse mapping (topic
-> conversation) under the staff chat's tag, because intake looks it up from a
topic message. Both name the staff chat: a thread id is a message id of its
group, so after ``STAFF_CHAT_ID`` changes another customer's new topic may
have the id of this customer's old one. The two are written one after the
other (different slots): reverse first, so a forward mapping never points at
a topic intake cannot map back. Every script here is safe to run twice.
"""

from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import RedisKeys

_FAILED_TTL_SECONDS = 7 * 24 * 3600
_FAILED_KEPT = 5

# KEYS: failed list, streak set. ARGV: turn id, kept, ttl. Returns the streak length.
_RECORD_FAILURE = """
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return redis.call('SCARD', KEYS[2])
"""


# KEYS: open handoffs. ARGV: conversation, the score seen, the new score.
# Moves the score only from the one seen (a later activity wins); returns 1 when the
# score is the new one now (also on a second run), 0 when something else moved it.
_POSTPONE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
  return 1
end
if tonumber(score) == tonumber(ARGV[3]) then return 1 end
return 0
"""


class TopicDirectory:
    """Topics of customers in the staff chat, and their recent failed turns."""

    def __init__(self, redis: AsyncRedisClient, *, keys: RedisKeys, staff_chat_id: int) -> None:
        self._redis = redis
        self._keys = keys
        self._staff_chat_id = staff_chat_id
        self._record = redis.register_script(_RECORD_FAILURE)
        self._postpone = redis.register_script(_POSTPONE)

    @property
    def staff_chat_id(self) -> int:
        """The staff forum supergroup."""
        return self._staff_chat_id

    async def topic_of(self, conversation_key: str) -> int | None:
        """The customer's topic in this staff chat, ``None`` before the first handoff there."""
        keys = self._keys.conversation(conversation_key)
        raw = await self._redis.get(keys.topic_in(self._staff_chat_id))
        if raw is not None:
            return int(raw)
        # A topic mapped before mappings named their group: it is this group's only
        # if this group's reverse mapping says so (else it was another group's).
        legacy = await self._redis.get(keys.topic)
        if legacy is None or await self.conversation_of(int(legacy)) != conversation_key:
            return None
        await self._redis.set(keys.topic_in(self._staff_chat_id), legacy)
        return int(legacy)

    async def conversation_of(self, thread_id: int) -> str | None:
        """The customer conversation a topic belongs to, ``None`` for any other topic."""
        raw = await self._redis.get(self._keys.staff_topic(self._staff_chat_id, thread_id))
        if raw is None:
            return None
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    async def bind(self, conversation_key: str, thread_id: int, *, old: int | None) -> None:
        """Make ``thread_id`` the customer's topic; a replaced topic maps to nobody any more."""
        await self._redis.set(
            self._keys.staff_topic(self._staff_chat_id, thread_id), conversation_key
        )
        await self._redis.set(
            self._keys.conversation(conversation_key).topic_in(self._staff_chat_id), str(thread_id)
        )
        if old is not None and old != thread_id:
            await self._redis.delete(self._keys.staff_topic(self._staff_chat_id, old))

    async def touch(self, conversation_key: str, at_ms: int) -> None:
        """A handed-off conversation had activity at ``at_ms``."""
        await self._redis.zadd(
            self._keys.open_handoffs(self._staff_chat_id), {conversation_key: at_ms}
        )

    async def ended(self, conversation_key: str) -> None:
        """The conversation is back with the bot: no idle check for it."""
        await self._redis.zrem(self._keys.open_handoffs(self._staff_chat_id), conversation_key)

    async def postpone(self, conversation_key: str, *, due_ms: int, until_ms: int) -> bool:
        """Count the idle time from ``until_ms`` instead, unless activity moved it off ``due_ms``.

        ``True`` when the score is ``until_ms`` now.
        """
        moved = await self._postpone(
            keys=[self._keys.open_handoffs(self._staff_chat_id)],
            args=[conversation_key, due_ms, until_ms],
        )
        return int(moved) == 1

    async def idle(self, before_ms: int, limit: int = 100) -> list[tuple[str, int]]:
        """Handed-off conversations with no activity since ``before_ms``, oldest first.

        The score is the last activity, or a later moment a sweep postponed it to.
        """
        rows = await self._redis.zrangebyscore(
            self._keys.open_handoffs(self._staff_chat_id),
            "-inf",
            before_ms,
            start=0,
            num=limit,
            withscores=True,
        )
        found: list[tuple[str, int]] = []
        for row in rows:
            key, score = row[0], row[1]
            found.append((key.decode() if isinstance(key, bytes) else str(key), int(score)))
        return found

    async def record_failure(self, conversation_key: str, turn_id: str) -> int:
        """Remember a failed turn; returns how many failed in a row."""
        keys = self._keys.conversation(conversation_key)
        streak = await self._record(
            keys=[keys.failed, keys.failed_streak],
            args=[turn_id, _FAILED_KEPT, _FAILED_TTL_SECONDS],
        )
        return int(streak)

    async def recent_failures(self, conversation_key: str) -> list[str]:
        """Incident codes of the latest failed turns, newest first."""
        raw = await self._redis.lrange(self._keys.conversation(conversation_key).failed, 0, -1)
        return [item.decode() if isinstance(item, bytes) else str(item) for item in raw]
