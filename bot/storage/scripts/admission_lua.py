"""Accepting an update: the chat's queue with de-duplication and flood control, and staff floods.

The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
from bot.storage.scripts.base import Argv, Key, LuaScript

# A token bucket in hash KEYS[bucket], charged at a message's own time: 'ok' takes a token;
# over it, 'rate_warn' the first time (until a token is taken again), then 'rate_quiet'.
#
# message_time(sent, backlog) is when the message was written (Telegram's 'date', in ms),
# clamped to [Redis's now - backlog, Redis's now]: a date from the future counts as now,
# one older than the backlog window as its edge; 0 (unknown) is now. A backlog taken in
# at once (after an outage, a polling pause, webhook redeliveries) is so charged at the
# pace it was written, never as one burst. The bucket's clock only moves forward: an
# older date than the last one refills nothing.
_BUCKET_LUA = """
local function message_time(sent, backlog)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if sent == nil or sent <= 0 then return now end
  return math.max(now - backlog, math.min(now, sent))
end
local function take_token(bucket, burst, interval, at)
  local state = redis.call('HMGET', bucket, 'tokens', 'ts', 'warned')
  local tokens = tonumber(state[1])
  local ts = tonumber(state[2])
  if tokens == nil or ts == nil then
    tokens = burst
    ts = at
  end
  tokens = math.min(burst, tokens + math.max(0, at - ts) / interval)
  local stamp = math.max(ts, at)
  local verdict = 'ok'
  if tokens < 1 then
    verdict = 'rate_quiet'
    if state[3] ~= '1' then verdict = 'rate_warn' end
    redis.call('HSET', bucket, 'tokens', tostring(tokens), 'ts', tostring(stamp), 'warned', '1')
  else
    redis.call('HSET', bucket, 'tokens', tostring(tokens - 1), 'ts', tostring(stamp), 'warned', '0')
  end
  redis.call('PEXPIRE', bucket, math.ceil(burst * interval) + 1000)
  return verdict
