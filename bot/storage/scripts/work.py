"""The work stream's scripts: a signal and its chat in the index, and the sweep's steps.

The stream and its index share the stream's hash tag. The rules every script
keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.scripts.base import Argv, Key, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalScript(LuaScript):
    """The signal, and its chat in the index scored by the signal's time (ms, Redis's clock).

    Returns the signal's id. Twice: one extra signal, which is harmless.
    """

    SOURCE = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'c', ARGV[1])
redis.call('ZADD', KEYS[2], tonumber(string.match(id, '^%d+')), ARGV[1])
return id
"""

    stream: Key
    index: Key
    conversation_key: Argv[str]
    maxlen: Argv[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stale(LuaScript):
    """Index entries older than ``older_than_ms`` by Redis's clock, oldest first (read-only).

    Returns ``{conversation, score, ...}``.
    """

    SOURCE = """
local now = redis.call('TIME')
local limit = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[1])
return redis.call('ZRANGE', KEYS[1], '-inf', limit, 'BYSCORE', 'LIMIT', ARGV[2], ARGV[3],
                  'WITHSCORES')
"""

    index: Key
    older_than_ms: Argv[int]
    offset: Argv[int]
    count: Argv[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Forget(LuaScript):
    """Drop a chat's index entry unless it was signalled since ``score`` was read."""

    SOURCE = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

    index: Key
    conversation_key: Argv[str]
    score: Argv[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resignal(LuaScript):
    """Signal again, unless signalled since or the last signal is still live.

    Live: not yet read by the group, or pending (a worker has it, or claims it
    after a lease). Returns 1 signalled again, 0 not.
    """

    SOURCE = """
if redis.call('ZSCORE', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local signalled = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 1 then
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local fields = {}
    for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
    if fields['name'] == ARGV[4] then
      local read = tonumber(string.match(fields['last-delivered-id'], '^%d+'))
      if signalled > read then return 0 end
      local pending = redis.call('XPENDING', KEYS[1], ARGV[4], ARGV[2] .. '-0',
                                 ARGV[2] .. '-18446744073709551615', 1)
      if #pending > 0 then return 0 end
    end
  end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'c', ARGV[1])
redis.call('ZADD', KEYS[2], tonumber(string.match(id, '^%d+')), ARGV[1])
return 1
"""

    stream: Key
    index: Key
    conversation_key: Argv[str]
    # The score read: the chat's last signal's ms.
    score: Argv[str]
    maxlen: Argv[int]
    group: Argv[str]
