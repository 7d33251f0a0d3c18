"""The dead letters' script: a job given up, recorded once, the newest ``kept`` of them.

The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.scripts.base import Argv, Key, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordDeadLetter(LuaScript):
    """Keep a dead letter under its turn id; returns 1 recorded, 0 recorded before (it stays)."""

    SOURCE = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
  redis.call('HDEL', KEYS[1], unpack(oldest))
end
return 1
"""

    # The records (hash) and their order (zset), in the dead letters' own slot.
    letters: Key
    order: Key
    turn_id: Argv[str]
    record: Argv[str]
    given_up_ms: Argv[int]
    kept: Argv[int]
