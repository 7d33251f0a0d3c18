"""Handoff scripts: a chat's failed turns, and the idle clock of open handoffs.

The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
from bot.storage.scripts.base import Argv, Key, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordFailure(LuaScript):
    """Remember a failed turn (the newest ``kept``) and its streak; returns the streak length.

    A second run of the same turn id changes nothing (``LREM`` first, a set for the streak).
    """

    SOURCE = """
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return redis.call('SCARD', KEYS[2])
"""

    chat: ConversationKeys
    turn_id: Argv[str]
    kept: Argv[int]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.failed, self.chat.failed_streak]


@dataclass(frozen=True, slots=True, kw_only=True)
class Postpone(LuaScript):
    """Move a handoff's idle score from the one seen to a new one (a later activity wins).

    Returns 1 when the score is the new one now (also on a second run), 0 when
    something else moved it.
    """

    SOURCE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
  return 1
end
if tonumber(score) == tonumber(ARGV[3]) then return 1 end
return 0
"""

    open_handoffs: Key
    conversation_key: Argv[str]
    seen_ms: Argv[int]
    new_ms: Argv[int]
