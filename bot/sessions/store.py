"""The session store seam: load under a lease, commit version-checked, archive."""

from dataclasses import dataclass
from typing import Protocol

from bot.sessions.models import ConversationSession


class SessionStoreError(RuntimeError):
    """Base of the store's failures."""


class SessionStoreUnavailableError(SessionStoreError):
    """The backing store cannot be reached."""


class SessionLockTimeoutError(SessionStoreError):
    """Another turn held the conversation longer than the wait allows."""


class SessionConflictError(SessionStoreError):
    """The stored session changed since it was loaded: this write would lose a newer one."""


class SessionLeaseLostError(SessionStoreError):
    """The worker's lease expired or was taken: this turn must not be saved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCompletion:
    """What a worker's commit does besides saving: pop ``job_raw``, store its reply.

    ``answered``: the model answered the job, so a run of failed turns (the
    handoff's trigger) ends with this commit, not with a write of its own.
    """

    job_raw: str
    job_id: str
    outbox_entry: str
    answered: bool = False


@dataclass(frozen=True, slots=True)
class LockedSession:
    """A conversation held by this process: its session (``None`` if new) and version.

    ``data`` is the session as stored (its JSON) when it was read and readable, so
    that whoever hands it on need not encode it again; ``""`` otherwise.
    """

    conversation_key: str
    token: str
    session: ConversationSession | None
    version: str
    data: str = ""


class SessionStore(Protocol):
    """Where sessions live; one implementation per backend."""

    async def acquire(
        self, conversation_key: str, *, lease_seconds: float, wait_seconds: float
    ) -> LockedSession:
        """Take the conversation's lease and load its session."""
        ...

    async def commit(
        self,
        locked: LockedSession,
        session: ConversationSession,
        *,
        completion: JobCompletion | None = None,
        release: bool = True,
    ) -> None:
        """Save ``session`` if nobody saved since ``locked`` was loaded (and complete the job)."""
        ...

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

        ``parsed``: ``raw_data`` read already (the job's session), not read again.
        """
        ...

    async def release(self, locked: LockedSession) -> None:
        """Give the lease back without saving."""
        ...

    async def archive(self, locked: LockedSession, *, release: bool = True) -> None:
        """Move the session aside (for staff) and release: the conversation starts fresh."""
        ...

    async def reload(self, conversation_key: str, token: str) -> LockedSession:
        """Read the session again under a lease this worker already holds."""
        ...

    async def load(self, conversation_key: str) -> ConversationSession | None:
        """Read the session without the lease (for background work and inspection)."""
        ...
