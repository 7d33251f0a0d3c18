"""One conversation's scripts: the lease, the head job, the session, the outbox, the attempts.

Every key is the conversation's own (:class:`~bot.storage.keys.ConversationKeys`,
one hash tag). The rules they keep (lease, version, outbox, attempts) are
stated once, in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
from bot.storage.scripts.base import Argv, LuaScript

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
    -- The count was read just above: one HSET writes it and the token together.
    count = count + 1
    redis.call('HSET', key, id, count, id .. ':by', token)
    redis.call('EXPIRE', key, ttl)
  end
  return {count, seen[3] or ''}
end
"""


def _worker_view(chat: ConversationKeys) -> list[str]:
    """The keys a worker reads taking the chat and after each delivery (``Take``, ``Delivered``)."""
    return [chat.lease, chat.queue, chat.outbox, chat.session, chat.blocked, chat.attempts]


@dataclass(frozen=True, slots=True, kw_only=True)
class Acquire(LuaScript):
    """Take a free lease and read the session in the same trip (the console, an action press).

    Returns ``{1, version, data}`` when taken, ``{0, the lease's PTTL}`` when held
    by another token. A lease already ours (a repeated run: redis-py re-sends a
    script after a connection error) is renewed and answered as taken.
    """

    SOURCE = """
-- A free lease (the usual case) is taken in one command; a held one is read after.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[1])} end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local stored = redis.call('HMGET', KEYS[2], 'v', 'd')
return {1, stored[1] or '', stored[2] or ''}
"""

    chat: ConversationKeys
    token: Argv[str]
    lease_ms: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.lease, self.chat.session]


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit(LuaScript):
    """Save the session over the version loaded; with a job, pop it and store its reply.

    Returns 1 saved, 2 saved before (a repeated run), 0 the version changed,
    -1 the lease is not ours (when it must be), -2 the job is not at the head.
    A repeated run is known by the token that saved (field ``c``), never by equal
    content alone: a worker that lost the chat while frozen may compute exactly the
    session its taker saved, and its late commit must fail, not pass as its own.
    The same holds for the job's outbox entry: put there under another token (the
    taker answered the job and has not delivered it yet), it answers -1.
    """

    SOURCE = """
local stored = redis.call('HMGET', KEYS[1], 'v', 'd', 'c', 'h')
if stored[1] == ARGV[3] and stored[2] == ARGV[4] and stored[3] == ARGV[1] then return 2 end
-- The job's outbox entry already there: saved before by this token (2), else another
-- worker's answer (-1); 'otherwise' when it is not there. Asked only on the way out of
-- a commit that cannot save: the entry is written with the job's pop, so while the job
-- is at the head, the version loaded and the lease ours, it cannot be there.
local function answered_before(otherwise)
  if ARGV[7] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[7]) == 1 then
    if stored[3] == ARGV[1] then return 2 end
    return -1
  end
  return otherwise
end
local ours = redis.call('GET', KEYS[2]) == ARGV[1]
if ARGV[10] == '1' and not ours then return answered_before(-1) end
if (stored[1] or '') ~= ARGV[2] then
  local before = answered_before(nil)
  if before then return before end
  if ours and ARGV[9] == '1' then redis.call('DEL', KEYS[2]) end
  return 0
end
if ARGV[6] ~= '' and redis.call('LINDEX', KEYS[3], 0) ~= ARGV[6] then
  return answered_before(-2)
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'd', ARGV[4], 'c', ARGV[1])
if ARGV[12] ~= '' then
  redis.call('HSET', KEYS[1], 'h', ARGV[12])
elseif stored[4] then
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

    chat: ConversationKeys
    token: Argv[str]
    version: Argv[str]
    new_version: Argv[str]
    data: Argv[str]
    ttl: Argv[int]
    # The worker's job ('' for none: the console's turn), its id and its outbox entry.
    job_raw: Argv[str]
    job_id: Argv[str]
    outbox_entry: Argv[str]
    release: Argv[bool]
    lease_must_be_ours: Argv[bool]
    # An answered job ends the chat's run of failed turns.
    answered: Argv[bool]
    # The handoff state ('' while the bot answers), kept in field ``h`` for intake.
    handoff: Argv[str]

    def keys(self) -> list[str]:
        chat = self.chat
        return [chat.session, chat.lease, chat.queue, chat.outbox, chat.failed_streak]


@dataclass(frozen=True, slots=True, kw_only=True)
class Release(LuaScript):
    """Give the lease back if it is ours; returns 1 released, 0 not ours.

    ``unrun_job_id``: the head job this lease was handed and never ran (a stop
    before it started): its attempt under this token is taken back, once (the
    token's mark goes with it), so a hand-back at shutdown is no attempt.
    """

    SOURCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[2], ARGV[2] .. ':by') == ARGV[1] then
  redis.call('HINCRBY', KEYS[2], ARGV[2], -1)
  redis.call('HDEL', KEYS[2], ARGV[2] .. ':by')
end
return redis.call('DEL', KEYS[1])
"""

    chat: ConversationKeys
    token: Argv[str]
    unrun_job_id: Argv[str] = ""

    def keys(self) -> list[str]:
        return [self.chat.lease, self.chat.attempts]


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveAside(LuaScript):
    """Move the session (or a corrupt entry) to ``target`` under its own TTL; release if ours.

    ``token`` '' keeps the lease. Returns 1.
    """

    SOURCE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
if ARGV[1] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1
"""

    chat: ConversationKeys
    # The chat's archive or quarantine key.
    target: str
    token: Argv[str]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.session, self.target, self.chat.lease]


@dataclass(frozen=True, slots=True, kw_only=True)
class Take(LuaScript):
    """A worker takes the lease (or keeps the one it holds) and reads the chat in one trip.

    Returns ``{0}`` when another worker holds it, else ``{1, head job, outbox
    (field, value, ...), session version, session data, blocked (0/1), attempt,
    last failure}``.
    """

    SOURCE = (
        _ATTEMPT
        + """
-- A free lease (the usual case) is taken in one command; a held one is read after.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local head = redis.call('LINDEX', KEYS[2], 0) or ''
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
local tried = attempt(KEYS[6], head, ARGV[1], ARGV[3])
return {1, head, redis.call('HGETALL', KEYS[3]), stored[1] or '', stored[2] or '',
        redis.call('EXISTS', KEYS[5]), tried[1], tried[2]}
"""
    )

    chat: ConversationKeys
    token: Argv[str]
    lease_ms: Argv[int]
    # The attempts hash's TTL.
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return _worker_view(self.chat)


@dataclass(frozen=True, slots=True, kw_only=True)
class Renew(LuaScript):
    """The heartbeat: extend the lease only while it is ours; returns 1 renewed, 0 not ours."""

    SOURCE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

    chat: ConversationKeys
    token: Argv[str]
    lease_ms: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.lease]


@dataclass(frozen=True, slots=True, kw_only=True)
class Complete(LuaScript):
    """Pop the head job and put its reply in the outbox, unless that already happened.

    Returns 1 done, 2 already done, 0 lease lost, -1 the job is not at the head.
    The lease is checked first: the job's outbox entry under another worker's lease
    is that worker's answer (this one was frozen past its lease), not "done before".
    """

    SOURCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return 2 end
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

    chat: ConversationKeys
    token: Argv[str]
    job_raw: Argv[str]
    job_id: Argv[str]
    # The reply's outbox entry ('' for none).
    outbox_entry: Argv[str]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        chat = self.chat
        return [chat.lease, chat.queue, chat.outbox, chat.attempts]


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivered(LuaScript):
    """Drop a delivered reply and read the next job, or release the lease when all is done.

    Returns ``{0}`` lease lost, ``{1}`` released (queue empty), or ``{2, next
    job, version, data, blocked, outbox, attempt, last failure}``: the outbox
    (field, value pairs) only when it holds entries and no job is queued, the
    only way it stays non-empty (entries this drain did not take: another
    version's, or unreadable ones). A release leaves the token in ``released``
    for one lease: a repeated run (redis-py re-sends a script after a
    connection error) finds its own release there and answers ``{1}`` again.
    """

    SOURCE = (
        _ATTEMPT
        + """
-- The delivered job's attempts go too; on a release the whole hash goes (no HDEL first).
local function forget_attempts()
  if ARGV[2] ~= '' then
    redis.call('HDEL', KEYS[6], ARGV[2], ARGV[2] .. ':by', ARGV[2] .. ':error')
  end
end
if ARGV[2] ~= '' then redis.call('HDEL', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  forget_attempts()
  if ARGV[3] ~= '1' and redis.call('GET', KEYS[7]) == ARGV[1] then return {1} end
  return {0}
end
local head = redis.call('LINDEX', KEYS[2], 0)
local outbox = {}
if not head then
  if ARGV[3] ~= '1' then
    if redis.call('HLEN', KEYS[3]) == 0 then
      redis.call('DEL', KEYS[1], KEYS[6])
      redis.call('SET', KEYS[7], ARGV[1], 'PX', ARGV[5])
      return {1}
    end
    outbox = redis.call('HGETALL', KEYS[3])
  end
  head = ''
end
forget_attempts()
local stored = redis.call('HMGET', KEYS[4], 'v', 'd')
local tried = attempt(KEYS[6], head, ARGV[1], ARGV[4])
return {2, head, stored[1] or '', stored[2] or '', redis.call('EXISTS', KEYS[5]), outbox,
        tried[1], tried[2]}
"""
    )

    chat: ConversationKeys
    token: Argv[str]
    # The job whose reply was delivered ('' for none).
    job_id: Argv[str]
    # Keep the lease even when the queue is empty (a summary follows).
    keep: Argv[bool]
    ttl: Argv[int]
    # How long the release is remembered (one lease).
    lease_ms: Argv[int]

    def keys(self) -> list[str]:
        return [*_worker_view(self.chat), self.chat.released]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuarantineOutbox(LuaScript):
    """Move an unreadable outbox entry aside, unless it changed or went meanwhile. Returns 1."""

    SOURCE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"""

    chat: ConversationKeys
    job_id: Argv[str]
    # The entry as read (bytes as Redis gave them).
    entry: Argv[str | bytes]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.outbox, self.chat.outbox_quarantine]


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteFailure(LuaScript):
    """Name how a job's attempt failed, only while the job is counted. Returns 1."""

    SOURCE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':error', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return 1
"""

    chat: ConversationKeys
    job_id: Argv[str]
    # A failure kind, never an error's text.
    kind: Argv[str]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.attempts]


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiting(LuaScript):
    """Read-only, for the sweep: ``{queued jobs, lease held (0/1)}``."""

    SOURCE = """
return {redis.call('LLEN', KEYS[1]), redis.call('EXISTS', KEYS[2])}
"""

    chat: ConversationKeys

    def keys(self) -> list[str]:
        return [self.chat.queue, self.chat.lease]
