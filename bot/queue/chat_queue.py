"""One chat's queue as a worker sees it: lease, head job, session, outbox; every script repeatable.

The scripts are in :mod:`bot.storage.scripts.chat`, and the lease, outbox and
attempts rules they keep are stated once in :mod:`bot.storage.scripts`:

* ``take``: the lease (or the lease we already hold), the head job, the
  outbox and the session, in one trip;
* ``renew``: the heartbeat, only while the lease is ours;
* ``complete``: pop the head job and put its reply in the outbox, unless that
  already happened (the turn's own commit does the same with the session, in
  :mod:`bot.sessions.redis_store`);
* ``delivered``: drop the outbox entry and return the next job, or release
  the lease when the queue is empty (so a job queued meanwhile is never
  stranded: either this worker sees it, or intake sees no lease and signals).

A worker that dies mid-job leaves its attempt counted, and the front end gives
a job up once it is over the limit (:mod:`bot.queue.dead_letters`). An outbox
entry this version cannot read is moved to ``{<conv>}:quarantine:outbox``
instead of blocking the chat.
"""

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from bot.ops.log_context import chat_label
from bot.ops.retry import RetryCounter
from bot.queue.delivery import Delivery
from bot.queue.jobs import QueuedJob
from bot.queue.redis_patience import BOOKKEEPING_RETRY_SECONDS, until_redis_answers
from bot.storage.connection import AsyncRedisClient, text_of
from bot.storage.keys import ConversationKeys, RedisKeys
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.chat import (
    Complete,
    Delivered,
    NoteFailure,
    QuarantineOutbox,
    Release,
    Renew,
    Take,
    Waiting,
)

logger = logging.getLogger(__name__)


