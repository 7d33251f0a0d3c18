"""Sessions in Redis: one hash per conversation, a lease lock, Lua for atomic steps.

Keys of one conversation share the hash tag ``{<conversation>}`` so that every
script below touches one cluster slot. A turn costs two round trips here:
``acquire`` (lease + load, one script) and ``commit`` (version check + save +
TTL + release, one script).
"""

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from time import monotonic

from pydantic import ValidationError
from redis.exceptions import RedisError

from bot.log_context import chat_label
from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import ConversationKeys, RedisKeys
from bot.sessions.models import ConversationSession
from bot.sessions.store import (
    JobCompletion,
    LockedSession,
    SessionConflictError,
    SessionLeaseLostError,
    SessionLockTimeoutError,
    SessionStoreUnavailableError,
)

logger = logging.getLogger(__name__)

# Take the lease; if it is ours, return the stored version and data in the same trip.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local stored = redis.call('HMGET', KEYS[2], 'v', 'd')
  return {1, stored[1] or '', stored[2] or ''}
end
return {0, redis.call('PTTL', KEYS[1])}
"""

# Save only over the version we loaded (a lost lease never overwrites a newer session).
# KEYS: session, lease, queue, outbox, failed streak.
# ARGV: token, version, new version, data, ttl, job ('' for none), job id, outbox entry,
#       release the lease (0/1), the lease must be ours (0/1), answered (0/1),
#       handoff state ('' while the bot answers).
# Returns 1 saved, 2 saved before (a repeated run), 0 version changed, -1 lease not ours,
# -2 the job is not at the head of the queue.
_COMMIT = """
if ARGV[7] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[7]) == 1 then return 2 end
local stored = redis.call('HMGET', KEYS[1], 'v', 'd')
if stored[1] == ARGV[3] and stored[2] == ARGV[4] then return 2 end
local ours = redis.call('GET', KEYS[2]) == ARGV[1]
if ARGV[10] == '1' and not ours then return -1 end
if (stored[1] or '') ~= ARGV[2] then
  if ours and ARGV[9] == '1' then redis.call('DEL', KEYS[2]) end
  return 0
end
if ARGV[6] ~= '' and redis.call('LINDEX', KEYS[3], 0) ~= ARGV[6] then return -2 end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'd', ARGV[4])
if ARGV[12] ~= '' then
  redis.call('HSET', KEYS[1], 'h', ARGV[12])
else
  redis.call('HDEL', KEYS[1], 'h')
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
if ARGV[6] ~= '' then
  redis.call('LPOP', KEYS[3])
  redis.call('HSET', KEYS[4], ARGV[7], ARGV[8])
  redis.call('EXPIRE', KEYS[4], ARGV[5])
