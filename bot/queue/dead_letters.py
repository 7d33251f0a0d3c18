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
Never the message: staff find the chat through the audit (``support-audit turn``).
"""

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.storage.connection import AsyncRedisClient, SyncRedisClient
from bot.storage.keys import RedisKeys
from bot.storage.scripts.base import Scripts
from bot.storage.scripts.dead_letters import RecordDeadLetter

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
