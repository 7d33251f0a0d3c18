"""The mark that a confirmed action's call has started: at most once, whatever crashes.

Before a shop's tool is called for a confirmed action, the action is marked as
executing under the chat's hash tag (``SET NX GET`` with the attempt's own token:
a command re-sent after a lost reply finds its own token and still counts as the
first, so the mark is safe to set twice).
A worker that takes the press again after the one that ran it died finds the
mark: the call may have reached the shop, so it is not sent again unless the
tool is trusted to be idempotent.
"""

from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import RedisKeys


class ActionRuns:
    """The executing marks of confirmed actions (one key per action, kept ``ttl_seconds``)."""

    def __init__(self, redis: AsyncRedisClient, keys: RedisKeys, *, ttl_seconds: int) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl = ttl_seconds

    async def begin(self, conversation_key: str, action_id: str, token: str) -> bool:
        """Mark ``action_id`` as executing by attempt ``token``; ``False`` when an earlier
        attempt (another token) marked it."""
        key = self._keys.conversation(conversation_key).action_run(action_id)
        earlier = await self._redis.set(key, token, nx=True, ex=self._ttl, get=True)
        return earlier is None or text_of(earlier) == token

    async def begun(self, conversation_key: str, action_id: str) -> bool:
        """Whether a call of ``action_id`` may have started (its mark is there)."""
        key = self._keys.conversation(conversation_key).action_run(action_id)
        return bool(await self._redis.exists(key))
