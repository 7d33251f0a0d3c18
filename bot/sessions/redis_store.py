"""Sessions in Redis: one hash per conversation, a lease lock, Lua for atomic steps.

Keys of one conversation share the hash tag ``{<conversation>}`` so that every
script touches one cluster slot. A turn costs two round trips here:
``acquire`` (lease + load, one script) and ``commit`` (version check + save +
TTL + release, one script). The scripts are in :mod:`bot.storage.scripts.chat`
(``release`` is the worker's own), and the lease and version rules they keep
are stated once in :mod:`bot.storage.scripts`.
"""

import logging
import secrets
from datetime import UTC, datetime
from time import monotonic
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError

from bot.ops.log_context import chat_label
from bot.ops.retry import Backoff, RetryCounter, retrying
from bot.sessions.models import ConversationSession
from bot.sessions.store import (
    JobCompletion,
    LockedSession,
    SessionConflictError,
    SessionLeaseLostError,
    SessionLockTimeoutError,
    SessionStoreUnavailableError,
)
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import ConversationKeys, RedisKeys
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.chat import Acquire, Commit, MoveAside, Release

logger = logging.getLogger(__name__)


_LEASE_WAIT = Backoff(first_seconds=0.005, longest_seconds=0.1)


class _LeaseHeldError(Exception):
    """Another turn holds the lease (for ``lease_left_seconds`` more at most)."""

    def __init__(self, lease_left_seconds: float) -> None:
        super().__init__(f"the lease is held for {lease_left_seconds} s more")
        self.lease_left_seconds = lease_left_seconds


class RedisSessionStore:
    """The :class:`~bot.sessions.store.SessionStore` over ``redis.asyncio``."""

    def __init__(
        self,
        client: AsyncRedisClient,
        keys: RedisKeys,
        ttl_seconds: int,
        archive_ttl_seconds: int,
        *,
        retries: RetryCounter | None = None,
    ) -> None:
        """``retries``: where waits for a held lease are counted (the metrics)."""
        self._client = client
        self._keys = keys
        self._ttl = ttl_seconds
        self._archive_ttl = archive_ttl_seconds
        self._scripts = Scripts(client)
        self._retries = retries

    def keys(self, conversation_key: str) -> ConversationKeys:
        """The keys of one conversation (one hash tag)."""
        return self._keys.conversation(conversation_key)

    async def acquire(
        self, conversation_key: str, *, lease_seconds: float, wait_seconds: float
    ) -> LockedSession:
        """Take the lease (waiting at most ``wait_seconds``) and load the session."""
        token = secrets.token_hex(16)
        call = Acquire(
            chat=self.keys(conversation_key),
            token=token,
            lease_ms=max(1, int(lease_seconds * 1000)),
        )
        deadline = monotonic() + wait_seconds

        async def take() -> list[Any]:
            try:
                reply: list[Any] = await self._scripts.run(call)
            except RedisError as error:
                raise SessionStoreUnavailableError("session storage is unreachable") from error
            if int(reply[0]) == 0:
                raise _LeaseHeldError(max(int(reply[1]), 1) / 1000)
            return reply

        def decide(error: Exception, attempt: int) -> float:
            if not isinstance(error, _LeaseHeldError):
                raise error
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise SessionLockTimeoutError(
                    f"conversation {conversation_key} stayed locked for {wait_seconds} s"
                )
            # Back off, but never sleep past the lease's own expiry or the deadline.
            return min(_LEASE_WAIT.pause(attempt), error.lease_left_seconds, remaining)

        reply = await retrying("session_lease_wait", take, decide=decide, counter=self._retries)
        return await self._loaded(conversation_key, token, reply[1], reply[2])

    async def held(
        self,
        conversation_key: str,
        token: str,
        raw_version: str,
        raw_data: str,
        *,
        parsed: ConversationSession | None = None,
    ) -> LockedSession:
        """A session read by a worker that already holds the lease ``token``.

        ``parsed``: ``raw_data`` read already (the job's session), not read again; an
        unreadable one (``None``) is read here, to be moved to its quarantine.
        """
        return await self._loaded(conversation_key, token, raw_version, raw_data, parsed=parsed)

    async def _loaded(
        self,
        conversation_key: str,
        token: str,
        raw_version: bytes | str,
        raw_data: bytes | str,
        *,
        parsed: ConversationSession | None = None,
    ) -> LockedSession:
        version = text_of(raw_version)
        if not raw_data:
            return LockedSession(conversation_key, token, None, version)
        try:
            session = (
                parsed if parsed is not None else ConversationSession.model_validate_json(raw_data)
            )
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
        return LockedSession(conversation_key, token, session, version, text_of(raw_data))

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
        call = Commit(
            chat=self.keys(locked.conversation_key),
            token=locked.token,
            version=locked.version,
            new_version=new_version,
            data=session.model_dump_json(),
            ttl=self._ttl,
            job_raw=completion.job_raw if completion else "",
            job_id=completion.job_id if completion else "",
            outbox_entry=completion.outbox_entry if completion else "",
            release=release,
            lease_must_be_ours=completion is not None or not release,
            answered=completion is not None and completion.answered,
            handoff="" if session.handoff == "bot" else session.handoff,
        )
        try:
            saved = int(await self._scripts.run(call))
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
            await self._scripts.run(
                Release(chat=self.keys(locked.conversation_key), token=locked.token)
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
        call = MoveAside(
            chat=self.keys(conversation_key), target=target, token=token, ttl=self._archive_ttl
        )
        try:
            await self._scripts.run(call)
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
