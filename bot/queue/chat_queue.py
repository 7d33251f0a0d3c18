"""One chat's queue as a worker sees it: lease, head job, session, outbox; every script repeatable.

All keys here share the conversation's hash tag. Each script can run twice
with the same arguments and leave the same state (a command retried after a
timeout must never lose or double a message):

* ``take``: the lease (or the lease we already hold), the head job, the
  outbox and the session, in one trip;
* ``renew``: the heartbeat, only while the lease is ours;
* ``complete``: pop the head job and put its reply in the outbox, unless that
  already happened (the turn's own commit does the same with the session, in
  :mod:`bot.sessions.redis_store`);
* ``delivered``: drop the outbox entry and return the next job, or release
  the lease when the queue is empty (so a job queued meanwhile is never
  stranded: either this worker sees it, or intake sees no lease and signals).
"""

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from bot.queue.jobs import OutboxEntry, QueuedJob
from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import ConversationKeys, RedisKeys

logger = logging.getLogger(__name__)

# KEYS: lease, queue, outbox, session, blocked. ARGV: token, lease ms.
_TAKE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0}
end
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
return {1, redis.call('LINDEX', KEYS[2], 0) or '', redis.call('HVALS', KEYS[3]),
        stored[1] or '', stored[2] or '', redis.call('EXISTS', KEYS[5])}
"""

# KEYS: lease. ARGV: token, lease ms.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# KEYS: lease, queue, outbox. ARGV: token, job json, job id, outbox json ('' for none), ttl.
# Returns 1 done, 2 already done, 0 lease lost, -1 the job is not at the head.
_COMPLETE = """
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return 2 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[2] then return -1 end
redis.call('LPOP', KEYS[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
end
return 1
"""

# KEYS: lease, queue, outbox, session, blocked.
# ARGV: token, job id ('' for none), keep the lease (0/1).
# Returns {0} lease lost, {1} released (queue empty), {2, next job, version, data, blocked}.
_DELIVERED = """
if ARGV[2] ~= '' then redis.call('HDEL', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then
  if ARGV[3] ~= '1' and redis.call('HLEN', KEYS[3]) == 0 then
    redis.call('DEL', KEYS[1])
    return {1}
  end
  head = ''
end
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
return {2, head, stored[1] or '', stored[2] or '', redis.call('EXISTS', KEYS[5])}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LeaseLostError(RuntimeError):
    """The chat's lease is no longer ours: another worker may run it now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatState:
    """What a worker holding the lease sees: the head job, undelivered replies, the session."""

    head: QueuedJob | None
    head_raw: str
    outbox: tuple[OutboxEntry, ...]
    session_version: str
    session_data: str
    # The customer blocked the bot (read in the same script: no extra round trip).
    blocked: bool = False


class ChatQueue:
    """The per-chat scripts of the worker side."""

    def __init__(
        self,
        redis: AsyncRedisClient,
        *,
        keys: RedisKeys,
        lease_seconds: float,
        outbox_ttl_seconds: int,
    ) -> None:
        self._keys = keys
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._outbox_ttl = outbox_ttl_seconds
        self._take = redis.register_script(_TAKE)
        self._renew = redis.register_script(_RENEW)
        self._complete = redis.register_script(_COMPLETE)
        self._delivered = redis.register_script(_DELIVERED)
        self._release = redis.register_script(_RELEASE)

    def keys(self, conversation_key: str) -> ConversationKeys:
        """The conversation's keys."""
        return self._keys.conversation(conversation_key)

    async def take(self, conversation_key: str, token: str) -> ChatState | None:
        """Take (or keep) the lease and read the chat; ``None`` if another worker holds it."""
        keys = self.keys(conversation_key)
        reply = await self._take(
            keys=[keys.lease, keys.queue, keys.outbox, keys.session, keys.blocked],
            args=[token, self._lease_ms],
        )
        if int(reply[0]) == 0:
            return None
        outbox = tuple(
            entry for entry in (_outbox_entry(raw) for raw in reply[2]) if entry is not None
        )
        return _state(_text(reply[1]), outbox, reply[3], reply[4], reply[5])

    async def renew(self, conversation_key: str, token: str) -> bool:
        """Extend the lease by one period; ``False`` if it is no longer ours."""
        reply = await self._renew(
            keys=[self.keys(conversation_key).lease], args=[token, self._lease_ms]
        )
        return int(reply) == 1

    async def complete(
        self,
        conversation_key: str,
        token: str,
        job_raw: str,
        job_id: str,
        reply: OutboxEntry | None,
    ) -> bool:
        """Pop the head job and store its reply; ``False`` if that had happened before.

        ``False`` means the outbox already holds this job's reply (a repeated
        run, or the turn's own commit got there first). Raises
        :class:`LeaseLostError` when the lease is gone; a job that is no longer
        at the head (another worker finished it) counts as done.
        """
        keys = self.keys(conversation_key)
        result = int(
            await self._complete(
                keys=[keys.lease, keys.queue, keys.outbox],
                args=[
                    token,
                    job_raw,
                    job_id,
                    reply.model_dump_json() if reply is not None else "",
                    self._outbox_ttl,
                ],
            )
        )
        if result == 0:
            raise LeaseLostError(f"lease of {conversation_key} lost before job {job_id} completed")
        if result == -1:
            logger.warning("Job %s of %s was no longer at the head", job_id, conversation_key)
        return result != 2

    async def delivered(
        self, conversation_key: str, token: str, job_id: str, *, keep: bool = False
    ) -> ChatState | None:
        """Drop a delivered reply; the chat's next state, or ``None`` once the lease is released.

        With ``keep`` the lease is kept even when the queue is empty (a summary
        follows). Raises :class:`LeaseLostError` when the lease is gone.
        """
        keys = self.keys(conversation_key)
        reply = await self._delivered(
            keys=[keys.lease, keys.queue, keys.outbox, keys.session, keys.blocked],
            args=[token, job_id, 1 if keep else 0],
        )
        status = int(reply[0])
        if status == 0:
            raise LeaseLostError(f"lease of {conversation_key} lost")
        if status == 1:
            return None
        return _state(_text(reply[1]), (), reply[2], reply[3], reply[4])

    async def release(self, conversation_key: str, token: str) -> None:
        """Give the lease back (only if it is still ours)."""
        await self._release(keys=[self.keys(conversation_key).lease], args=[token])


def _state(
    head_raw: str, outbox: tuple[OutboxEntry, ...], version: object, data: object, blocked: object
) -> ChatState:
    head = None
    if head_raw:
        try:
            head = QueuedJob.model_validate_json(head_raw)
        except ValidationError:
            logger.exception("A queued job is unreadable; it is dropped")
    return ChatState(
        head=head,
        head_raw=head_raw,
        outbox=outbox,
        session_version=_text(version),
        session_data=_text(data),
        blocked=int(str(blocked)) == 1,
    )


def _outbox_entry(raw: object) -> OutboxEntry | None:
    try:
        return OutboxEntry.model_validate_json(_text(raw))
    except ValidationError:
        logger.exception("An outbox entry is unreadable; it is dropped")
        return None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else ""
