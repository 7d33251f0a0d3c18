"""A session store in one process's memory, for tests that need no Redis.

It keeps the :class:`~bot.sessions.store.SessionStore` contract the Redis
store keeps (the contract suite runs both): a lease that expires, a bounded
wait for it, commits checked against the loaded version, archives kept aside.
"""

import asyncio
import secrets
from time import monotonic

from bot.sessions.models import ConversationSession
from bot.sessions.store import (
    JobCompletion,
    LockedSession,
    SessionConflictError,
    SessionLeaseLostError,
    SessionLockTimeoutError,
)


class InMemorySessionStore:
    """Sessions, leases and archives in dictionaries; ``archived`` is open for tests."""

    def __init__(self) -> None:
        self._sessions: dict[str, tuple[str, ConversationSession]] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        # Who saved each session last (its lease token): what makes a commit a repeat.
        self._saved_by: dict[str, str] = {}
        self.archived: list[ConversationSession] = []
        # A worker's completed jobs: job id -> the reply its commit stored.
        self.outbox: dict[str, str] = {}

    def _holder(self, conversation_key: str) -> str | None:
        lease = self._leases.get(conversation_key)
        if lease is None or lease[1] <= monotonic():
            return None
        return lease[0]

    def _release_if_ours(self, locked: LockedSession) -> None:
        if self._holder(locked.conversation_key) == locked.token:
            del self._leases[locked.conversation_key]

    async def acquire(
        self, conversation_key: str, *, lease_seconds: float, wait_seconds: float
    ) -> LockedSession:
        """Take the lease (waiting at most ``wait_seconds``) and load the session."""
        token = secrets.token_hex(8)
        deadline = monotonic() + wait_seconds
        while self._holder(conversation_key) is not None:
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise SessionLockTimeoutError(
                    f"conversation {conversation_key} stayed locked for {wait_seconds} s"
                )
            await asyncio.sleep(min(0.005, remaining))
        self._leases[conversation_key] = (token, monotonic() + lease_seconds)
        version, session = self._sessions.get(conversation_key, ("", None))
        return LockedSession(conversation_key, token, session, version)

    async def commit(
        self,
        locked: LockedSession,
        session: ConversationSession,
        *,
        completion: JobCompletion | None = None,
        release: bool = True,
    ) -> None:
        """Save over the loaded version (and release); a newer save wins; repeatable."""
        key = locked.conversation_key
        new_version = str(int(locked.version or "0") + 1)
        if completion is not None and completion.job_id in self.outbox:
            return
        stored_version, stored = self._sessions.get(key, ("", None))
        # A repeat is known by who saved it, not by equal content (the Redis script's rule).
        if (stored_version, stored) == (new_version, session) and self._saved_by.get(
            key
        ) == locked.token:
            return
        if (completion is not None or not release) and self._holder(key) != locked.token:
            raise SessionLeaseLostError(f"the lease of {key} is lost")
        if release:
            self._release_if_ours(locked)
        if stored_version != locked.version:
            raise SessionConflictError(f"session of {key} changed since version {locked.version!r}")
        self._sessions[key] = (new_version, session)
        self._saved_by[key] = locked.token
        if completion is not None:
            self.outbox[completion.job_id] = completion.outbox_entry

    async def held(
        self,
        conversation_key: str,
        token: str,
        raw_version: str,
        raw_data: str,
        *,
        parsed: ConversationSession | None = None,
    ) -> LockedSession:
        """A session read by a worker that holds the lease ``token`` (``parsed``: read already)."""
        session = parsed
        if session is None and raw_data:
            session = ConversationSession.model_validate_json(raw_data)
        return LockedSession(conversation_key, token, session, raw_version)

    async def reload(self, conversation_key: str, token: str) -> LockedSession:
        """The session again, under a lease already held."""
        version, session = self._sessions.get(conversation_key, ("", None))
        return LockedSession(conversation_key, token, session, version)

    async def release(self, locked: LockedSession) -> None:
        """Give the lease back (only if it is still ours)."""
        self._release_if_ours(locked)

    async def archive(self, locked: LockedSession, *, release: bool = True) -> None:
        """Move the session to :attr:`archived` (and release the lease)."""
        stored = self._sessions.pop(locked.conversation_key, None)
        if stored is not None:
            self.archived.append(stored[1])
        if release:
            self._release_if_ours(locked)

    async def load(self, conversation_key: str) -> ConversationSession | None:
        """The session, without the lease."""
        stored = self._sessions.get(conversation_key)
        return None if stored is None else stored[1]
