"""Jobs given up after too many attempts, kept for staff: identifiers and a failure kind, no text.

A job whose runs keep killing their worker (or crash before an outcome) is
taken again after every lease. Once it is over ``JOB_MAX_ATTEMPTS`` the front
end gives it up in two steps: it records a dead letter here, then answers the
customer and pops the job in the chat's own slot (:mod:`bot.queue.chat_queue`).
The dead letters are global, under a hash tag of their own, so a script cannot
write them together with the chat's keys on a Cluster. Each step is safe to
run twice instead: a dead letter is keyed by the job's turn id and only its
first record is kept, and the chat's step is the ordinary ``complete``. A
worker that dies between the two leaves the job at the head, over the limit,
and the next worker does both again.

What is kept: the update id, the turn id (the incident code the customer was
shown), when it was given up, the failed attempts and the last failure's kind.
Never shown: the message. Staff find the chat through the audit (``support-audit
turn``). The job itself (the update as queued, the customer's text with it) is
kept inside the record, only for ``support-audit dead-letters retry``, and goes
with the record (``drop``, a retry, or trimmed as newer ones come).

A retry queues the job again at the tail of its chat under a new turn id (the
old one's audit is written, and a retried run must be audited on its own) with
no attempts counted, then signals the chat and drops the letter; each step is
safe to run twice (a mark in the chat's slot makes the queueing happen once).
"""

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.queue.jobs import QueuedJob
from bot.queue.work_stream import STREAM_MAXLEN
from bot.storage.connection import AsyncRedisClient, SyncRedisClient, text_of
from bot.storage.keys import RedisKeys, telegram_conversation
from bot.storage.scripts.base import Scripts, run_sync
from bot.storage.scripts.dead_letters import DropDeadLetter, RecordDeadLetter, Redrive
from bot.storage.scripts.work import SignalScript
from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH

DEAD_LETTERS_KEPT = 10_000
"""The newest dead letters kept; older ones are dropped as new ones come."""

INTERRUPTED = "interrupted"
"""The failure kind of an attempt that ended with no error seen: the process died or was stopped."""


class DeadLetter(BaseModel):
    """One job given up (stored as JSON; a field another version adds is ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    turn_id: str
    update_id: int
    job_id: str
    attempts: int
    error: str
    given_up_ms: int
    enqueued_ms: int
    # The job as it was queued (the customer's update with it), for a retry; never shown.
    # Empty in records of older versions: those cannot be retried.
    job: str = ""
    # "job": a job given up; "action": a confirmed action whose outcome is unknown
    # (its call may have reached the shop's MCP server), with its ids and tool.
    kind: str = "job"
    action_id: str | None = None
    tool_name: str | None = None
    server: str | None = None


class DeadLetters:
    """Records dead letters (async, the workers' side)."""

    def __init__(
        self, redis: AsyncRedisClient, *, keys: RedisKeys, kept: int = DEAD_LETTERS_KEPT
    ) -> None:
        self._keys = keys
        self._kept = kept
        self._scripts = Scripts(redis)

    async def record(self, letter: DeadLetter) -> bool:
        """Keep ``letter``; ``False`` if its turn was recorded before (that record stays)."""
        reply = await self._scripts.run(
            RecordDeadLetter(
                letters=self._keys.dead_letters,
                order=self._keys.dead_letter_order,
                turn_id=letter.turn_id,
                record=letter.model_dump_json(),
                given_up_ms=letter.given_up_ms,
                kept=self._kept,
            )
        )
        return int(reply) == 1


def read_dead_letters(client: SyncRedisClient, keys: RedisKeys, limit: int) -> list[DeadLetter]:
    """The newest ``limit`` dead letters, newest first (staff's side, synchronous).

    A record this version cannot read is left out.
    """
    turn_ids: Any = client.zrevrange(keys.dead_letter_order, 0, limit - 1)
    if not turn_ids:
        return []
    records: Sequence[bytes | str | None] = client.hmget(keys.dead_letters, list(turn_ids))
    letters = []
    for raw in records:
        if raw is None:
            continue
        try:
            letters.append(DeadLetter.model_validate_json(raw))
        except ValidationError:
            continue
    return letters


REDRIVE_MARK_TTL_SECONDS = 30 * 24 * 3600
"""How long a retried letter's mark stays: a repeated retry within it queues nothing."""

RetryVerdict = Literal["queued", "queued_before", "unknown", "not_retryable", "outcome_unknown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryResult:
    """What a retry did; ``turn_id`` is the retried run's (its incident code, its audit)."""

    verdict: RetryVerdict
    turn_id: str = ""


def redrive_turn_id(turn_id: str) -> str:
    """The turn id of a dead letter's retry: new, and the same for every retry of it."""
    digest = hashlib.sha256(f"redrive/{turn_id}".encode()).digest()
    return "".join(
        TURN_ID_ALPHABET[byte % len(TURN_ID_ALPHABET)] for byte in digest[:TURN_ID_LENGTH]
    )


def _letter(client: SyncRedisClient, keys: RedisKeys, turn_id: str) -> DeadLetter | None:
    raw: Any = client.hget(keys.dead_letters, turn_id)
    if raw is None:
        return None
    try:
        return DeadLetter.model_validate_json(text_of(raw))
    except ValidationError:
        return None


def retry_dead_letter(client: SyncRedisClient, keys: RedisKeys, turn_id: str) -> RetryResult:
    """Queue the job of dead letter ``turn_id`` again in its chat, signal it, drop the letter.

    Staff's side (synchronous). ``unknown``: no such letter; ``not_retryable``: it
    was recorded without its job (an older version) or the job is unreadable;
    ``outcome_unknown``: a confirmed action whose call may have reached the shop,
    never run again by a retry (staff check the shop, then drop it).
    """
    letter = _letter(client, keys, turn_id)
    if letter is None:
        return RetryResult(verdict="unknown")
    if letter.kind == "action":
        return RetryResult(verdict="outcome_unknown")
    try:
        job = QueuedJob.model_validate_json(letter.job) if letter.job else None
    except ValidationError:
        job = None
    if job is None:
        return RetryResult(verdict="not_retryable")
    retried = redrive_turn_id(turn_id)
    conversation = telegram_conversation(job.chat_id)
    again = job.model_copy(update={"turn_id": retried, "enqueued_ms": int(time.time() * 1000)})
    queued = run_sync(
        client,
        Redrive(
            chat=keys.conversation(conversation),
            turn_id=turn_id,
            job=again.model_dump_json(),
            job_id=job.job_id,
            mark_ttl=REDRIVE_MARK_TTL_SECONDS,
        ),
    )
    # Signalled even when queued before: the earlier retry may have stopped right here.
    run_sync(
        client,
        SignalScript(
            stream=keys.work_stream,
            index=RedisKeys.work_queued(keys.work_stream),
            conversation_key=conversation,
            maxlen=STREAM_MAXLEN,
        ),
    )
    drop_dead_letter(client, keys, turn_id)
    return RetryResult(verdict="queued" if int(queued) == 1 else "queued_before", turn_id=retried)


def drop_dead_letter(client: SyncRedisClient, keys: RedisKeys, turn_id: str) -> bool:
    """Forget dead letter ``turn_id`` and the job kept with it; ``False`` if there was none."""
    reply = run_sync(
        client,
        DropDeadLetter(letters=keys.dead_letters, order=keys.dead_letter_order, turn_id=turn_id),
    )
    return int(reply) == 1