class LeaseLostError(RuntimeError):
    """The chat's lease is no longer ours: another worker may run it now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatState:
    """What a worker holding the lease sees: the head job, undelivered replies, the session."""

    head: QueuedJob | None
    head_raw: str
    outbox: tuple[Delivery, ...]
    session_version: str
    session_data: str
    # The customer blocked the bot (read in the same script: no extra round trip).
    blocked: bool = False
    # Leases handed the head job so far, this one included (0: no readable head), and how
    # its last failed attempt ended, where a live worker could tell ('' if unknown).
    attempts: int = 0
    failure: str = ""


class ChatQueue:
    """The per-chat scripts of the worker side."""

    def __init__(
        self,
        redis: AsyncRedisClient,
        *,
        keys: RedisKeys,
        lease_seconds: float,
        outbox_ttl_seconds: int,
        quarantine_ttl_seconds: int | None = None,
        bookkeeping_retry_seconds: float = BOOKKEEPING_RETRY_SECONDS,
        retries: RetryCounter | None = None,
    ) -> None:
        """``retries``: where the bookkeeping's retries are counted (the metrics)."""
        self._keys = keys
        self._bookkeeping_seconds = bookkeeping_retry_seconds
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._outbox_ttl = outbox_ttl_seconds
        self._quarantine_ttl = quarantine_ttl_seconds or outbox_ttl_seconds
        self._redis = redis
        self._scripts = Scripts(redis)
        self._retries = retries

    def keys(self, conversation_key: str) -> ConversationKeys:
        """The conversation's keys."""
        return self._keys.conversation(conversation_key)

    async def take(self, conversation_key: str, token: str) -> ChatState | None:
        """Take (or keep) the lease and read the chat; ``None`` if another worker holds it."""
        keys = self.keys(conversation_key)
        reply = await self._scripts.run(
            Take(chat=keys, token=token, lease_ms=self._lease_ms, ttl=self._outbox_ttl)
        )
        if int(reply[0]) == 0:
            return None
        outbox = await self._readable(keys, reply[2])
        return _state(
            text_of(reply[1]), outbox, reply[3], reply[4], reply[5], tried=(reply[6], reply[7])
        )

    async def renew(self, conversation_key: str, token: str) -> bool:
        """Extend the lease by one period; ``False`` if it is no longer ours."""
        reply = await self._scripts.run(
            Renew(chat=self.keys(conversation_key), token=token, lease_ms=self._lease_ms)
        )
        return int(reply) == 1

    async def complete(
        self,
        conversation_key: str,
        token: str,
        job_raw: str,
        job_id: str,
        reply: Delivery | None,
    ) -> bool:
        """Pop the head job and store its reply; ``False`` if that had happened before.

        ``False`` means the outbox already holds this job's reply (a repeated
        run, or the turn's own commit got there first). Raises
        :class:`LeaseLostError` when the lease is gone; a job that is no longer
        at the head (another worker finished it) counts as done.
        """
        keys = self.keys(conversation_key)
        result = int(
            await self._scripts.run(
                Complete(
                    chat=keys,
                    token=token,
                    job_raw=job_raw,
                    job_id=job_id,
                    outbox_entry=reply.stored() if reply is not None else "",
                    ttl=self._outbox_ttl,
                )
            )
        )
        if result == 0:
            raise LeaseLostError(f"lease of {conversation_key} lost before job {job_id} completed")
        if result == -1:
            logger.warning(
                "Job %s of %s was no longer at the head", job_id, chat_label(conversation_key)
            )
        return result != 2

    async def delivered(
        self, conversation_key: str, token: str, job_id: str, *, keep: bool = False
    ) -> ChatState | None:
        """Drop a delivered reply; the chat's next state, or ``None`` once the lease is released.

        With ``keep`` the lease is kept even when the queue is empty (a summary
        follows). Raises :class:`LeaseLostError` when the lease is gone.
        """
        keys = self.keys(conversation_key)
        # Retried while Redis is briefly away (the script is safe to repeat): a reply
        # this worker sent and could not mark delivered would be sent again otherwise.
        reply = await until_redis_answers(
            f"Marking job {job_id} delivered" if job_id else "Moving on to the next job",
            lambda: self._scripts.run(
                Delivered(
                    chat=keys,
                    token=token,
                    job_id=job_id,
                    keep=keep,
                    ttl=self._outbox_ttl,
                    lease_ms=self._lease_ms,
                )
            ),
            within=self._bookkeeping_seconds,
            operation="queue_delivered",
            counter=self._retries,
        )
        status = int(reply[0])
        if status == 0:
            raise LeaseLostError(f"lease of {conversation_key} lost")
        if status == 1:
            return None
        outbox = await self._readable(keys, reply[5])
        return _state(
            text_of(reply[1]), outbox, reply[2], reply[3], reply[4], tried=(reply[6], reply[7])
        )

    async def note_failure(self, conversation_key: str, job_id: str, kind: str) -> None:
        """Record how an attempt of ``job_id`` failed (an error kind, never its text)."""
        await self._scripts.run(
            NoteFailure(
                chat=self.keys(conversation_key), job_id=job_id, kind=kind, ttl=self._outbox_ttl
            )
        )

    async def _readable(
        self, keys: ConversationKeys, pairs: list[bytes | str]
    ) -> tuple[Delivery, ...]:
        """The outbox entries in ``pairs`` (field, value, ...); unreadable ones are moved aside.

        Left in place, an unreadable entry keeps the chat from being released: its
        drain would loop on it for as long as the outbox keeps it.
        """
        entries = []
        for raw_id, raw in zip(pairs[::2], pairs[1::2], strict=True):
            entry = _outbox_entry(raw)
            if entry is not None:
                entries.append(entry)
                continue
            job_id = text_of(raw_id)
            # The job id only: the key names the chat, and the entry holds the reply's text.
            logger.warning(
                "Outbox entry of job %s is unreadable; moved to the chat's outbox quarantine",
                job_id,
            )
            await self._scripts.run(
                QuarantineOutbox(chat=keys, job_id=job_id, entry=raw, ttl=self._quarantine_ttl)
            )
        return tuple(entries)

    async def release(self, conversation_key: str, token: str, *, unrun_job_id: str = "") -> None:
        """Give the lease back (only if it is still ours), waiting out a short Redis outage.

        ``unrun_job_id``: the head job this lease was handed and never ran (a stop
        before it started); its attempt is not counted.
        """
        keys = self.keys(conversation_key)
        await until_redis_answers(
            "Releasing a chat",
            lambda: self._scripts.run(Release(chat=keys, token=token, unrun_job_id=unrun_job_id)),
            within=self._bookkeeping_seconds,
            operation="queue_release",
            counter=self._retries,
        )

    async def outstanding(self, conversation_key: str, job_raw: str, job_id: str) -> bool:
        """Whether the job will still be answered: queued, or its reply in the outbox.

        Waits out a short Redis outage (read-only commands, safe to repeat). Asked
        by a worker that lost Redis before it could store a job's outcome: a job
        Redis kept runs again; one it lost (restarted empty) never will.
        """
        keys = self.keys(conversation_key)

        async def look() -> bool:
            # The queue first: a commit moves the job from the queue to the outbox in
            # one script, so reading in this order cannot miss it in between.
            if await self._redis.lpos(keys.queue, job_raw) is not None:
                return True
            return bool(await self._redis.hexists(keys.outbox, job_id))

        return await until_redis_answers(
            "Looking up a job whose outcome was not stored",
            look,
            within=self._bookkeeping_seconds,
            operation="queue_outstanding",
            counter=self._retries,
        )

    async def waiting(self, conversation_key: str) -> tuple[int, bool]:
        """The chat's queued jobs and whether a worker holds its lease (for the sweep)."""
        keys = self.keys(conversation_key)
        reply = await self._scripts.run(Waiting(chat=keys))
        return int(reply[0]), int(reply[1]) == 1


def _state(
    head_raw: str,
    outbox: tuple[Delivery, ...],
    version: object,
    data: object,
    blocked: object,
    *,
    tried: tuple[object, object] = (0, ""),
) -> ChatState:
    head = None
    if head_raw:
        try:
            head = QueuedJob.model_validate_json(head_raw)
        except ValidationError:
            # The validation error quotes the job, which holds the customer's text: no traceback.
            logger.warning("A queued job is unreadable; it is dropped")
    return ChatState(
        head=head,
        head_raw=head_raw,
        outbox=outbox,
        session_version=text_of(version),
        session_data=text_of(data),
        blocked=int(str(blocked)) == 1,
        attempts=int(str(tried[0])) if head is not None else 0,
        failure=text_of(tried[1]),
    )


def _outbox_entry(raw: object) -> Delivery | None:
    """The entry, or ``None`` when it is not one (the caller logs and moves it aside)."""
    try:
        return Delivery.read(text_of(raw))
    except ValueError:
        # Not JSON, not a delivery of any version, or bytes that are not UTF-8.
        return None
