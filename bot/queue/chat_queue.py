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

Attempts: ``take`` and ``delivered`` count each lease that is handed a job as
one attempt of it (once per lease token, so a repeated script counts nothing),
beside the queue in ``{<conv>}:attempts``; a worker that dies mid-job leaves
the count behind, and the front end gives a job up once it is over the limit
(:mod:`bot.queue.dead_letters`). An outbox entry this version cannot read is
moved to ``{<conv>}:quarantine:outbox`` instead of blocking the chat.
"""

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from bot.log_context import chat_label
from bot.queue.jobs import OutboxEntry, QueuedJob
from bot.queue.redis_patience import BOOKKEEPING_RETRY_SECONDS, until_redis_answers
from bot.redis_connection import AsyncRedisClient
from bot.redis_keys import ConversationKeys, RedisKeys

logger = logging.getLogger(__name__)


# The head job's attempt under lease token ``token``: counted once per token (a repeated
# script, or a second look by the same drain, counts nothing). Fields of the attempts
# hash: <job id> the count, <job id>:by the last token, <job id>:error the last failure.
# Returns {count, last failure kind or ''}; {0, ''} for no head or an unreadable one.
_ATTEMPT = """
local function attempt(key, head, token, ttl)
  if head == '' then return {0, ''} end
  local ok, job = pcall(cjson.decode, head)
  if not ok or type(job) ~= 'table' or type(job['job_id']) ~= 'string' then return {0, ''} end
  local id = job['job_id']
  local seen = redis.call('HMGET', key, id, id .. ':by', id .. ':error')
  local count = tonumber(seen[1]) or 0
  if seen[2] ~= token then
    count = redis.call('HINCRBY', key, id, 1)
    redis.call('HSET', key, id .. ':by', token)
    redis.call('EXPIRE', key, ttl)
  end
  return {count, seen[3] or ''}
end
"""

# KEYS: lease, queue, outbox, session, blocked, attempts. ARGV: token, lease ms, ttl.
_TAKE = (
    _ATTEMPT
    + """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0}
end
local head = redis.call('LINDEX', KEYS[2], 0) or ''
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
local tried = attempt(KEYS[6], head, ARGV[1], ARGV[3])
return {1, head, redis.call('HGETALL', KEYS[3]), stored[1] or '', stored[2] or '',
        redis.call('EXISTS', KEYS[5]), tried[1], tried[2]}
"""
)

# KEYS: lease. ARGV: token, lease ms.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# KEYS: lease, queue, outbox, attempts. ARGV: token, job json, job id, outbox json ('' for
# none), ttl. Returns 1 done, 2 already done, 0 lease lost, -1 the job is not at the head.
_COMPLETE = """
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return 2 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[2] then return -1 end
redis.call('LPOP', KEYS[2])
if ARGV[3] ~= '' then
  redis.call('HDEL', KEYS[4], ARGV[3], ARGV[3] .. ':by', ARGV[3] .. ':error')
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
end
return 1
"""

# KEYS: lease, queue, outbox, session, blocked, attempts.
# ARGV: token, job id ('' for none), keep the lease (0/1), ttl.
# Returns {0} lease lost, {1} released (queue empty),
# {2, next job, version, data, blocked, outbox, attempt, last failure}: the outbox (field,
# value pairs) only when it holds entries and no job is queued, the only way it stays
# non-empty (entries this drain did not take: another version's, or unreadable ones).
_DELIVERED = (
    _ATTEMPT
    + """
if ARGV[2] ~= '' then
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('HDEL', KEYS[6], ARGV[2], ARGV[2] .. ':by', ARGV[2] .. ':error')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local head = redis.call('LINDEX', KEYS[2], 0)
local outbox = {}
if not head then
  if ARGV[3] ~= '1' then
    if redis.call('HLEN', KEYS[3]) == 0 then
      redis.call('DEL', KEYS[1], KEYS[6])
      return {1}
    end
    outbox = redis.call('HGETALL', KEYS[3])
  end
  head = ''
end
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
local tried = attempt(KEYS[6], head, ARGV[1], ARGV[4])
return {2, head, stored[1] or '', stored[2] or '', redis.call('EXISTS', KEYS[5]), outbox,
        tried[1], tried[2]}
"""
)

# KEYS: outbox, outbox quarantine. ARGV: job id, the entry as read, ttl. Moves the entry
# aside unless it changed or went meanwhile.
_QUARANTINE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"""

