"""Which staff topic is whose, and the failed turns that may call a person in.

The topic id is kept under the customer's hash tag; the reverse mapping (topic
-> conversation) under the staff chat's tag, because intake looks it up from a
topic message. Both name the staff chat: a thread id is a message id of its
group, so after ``STAFF_CHAT_ID`` changes another customer's new topic may
have the id of this customer's old one. The two are written one after the
other (different slots): reverse first, so a forward mapping never points at
a topic intake cannot map back. Every script here is safe to run twice.
"""

from dataclasses import KW_ONLY, dataclass, field

from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.handoff import Postpone, RecordFailure

_FAILED_TTL_SECONDS = 7 * 24 * 3600
_FAILED_KEPT = 5
TOPIC_TTL_SECONDS = 30 * 24 * 3600
"""How long a topic mapping outlives the handoff's last activity (both directions).

Renewed by every handoff step; past it (the conversation's session is long gone by
then) the next handoff of the customer opens a new topic.
"""


@dataclass(eq=False)
class TopicDirectory:
    """Topics of customers in the staff chat (``staff_chat_id``, the staff forum
    supergroup), and their recent failed turns."""

    redis: AsyncRedisClient
    _: KW_ONLY
    keys: RedisKeys
    staff_chat_id: int
    _scripts: Scripts = field(init=False)

    def __post_init__(self) -> None:
        self._scripts = Scripts(self.redis)

    async def topic_of(self, conversation_key: str) -> int | None:
        """The customer's topic in this staff chat, ``None`` before the first handoff there."""
        keys = self.keys.conversation(conversation_key)
        raw = await self.redis.get(keys.topic_in(self.staff_chat_id))
        if raw is not None:
            return int(raw)
        # A topic mapped before mappings named their group: it is this group's only
        # if this group's reverse mapping says so (else it was another group's).
        legacy = await self.redis.get(keys.topic)
        if legacy is None or await self.conversation_of(int(legacy)) != conversation_key:
            return None
        await self.redis.set(keys.topic_in(self.staff_chat_id), legacy, ex=TOPIC_TTL_SECONDS)
        return int(legacy)

    async def conversation_of(self, thread_id: int) -> str | None:
        """The customer conversation a topic belongs to, ``None`` for any other topic."""
        raw = await self.redis.get(self.keys.staff_topic(self.staff_chat_id, thread_id))
        if raw is None:
            return None
        return text_of(raw)

    async def bind(self, conversation_key: str, thread_id: int, *, old: int | None) -> None:
        """Make ``thread_id`` the customer's topic; a replaced topic maps to nobody any more."""
        await self.redis.set(
            self.keys.staff_topic(self.staff_chat_id, thread_id),
            conversation_key,
            ex=TOPIC_TTL_SECONDS,
        )
        await self.redis.set(
            self.keys.conversation(conversation_key).topic_in(self.staff_chat_id),
            str(thread_id),
            ex=TOPIC_TTL_SECONDS,
        )
        if old is not None and old != thread_id:
            await self.redis.delete(self.keys.staff_topic(self.staff_chat_id, old))

    async def touch(self, conversation_key: str, at_ms: int) -> None:
        """A handed-off conversation had activity at ``at_ms``; its topic mapping is renewed."""
        await self.redis.zadd(
            self.keys.open_handoffs(self.staff_chat_id), {conversation_key: at_ms}
        )
        forward = self.keys.conversation(conversation_key).topic_in(self.staff_chat_id)
        thread = await self.redis.get(forward)
        if thread is None:
            return
        # Reverse first, as bind writes them: a forward mapping never outlives its reverse.
        await self.redis.expire(
            self.keys.staff_topic(self.staff_chat_id, int(thread)), TOPIC_TTL_SECONDS
        )
        await self.redis.expire(forward, TOPIC_TTL_SECONDS)

    async def ended(self, conversation_key: str) -> None:
        """The conversation is back with the bot: no idle check for it."""
        await self.redis.zrem(self.keys.open_handoffs(self.staff_chat_id), conversation_key)

    async def postpone(self, conversation_key: str, *, due_ms: int, until_ms: int) -> bool:
        """Count the idle time from ``until_ms`` instead, unless activity moved it off ``due_ms``.

        ``True`` when the score is ``until_ms`` now.
        """
        moved = await self._scripts.run(
            Postpone(
                open_handoffs=self.keys.open_handoffs(self.staff_chat_id),
                conversation_key=conversation_key,
                seen_ms=due_ms,
                new_ms=until_ms,
            )
        )
        return int(moved) == 1

    async def idle(self, before_ms: int, limit: int = 100) -> list[tuple[str, int]]:
        """Handed-off conversations with no activity since ``before_ms``, oldest first.

        The score is the last activity, or a later moment a sweep postponed it to.
        """
        rows = await self.redis.zrangebyscore(
            self.keys.open_handoffs(self.staff_chat_id),
            "-inf",
            before_ms,
            start=0,
            num=limit,
            withscores=True,
        )
        found: list[tuple[str, int]] = []
        for row in rows:
            key, score = row[0], row[1]
            found.append((text_of(key), int(score)))
        return found

    async def record_failure(self, conversation_key: str, turn_id: str) -> int:
        """Remember a failed turn; returns how many failed in a row."""
        streak = await self._scripts.run(
            RecordFailure(
                chat=self.keys.conversation(conversation_key),
                turn_id=turn_id,
                kept=_FAILED_KEPT,
                ttl=_FAILED_TTL_SECONDS,
            )
        )
        return int(streak)

    async def recent_failures(self, conversation_key: str) -> list[str]:
        """Incident codes of the latest failed turns, newest first."""
        raw = await self.redis.lrange(self.keys.conversation(conversation_key).failed, 0, -1)
        return [text_of(item) for item in raw]
