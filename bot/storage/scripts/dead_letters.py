"""The dead letters' scripts: a job given up, recorded once, the newest ``kept`` of them;
queued again (``support-audit dead-letters retry``) or dropped.

The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Redrive(LuaScript):
    """Queue a dead letter's job again at the tail of its chat; returns 1 queued, 0 done before.

    The mark (set for ``mark_ttl`` seconds) makes a repeated run, or a second
    retry of the same letter, queue nothing. The job starts with no attempts
    counted: its earlier ones were what made it a dead letter.
    """

    SOURCE = """
if not redis.call('SET', KEYS[3], '1', 'NX', 'EX', ARGV[3]) then return 0 end
redis.call('HDEL', KEYS[2], ARGV[2], ARGV[2] .. ':by', ARGV[2] .. ':error')
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""

    chat: ConversationKeys
    # The dead letter's turn id: names the mark.
    turn_id: str
    job: Argv[str]
    job_id: Argv[str]
    mark_ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.queue, self.chat.attempts, self.chat.redriven(self.turn_id)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DropDeadLetter(LuaScript):
    """Forget a dead letter (its record, with the job a retry needs, and its place in the order).

    Returns 1 dropped, 0 no such letter (dropped before).
    """

    SOURCE = """
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
"""

    letters: Key
    order: Key
    turn_id: Argv[str]
