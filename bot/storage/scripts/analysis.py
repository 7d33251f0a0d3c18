"""The request analysis's script: one analysis per conversation per idle, whatever the processes.

``{<conv>}:analysis`` is the conversation's hash (its slot); ``{analysis}:due``
is claimed with :class:`~bot.storage.scripts.csat.ClaimDue` like the CSAT
schedule. The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
from bot.storage.scripts.base import Argv, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginAnalysis(LuaScript):
    """Claim the analysis of session version ``version`` for ``token``.

    Returns 1 when this token may analyse it (also on a second run with the same
    token), 0 when that version was claimed by another (or analysed already).
    """

    SOURCE = """
local claimed = redis.call('HMGET', KEYS[1], 'v', 'by')
if claimed[1] == ARGV[1] then
  if claimed[2] == ARGV[2] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'by', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""

    chat: ConversationKeys
    version: Argv[str]
    token: Argv[str]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.analysis]