# KEYS: attempts. ARGV: job id, failure kind, ttl. Names how the job's attempt failed
# (only while the job is counted: a finished job's count is gone).
_NOTE_FAILURE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':error', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return 1
"""

# KEYS: lease, attempts. ARGV: token, the head job handed back unrun ('' for none).
# Gives the lease back if ours; the unrun job's attempt under this token is taken back
# (once: the token's mark goes with it), so a hand-back at shutdown is no attempt.
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[2], ARGV[2] .. ':by') == ARGV[1] then
  redis.call('HINCRBY', KEYS[2], ARGV[2], -1)
  redis.call('HDEL', KEYS[2], ARGV[2] .. ':by')
end
return redis.call('DEL', KEYS[1])
"""


# KEYS: queue, lease. {queued jobs, lease held (0/1)}: read-only, for the sweep.
_WAITING = """
return {redis.call('LLEN', KEYS[1]), redis.call('EXISTS', KEYS[2])}
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
    ) -> None:
        self._keys = keys
        self._bookkeeping_seconds = bookkeeping_retry_seconds
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._outbox_ttl = outbox_ttl_seconds
        self._quarantine_ttl = quarantine_ttl_seconds or outbox_ttl_seconds
        self._take = redis.register_script(_TAKE)
        self._renew = redis.register_script(_RENEW)
        self._complete = redis.register_script(_COMPLETE)
        self._delivered = redis.register_script(_DELIVERED)
        self._release = redis.register_script(_RELEASE)
        self._quarantine = redis.register_script(_QUARANTINE)
        self._note_failure = redis.register_script(_NOTE_FAILURE)
        self._waiting = redis.register_script(_WAITING)

    def keys(self, conversation_key: str) -> ConversationKeys:
        """The conversation's keys."""
        return self._keys.conversation(conversation_key)

    async def take(self, conversation_key: str, token: str) -> ChatState | None:
        """Take (or keep) the lease and read the chat; ``None`` if another worker holds it."""
        keys = self.keys(conversation_key)
        reply = await self._take(
            keys=[keys.lease, keys.queue, keys.outbox, keys.session, keys.blocked, keys.attempts],
            args=[token, self._lease_ms, self._outbox_ttl],
        )
        if int(reply[0]) == 0:
            return None
        outbox = await self._readable(keys, reply[2])
        return _state(
            _text(reply[1]), outbox, reply[3], reply[4], reply[5], tried=(reply[6], reply[7])
        )

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
                keys=[keys.lease, keys.queue, keys.outbox, keys.attempts],
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
            lambda: self._delivered(
                keys=[
                    keys.lease,
                    keys.queue,
                    keys.outbox,
                    keys.session,
                    keys.blocked,
                    keys.attempts,
                ],
                args=[token, job_id, 1 if keep else 0, self._outbox_ttl],
            ),
            within=self._bookkeeping_seconds,
        )
        status = int(reply[0])
        if status == 0:
            raise LeaseLostError(f"lease of {conversation_key} lost")
        if status == 1:
            return None
        outbox = await self._readable(keys, reply[5])
        return _state(
            _text(reply[1]), outbox, reply[2], reply[3], reply[4], tried=(reply[6], reply[7])
        )

    async def note_failure(self, conversation_key: str, job_id: str, kind: str) -> None:
        """Record how an attempt of ``job_id`` failed (an error kind, never its text)."""
        await self._note_failure(
            keys=[self.keys(conversation_key).attempts], args=[job_id, kind, self._outbox_ttl]
        )

    async def _readable(
        self, keys: ConversationKeys, pairs: list[bytes | str]
    ) -> tuple[OutboxEntry, ...]:
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
            job_id = _text(raw_id)
            # The job id only: the key names the chat, and the entry holds the reply's text.
            logger.warning(
                "Outbox entry of job %s is unreadable; moved to the chat's outbox quarantine",
                job_id,
            )
            await self._quarantine(
                keys=[keys.outbox, keys.outbox_quarantine],
                args=[job_id, raw, self._quarantine_ttl],
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
            lambda: self._release(keys=[keys.lease, keys.attempts], args=[token, unrun_job_id]),
            within=self._bookkeeping_seconds,
        )

    async def waiting(self, conversation_key: str) -> tuple[int, bool]:
        """The chat's queued jobs and whether a worker holds its lease (for the sweep)."""
        keys = self.keys(conversation_key)
        reply = await self._waiting(keys=[keys.queue, keys.lease], args=[])
        return int(reply[0]), int(reply[1]) == 1


def _state(
    head_raw: str,
    outbox: tuple[OutboxEntry, ...],
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
        session_version=_text(version),
        session_data=_text(data),
        blocked=int(str(blocked)) == 1,
        attempts=int(str(tried[0])) if head is not None else 0,
        failure=_text(tried[1]),
    )


def _outbox_entry(raw: object) -> OutboxEntry | None:
    """The entry, or ``None`` when it is not one (the caller logs and moves it aside)."""
    try:
        return OutboxEntry.model_validate_json(_text(raw))
    except (ValidationError, UnicodeDecodeError):
        return None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else ""
