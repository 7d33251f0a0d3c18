"""The mark that a confirmed action's call has started: at most once, whatever crashes.

Before a shop's tool is called for a confirmed action, the action is marked as
executing under the chat's hash tag (``SET NX``; setting it twice is harmless).
A worker that takes the press again after the one that ran it died finds the
mark: the call may have reached the shop, so it is not sent again unless the
tool is trusted to be idempotent.
"""

from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys


class ActionRuns:
    """The executing marks of confirmed actions (one key per action, kept ``ttl_seconds``)."""

    def __init__(self, redis: AsyncRedisClient, keys: RedisKeys, *, ttl_seconds: int) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = ttl_seconds

    async def begin(self, conversation_key: str, action_id: str) -> bool:
        """Mark ``action_id`` as executing; ``False`` when an earlier attempt marked it."""
        key = self._keys.conversation(conversation_key).action_run(action_id)
        marked = await self._redis.set(key, "executing", nx=True, ex=self._ttl)
        return bool(marked)