end
if ARGV[11] == '1' then redis.call('DEL', KEYS[5]) end
if ours and ARGV[9] == '1' then redis.call('DEL', KEYS[2]) end
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
        keys: RedisKeys,
        ttl_seconds: int,
        archive_ttl_seconds: int,
    ) -> None:
        self._client = client
        self._keys = keys
        self._ttl = ttl_seconds
        self._archive_ttl = archive_ttl_seconds
        self._acquire = client.register_script(_ACQUIRE)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._move_aside = client.register_script(_MOVE_ASIDE)

    def keys(self, conversation_key: str) -> ConversationKeys:
        """The keys of one conversation (one hash tag)."""
        return self._keys.conversation(conversation_key)

    async def acquire(
        self, conversation_key: str, *, lease_seconds: float, wait_seconds: float
    ) -> LockedSession:
        """Take the lease (waiting at most ``wait_seconds``) and load the session."""
        token = secrets.token_hex(16)
        keys = [self.keys(conversation_key).lease, self.keys(conversation_key).session]
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

    async def held(
        self, conversation_key: str, token: str, raw_version: str, raw_data: str
    ) -> LockedSession:
        """A session read by a worker that already holds the lease ``token``."""
        return await self._loaded(conversation_key, token, raw_version, raw_data)

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
        except (ValidationError, ValueError) as error:
            quarantine = self.keys(conversation_key).quarantine(_stamp())
            # Neither the traceback nor the key: the error quotes the stored messages,
            # and the key holds the chat id.
            logger.warning(
                "Session of %s is unreadable (%s); moved to its quarantine, "
                "the conversation starts fresh",
                chat_label(conversation_key),
                type(error).__name__,
            )
            await self._run_move_aside(conversation_key, quarantine, token="")
            return LockedSession(conversation_key, token, None, "")
        return LockedSession(conversation_key, token, session, version)

    async def commit(
        self,
        locked: LockedSession,
        session: ConversationSession,
        *,
        completion: JobCompletion | None = None,
        release: bool = True,
    ) -> None:
        """Save over the loaded version, refresh the TTL and release, in one trip.

        With ``completion`` (a worker's turn) the lease must still be ours, and the
        same script pops the job from the chat's queue and stores its reply in the
        outbox (and, for an answered job, ends the run of failed turns). The
        handoff state is also kept in a field of its own (``h``) for intake. Safe
        to run twice: a repeated run finds its own save and succeeds.
        """
        new_version = str(int(locked.version or "0") + 1)
        keys = self.keys(locked.conversation_key)
        args: list[str | int] = [
            locked.token,
            locked.version,
            new_version,
            session.model_dump_json(),
            self._ttl,
            completion.job_raw if completion else "",
            completion.job_id if completion else "",
            completion.outbox_entry if completion else "",
            1 if release else 0,
            1 if completion or not release else 0,
            1 if completion and completion.answered else 0,
            "" if session.handoff == "bot" else session.handoff,
        ]
        try:
            saved = int(
                await self._commit(
                    keys=[keys.session, keys.lease, keys.queue, keys.outbox, keys.failed_streak],
                    args=args,
                )
            )
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error
        if saved == -1:
            raise SessionLeaseLostError(f"the lease of {locked.conversation_key} is lost")
        if saved <= 0:
            raise SessionConflictError(
                f"session of {locked.conversation_key} changed since version {locked.version!r}"
            )

    async def release(self, locked: LockedSession) -> None:
        """Give the lease back (only if it is still ours)."""
        try:
            await self._release(
                keys=[self.keys(locked.conversation_key).lease], args=[locked.token]
            )
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error

    async def reload(self, conversation_key: str, token: str) -> LockedSession:
        """Read the session again under a lease this worker already holds."""
        keys = self.keys(conversation_key)
        try:
            version, data = await self._client.hmget(keys.session, ["v", "d"])
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error
        return await self._loaded(conversation_key, token, version or b"", data or b"")

    async def archive(self, locked: LockedSession, *, release: bool = True) -> None:
        """Keep the session under an archive key for staff (and release the lease)."""
        session_id = locked.session.session_id if locked.session else _stamp()
        archive = self.keys(locked.conversation_key).archive(session_id)
        await self._run_move_aside(
            locked.conversation_key, archive, token=locked.token if release else ""
        )

    async def _run_move_aside(self, conversation_key: str, target: str, token: str) -> None:
        keys = [
            self.keys(conversation_key).session,
            target,
            self.keys(conversation_key).lease,
        ]
        try:
            await self._move_aside(keys=keys, args=[token, self._archive_ttl])
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error

    async def load(self, conversation_key: str) -> ConversationSession | None:
        """Read the session without the lease; an unreadable one reads as ``None``."""
        try:
            raw = await self._client.hget(self.keys(conversation_key).session, "d")
        except RedisError as error:
            raise SessionStoreUnavailableError("session storage is unreachable") from error
        if not raw:
            return None
        try:
            return ConversationSession.model_validate_json(raw)
        except ValidationError as error:
            # Read-only here: the next turn moves it to quarantine. Where it failed, not its text.
            logger.warning(
                "Session of %s is unreadable (%d problem(s)); read as empty",
                chat_label(conversation_key),
                error.error_count(),
            )
            return None


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