end
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept(LuaScript):
    """De-duplicate the update, apply the queue cap, flood control and daily budget, queue it.

    The flood bucket is charged at the message's own time (``sent_ms``, clamped
    to the backlog window), not at the moment intake runs.

    Returns ``{verdict, signal}``: signal is 1 when the queue has work and no
    worker holds it. The ``seen`` mark makes a second run answer
    ``duplicate``. A full queue takes nothing more (its notice aside, once per
    fill: the mark is cleared when intake finds room again); the flood bucket
    is not touched then.
    """

    SOURCE = (
        _BUCKET_LUA
        + """
-- queued: the queue's length when the caller knows it (RPUSH answers it), else nil.
local function needs_signal(queued)
  queued = queued or redis.call('LLEN', KEYS[2])
  if queued > 0 and redis.call('EXISTS', KEYS[3]) == 0 then return 1 end
  return 0
end
-- The queue had room: the "full" mark goes, and the signal is decided. One EXISTS asks for
-- the lease and the mark together; only when either is there does the mark's DEL follow
-- (its answer tells the two apart), so an idle chat without the mark pays one command.
local function had_room(queued)
  queued = queued or redis.call('LLEN', KEYS[2])
  local held = redis.call('EXISTS', KEYS[3], KEYS[7])
  if held > 0 then held = held - redis.call('DEL', KEYS[7]) end
  if queued > 0 and held == 0 then return 1 end
  return 0
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return {'duplicate', needs_signal()}
end
local cap = tonumber(ARGV[11])
local signal = needs_signal
-- With a cap the job goes in first: RPUSH answers the length, so a queue with room (the
-- usual case) needs no LLEN, and a full one gives the job back at once, before the flood
-- bucket or the daily count is touched (the script is atomic: nobody sees it in between).
local queued = nil
if cap > 0 then
  signal = had_room
  queued = redis.call('RPUSH', KEYS[2], ARGV[2])
  if queued > cap then
    redis.call('RPOP', KEYS[2])
    if ARGV[12] ~= '' and redis.call('SET', KEYS[7], '1', 'NX', 'EX', ARGV[13]) then
      return {'full_warn', needs_signal(redis.call('RPUSH', KEYS[2], ARGV[12]))}
    end
    return {'full_quiet', needs_signal(queued - 1)}
  end
end
local verdict = 'ok'
-- An album's photos after its first come with it: one charge takes in up to ARGV[17] of them.
local album_ttl = tonumber(ARGV[16])
local with_album = false
if album_ttl > 0 then
  local taken = tonumber(redis.call('GET', KEYS[8]) or '0')
  if taken > 0 and taken < tonumber(ARGV[17]) then
    redis.call('INCR', KEYS[8])
    with_album = true
  end
end
if ARGV[5] == '1' and not with_album then
  local at = message_time(tonumber(ARGV[14]), tonumber(ARGV[15]))
  verdict = take_token(KEYS[4], tonumber(ARGV[7]), tonumber(ARGV[8]), at)
  -- A message to a person (a handoff) is no model turn: the daily limit skips it.
  if verdict == 'ok' and ARGV[6] == '1' and redis.call('HEXISTS', KEYS[6], 'h') == 0 then
    local used = redis.call('INCR', KEYS[5])
    if used == 1 then redis.call('EXPIRE', KEYS[5], tonumber(ARGV[10])) end
    local limit = tonumber(ARGV[9])
    if used == limit + 1 then
      verdict = 'daily_warn'
    elseif used > limit then
      verdict = 'daily_quiet'
    end
  end
  if verdict == 'ok' and album_ttl > 0 then
    redis.call('SET', KEYS[8], '1', 'EX', album_ttl)
  end
end
local notice = nil
if verdict == 'rate_warn' then
  notice = ARGV[3]
elseif verdict == 'daily_warn' then
  notice = ARGV[4]
end
if queued == nil then
  -- No cap: the job (or the verdict's notice) goes in now.
  if verdict == 'ok' then
    queued = redis.call('RPUSH', KEYS[2], ARGV[2])
  elseif notice then
    queued = redis.call('RPUSH', KEYS[2], notice)
  end
elseif notice then
  -- The job taken in first gives its place to the verdict's notice...
  redis.call('LSET', KEYS[2], -1, notice)
elseif verdict ~= 'ok' then
  -- ...or to nothing.
  redis.call('RPOP', KEYS[2])
  queued = queued - 1
end
return {verdict, signal(queued)}
"""
    )

    chat: ConversationKeys
    update_id: int
    # The sender (0 for none): their flood bucket and daily counter.
    user_id: int
    # The day of the daily counter (YYYYMMDD).
    day: str
    seen_ttl: Argv[int]
    job: Argv[str]
    rate_notice: Argv[str]
    daily_notice: Argv[str]
    check_flood: Argv[bool]
    counts_turn: Argv[bool]
    burst: Argv[int]
    interval_ms: Argv[float]
    daily_limit: Argv[int]
    day_counter_ttl: Argv[int]
    # The most jobs the queue holds (0: no cap).
    queue_cap: Argv[int]
    # The job telling the customer the queue is full ('' : nobody to tell).
    full_notice: Argv[str]
    full_mark_ttl: Argv[int]
    # When the message was written (Telegram's date, ms; 0: unknown, Redis's now) and how
    # far back such a date is believed (the backlog window, ms).
    sent_ms: Argv[int] = 0
    backlog_ms: Argv[int] = 0
    # A photo of an album (``media_group_id``, else ''): the album is charged once, with the
    # first of its photos taken in, for up to ``album_size`` photos within ``album_ttl``.
    media_group_id: str = ""
    album_ttl: Argv[int] = 0
    album_size: Argv[int] = 10

    def keys(self) -> list[str]:
        chat = self.chat
        return [
            chat.seen(self.update_id),
            chat.queue,
            chat.lease,
            chat.flood(self.user_id),
            chat.daily_turns(self.user_id, self.day),
            chat.session,
            chat.queue_full,
            chat.album_charged(self.media_group_id or "-"),
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class StaffFlood(LuaScript):
    """A staff member's message: their bucket in the staff group (one for all their topics).

    The verdict is kept in the update's mark: a second run answers the first run's verdict.
    """

    SOURCE = (
        _BUCKET_LUA
        + """
local prior = redis.call('GET', KEYS[1])
if prior then return prior end
local at = message_time(tonumber(ARGV[4]), tonumber(ARGV[5]))
local verdict = take_token(KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]), at)
redis.call('SET', KEYS[1], verdict, 'EX', ARGV[1])
return verdict
"""
    )

    # The update's mark and the member's bucket, both in the staff group's slot.
    seen: Key
    bucket: Key
    seen_ttl: Argv[int]
    burst: Argv[int]
    interval_ms: Argv[float]
    # As in :class:`Accept`: the message's own time and the backlog window (ms).
    sent_ms: Argv[int] = 0
    backlog_ms: Argv[int] = 0
