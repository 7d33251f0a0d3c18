"""Sessions in Redis: one hash per conversation, a lease lock, Lua for atomic steps.

Keys of one conversation share the hash tag ``{<conversation>}`` so that every
script below touches one cluster slot. A turn costs two round trips here:
``acquire`` (lease + load, one script) and ``commit`` (version check + save +
TTL + release, one script).
"""

import asyncio
import logging
import re
import secrets
from datetime import UTC, datetime
from time import monotonic

from pydantic import ValidationError
from redis.exceptions import RedisError

from bot.redis_connection import AsyncRedisClient
from bot.sessions.models import ConversationSession
from bot.sessions.store import (
    LockedSession,
    SessionConflictError,
    SessionLockTimeoutError,
    SessionStoreUnavailableError,
)

logger = logging.getLogger(__name__)

_KEY_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")

# Take the lease; if it is ours, return the stored version and data in the same trip.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local stored = redis.call('HMGET', KEYS[2], 'v', 'd')
  return {1, stored[1] or '', stored[2] or ''}
end
return {0, redis.call('PTTL', KEYS[1])}
"""

# Save only over the version we loaded (a lost lease never overwrites a newer session).
_COMMIT = """
local ours = redis.call('GET', KEYS[2]) == ARGV[1]
if (redis.call('HGET', KEYS[1], 'v') or '') ~= ARGV[2] then
  if ours then redis.call('DEL', KEYS[2]) end
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'd', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
if ours then redis.call('DEL', KEYS[2]) end
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# Move the session (or a corrupt entry) aside under its own TTL.
_MOVE_ASIDE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
if ARGV[1] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1
"""


class RedisSessionStore:
    """The :class:`~bot.sessions.store.SessionStore` over ``redis.asyncio``."""

    def __init__(
        self,
        client: AsyncRedisClient,
        key_prefix: str,
        ttl_seconds: int,
        archive_ttl_seconds: int,
    ) -> None:
        self._client = client
        self._prefix = key_prefix
        self._ttl = ttl_seconds
        self._archive_ttl = archive_ttl_seconds
        self._acquire = client.register_script(_ACQUIRE)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._move_aside = client.register_script(_MOVE_ASIDE)

    def key(self, conversation_key: str, suffix: str) -> str:
        """``{prefix}:{<conversation>}:<suffix>``: one hash tag per conversation."""
        if _KEY_PATTERN.fullmatch(conversation_key) is None:
            raise ValueError(f"invalid conversation key {conversation_key!r}")
        return f"{self._prefix}:{{{conversation_key}}}:{suffix}"

    async def acquire(
        self, conversation_key: str, *, lease_seconds: float, wait_seconds: float
    ) -> LockedSession:
        """Take the lease (waiting at most ``wait_seconds``) and load the session."""
        token = secrets.token_hex(16)
        keys = [self.key(conversation_key, "lock"), self.key(conversation_key, "session")]
        lease_ms = max(1, int(lease_seconds * 1000))
        deadline = monotonic() + wait_seconds
        pause = 0.005
        while True:
            try:
                reply = await self._acquire(keys=keys, args=[token, lease_ms])
            except RedisError as error:
                raise SessionStoreUnavailableError("session storage is unreachable") from error
            if int(reply[0]) == 1:
                return await self._loaded(conversation_key, token, reply[1], reply[2])
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise SessionLockTimeoutError(
                    f"conversation {conversation_key} stayed locked for {wait_seconds} s"
                )
            # Back off, but never sleep past the lease's own expiry or the deadline.
            lease_left = max(int(reply[1]), 1) / 1000
            await asyncio.sleep(min(pause, lease_left, remaining))
            pause = min(pause * 2, 0.1)

    async def _loaded(
        self, conversation_key: str, token: str, raw_version: bytes | str, raw_data: bytes | str
    ) -> LockedSession:
        version = raw_version.decode() if isinstance(raw_version, bytes) else raw_version
        if not raw_data:
            return LockedSession(conversation_key, token, None, version)
        try:
            session = ConversationSession.model_validate_json(raw_data)
            if not version.isdigit():
                raise ValueError(f"session version {version!r} is not a number")
        except (ValidationError, ValueError):
            quarantine = self.key(conversation_key, f"quarantine:{_stamp()}")
            logger.warning(
                "Session of %s is unreadable; moved to %s, the conversation starts fresh",
                conversation_key,
                quarantine,
                exc_info=True,
            )
            await self._run_move_aside(conversation_key, quarantine, token="")
            return LockedSession(conversation_key, token, None, "")
        return LockedSession(conversation_key, token, session, version)

    async def commit(self, locked: LockedSession, session: ConversationSession) -> None:
        """Save over the loaded version, refresh the TTL and release, in one trip."""
        new_version = str(int(locked.version or "0") + 1)
        keys = [
            self.key(locked.conversation_key, "session"),
            self.key(locked.conversation_key, "lock"),
        ]
        args: list[str | int] = [
            locked.token,
            locked.version,
            new_version,
            session.model_dump_json(),
            self._ttl,
        ]
        try:
            saved = await self._commit(keys=keys, args=args)
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error
        if int(saved) != 1:
            raise SessionConflictError(
                f"session of {locked.conversation_key} changed since version {locked.version!r}"
            )

    async def release(self, locked: LockedSession) -> None:
        """Give the lease back (only if it is still ours)."""
        try:
            await self._release(
                keys=[self.key(locked.conversation_key, "lock")], args=[locked.token]
            )
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error

    async def archive(self, locked: LockedSession) -> None:
        """Keep the session under an archive key for staff and release the lease."""
        session_id = locked.session.session_id if locked.session else _stamp()
        archive = self.key(locked.conversation_key, f"archive:{session_id}")
        await self._run_move_aside(locked.conversation_key, archive, token=locked.token)

    async def _run_move_aside(self, conversation_key: str, target: str, token: str) -> None:
        keys = [
            self.key(conversation_key, "session"),
            target,
            self.key(conversation_key, "lock"),
        ]
        try:
            await self._move_aside(keys=keys, args=[token, self._archive_ttl])
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error

    async def load(self, conversation_key: str) -> ConversationSession | None:
        """Read the session without the lease; an unreadable one reads as ``None``."""
        try:
            raw = await self._client.hget(self.key(conversation_key, "session"), "d")
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error
        if not raw:
            return None
        try:
            return ConversationSession.model_validate_json(raw)
        except ValidationError:
            return None


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
