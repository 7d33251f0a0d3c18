"""The satisfaction question's scripts: the due schedule, asking once, recording one answer.

``{csat}:due`` is one zset for every chat (its own slot); ``{<conv>}:csat`` is
the conversation's hash. The rules every script keeps are stated in
:mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import ConversationKeys
from bot.storage.scripts.base import Argv, Key, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimDue(LuaScript):
    """Claim the conversations due by ``now_ms``: each claimed score moves on by ``retry_ms``.

    Returns ``{new score, member...}``; a second run (or sweeper) finds nothing due.
    """

    SOURCE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local moved = tonumber(ARGV[1]) + tonumber(ARGV[2])
local out = {tostring(moved)}
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], moved, member)
  out[#out + 1] = member
end
return out
"""

    due: Key
    now_ms: Argv[int]
    retry_ms: Argv[int]
    # The most conversations claimed at once.
    limit: Argv[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgetDue(LuaScript):
    """Take a conversation off the schedule only if it is still scored as claimed (1), else 0."""

    SOURCE = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
"""

    due: Key
    conversation_key: Argv[str]
    claimed_ms: Argv[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask(LuaScript):
    """Open question ``question_id`` unless one was asked within the interval.

    Returns ``{'ask'|'again', by, turns}`` or ``{'recent'}``; ``'again'`` for
    the same question id (a second run).
    """

    SOURCE = """
local h = KEYS[1]
if redis.call('HGET', h, 'q') == ARGV[3] then
  return {'again', redis.call('HGET', h, 'by') or 'bot', redis.call('HGET', h, 'turns') or '0'}
end
local last = tonumber(redis.call('HGET', h, 'asked') or '')
if last and tonumber(ARGV[1]) - last < tonumber(ARGV[2]) then return {'recent'} end
local by = 'bot'
if redis.call('HGET', h, 'handed') == '1' then by = 'bot_then_person' end
local base = 0
if redis.call('HGET', h, 'sid') == ARGV[4] then
  base = tonumber(redis.call('HGET', h, 'base') or '0') or 0
end
local turns = math.max(0, tonumber(ARGV[5]) - base)
redis.call('HDEL', h, 'handed', 'score', 'pj')
redis.call('HSET', h, 'asked', ARGV[1], 'q', ARGV[3], 'by', by, 'turns', tostring(turns),
  'sid', ARGV[4], 'base', ARGV[5])
redis.call('EXPIRE', h, tonumber(ARGV[6]))
return {'ask', by, tostring(turns)}
"""

    chat: ConversationKeys
    now_ms: Argv[int]
    min_interval_ms: Argv[int]
    question_id: Argv[str]
    session_id: Argv[str]
    session_turns: Argv[int]
    ttl: Argv[int]

    def keys(self) -> list[str]:
        return [self.chat.csat]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordPress(LuaScript):
    """Record a press of the open question once (``HSETNX``).

    Returns ``{'recorded'|'again'|'unknown', by, turns, score}``; the same
    press job again answers ``'recorded'`` with the score it recorded.
    """

    SOURCE = """
local h = KEYS[1]
if redis.call('HGET', h, 'q') ~= ARGV[1] then return {'unknown', '', '', ''} end
local by = redis.call('HGET', h, 'by') or 'bot'
local turns = redis.call('HGET', h, 'turns') or ''
if redis.call('HSETNX', h, 'score', ARGV[2]) == 1 then
  redis.call('HSET', h, 'pj', ARGV[3])
  return {'recorded', by, turns, ARGV[2]}
end
if redis.call('HGET', h, 'pj') == ARGV[3] then
  return {'recorded', by, turns, redis.call('HGET', h, 'score')}
end
return {'again', by, turns, ''}
"""

    chat: ConversationKeys
    question_id: Argv[str]
    score: Argv[int]
    # The press's job id.
    job_id: Argv[str]

    def keys(self) -> list[str]:
        return [self.chat.csat]
