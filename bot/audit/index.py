"""The audit index, written with each turn's entries: lookups and stats without reading the stream.

One script appends a turn's entries and, in the same call and the same cluster
slot, records (see :class:`~bot.redis_keys.AuditIndexKeys`):

- the turn's entry ids (``turn CODE`` reads only those entries);
- the chat's newest turn ids, at most :data:`CHAT_TURNS_KEPT` (``tail --chat``);
- per-minute rollups: counts by tool and status, outcome, handoff and action
  event, feedback (questions asked and scores, by who answered), and fixed
  histogram buckets for every time and token count that ``stats`` gives
  percentiles of (so a percentile is the bucket's upper bound, within
  :data:`BUCKET_GROWTH` of the true value; the maximum is exact);
- when each tool, status and outcome was last seen (a filter that names none
  of them finds nothing, at once).

Nothing in it holds text or arguments: ids, names, categories and numbers.
The script marks the turn first (``SET NX``), so a repeated write changes
neither the stream nor the index. After appending it trims the index with the
stream: turns whose newest entry is older than the stream's first entry, and
minutes before it, are removed (a few hundred at most per write, so the cost
of a write stays bounded).
"""

import math
from collections.abc import Mapping, Sequence

from bot.audit.feedback import rollup_fields as feedback_rollups
from bot.audit.schema import (
    CHAT_ID,
    DURATION_MS,
    LATENCY_MS,
    OUTCOME,
    RESULT_COUNT,
    STATUS,
    TOOL_NAME,
    TOTAL_TOKENS,
    TURN_ID,
    TYPE,
    EntryType,
)
from bot.redis_keys import AuditIndexKeys

CHAT_TURNS_KEPT = 100
"""How many of a chat's newest turns the index names."""

BUCKET_GROWTH = 1.1
"""Each histogram bucket's upper bound is this much above the previous one's."""

_TRIM_BATCH = 500
SEARCH_TOOL = "search_help_center"
MAX_PREFIX = "max|"
HLL_PREFIX = "hll|"
NAME_PREFIX = "name|"

# KEYS: stream, the turn's done mark, turns, order, chats, names, minutes, start.
# ARGV: maxlen, mark ttl, entry count, turn id, chat, chats kept, minute key prefix,
#       trim batch, then per entry: field count, field, value, ..., rollup count,
#       rollup field, value, ... (``max|f``: keep the larger; ``hll|``: the chat into
#       the minute's HyperLogLog; ``name|x``: x last seen now; else HINCRBY).
WRITE_ONCE = """
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 0 end
local prefix = ARGV[7]
local ids = {}
local last_ms = 0
local i = 9
for _ = 1, tonumber(ARGV[3]) do
  local count = tonumber(ARGV[i])
  i = i + 1
  local command = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*'}
  for _ = 1, count * 2 do
    command[#command + 1] = ARGV[i]
    i = i + 1
  end
  local id = redis.call(unpack(command))
  ids[#ids + 1] = id
  local ms_text = string.match(id, '^(%d+)')
  last_ms = tonumber(ms_text)
  local minute = tostring(math.floor(last_ms / 60000))
  local mkey = prefix .. minute
  local rollups = tonumber(ARGV[i])
  i = i + 1
  if rollups > 0 then redis.call('ZADD', KEYS[7], minute, minute) end
  for _ = 1, rollups do
    local f, v = ARGV[i], ARGV[i + 1]
    i = i + 2
    local kind = string.sub(f, 1, 4)
    if kind == 'max|' then
      local current = tonumber(redis.call('HGET', mkey, f))
      if not current or tonumber(v) > current then redis.call('HSET', mkey, f, v) end
    elseif kind == 'hll|' then
      redis.call('PFADD', mkey .. ':c', v)
    elseif kind == 'name' then
      redis.call('HSET', KEYS[6], v, ms_text)
    else
      redis.call('HINCRBY', mkey, f, v)
    end
  end
end
local turn, chat, kept = ARGV[4], ARGV[5], tonumber(ARGV[6])
if turn ~= '' and #ids > 0 then
  redis.call('HSET', KEYS[3], turn, chat .. '|' .. table.concat(ids, ','))
  redis.call('ZADD', KEYS[4], last_ms, turn)
  if chat ~= '' then
    local list = {turn}
    local current = redis.call('HGET', KEYS[5], chat)
    if current then
      for other in string.gmatch(current, '[^,]+') do
        if other ~= turn and #list < kept then list[#list + 1] = other end
      end
    end
    redis.call('HSET', KEYS[5], chat, table.concat(list, ','))
  end
end
if #ids > 0 then redis.call('SET', KEYS[8], ids[1], 'NX') end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if first then
  local first_ms, first_seq = string.match(first[1], '^(%d+)-(%d+)')
  first_ms, first_seq = tonumber(first_ms), tonumber(first_seq)
  local batch = tonumber(ARGV[8])
  -- Scores are milliseconds: a turn of the first entry's millisecond is gone only
  -- if its newest entry id is below the first one.
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', first_ms,
      'LIMIT', 0, batch)) do
    local value = redis.call('HGET', KEYS[3], gone)
    local newest_ms, newest_seq = string.match(value or '', '(%d+)-(%d+)$')
    newest_ms, newest_seq = tonumber(newest_ms), tonumber(newest_seq)
    local older = not newest_ms or newest_ms < first_ms
      or (newest_ms == first_ms and newest_seq < first_seq)
    if older then
      local owner = value and string.match(value, '^([^|]*)|')
      if owner and owner ~= '' then
        local current = redis.call('HGET', KEYS[5], owner)
        if current then
          local list = {}
          for other in string.gmatch(current, '[^,]+') do
            if other ~= gone then list[#list + 1] = other end
          end
          if #list == 0 then redis.call('HDEL', KEYS[5], owner)
          else redis.call('HSET', KEYS[5], owner, table.concat(list, ',')) end
        end
      end
      redis.call('HDEL', KEYS[3], gone)
      redis.call('ZREM', KEYS[4], gone)
    end
  end
  local first_minute = math.floor(first_ms / 60000)
  local trimmed = false
  for _, minute in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', '(' .. first_minute,
      'LIMIT', 0, batch)) do
    redis.call('DEL', prefix .. minute, prefix .. minute .. ':c')
    redis.call('ZREM', KEYS[7], minute)
    trimmed = true
  end
  -- Names last seen before the stream's first entry (a few dozen names: once a minute).
  if trimmed then
    local names = redis.call('HGETALL', KEYS[6])
    for n = 1, #names, 2 do
      if tonumber(names[n + 1]) < first_ms then redis.call('HDEL', KEYS[6], names[n]) end
    end
  end
end
return 1
"""


def bucket(value: float) -> int:
    """The histogram bucket of ``value`` (0 for values up to 1)."""
    if value <= 1:
        return 0
    return math.ceil(math.log(value) / math.log(BUCKET_GROWTH) - 1e-9)


def bucket_upper(index: int) -> float:
    """The upper bound of bucket ``index`` (what a percentile in it reads as)."""
    return float(BUCKET_GROWTH**index)


def rollups(fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """The rollup updates of one entry (see the script): counts, buckets, maxima, names."""
    kind = fields.get(TYPE, "")
    out: list[tuple[str, str]] = [("entries", "1")]
    if kind == EntryType.TOOL:
        name, status = fields.get(TOOL_NAME, ""), fields.get(STATUS, "")
        out += [(f"tool|{name}|{status}", "1"), (NAME_PREFIX, f"tool:{name}")]
        out.append((NAME_PREFIX, f"status:{status}"))
        out += _measure(f"tool_ms|{name}", fields.get(DURATION_MS))
        count = _number(fields.get(RESULT_COUNT))
        if name == SEARCH_TOOL and status == "success" and count is not None:
            out.append(("search", "1"))
            if count == 0:
                out.append(("search_empty", "1"))
    elif kind == EntryType.TURN:
        outcome = fields.get(OUTCOME, "")
        out += [(f"outcome|{outcome}", "1"), (NAME_PREFIX, f"outcome:{outcome}")]
        if fields.get(CHAT_ID):
            out.append((HLL_PREFIX, fields[CHAT_ID]))
        out += _measure("turn_ms", fields.get(LATENCY_MS))
        tokens = _number(fields.get(TOTAL_TOKENS))
        if tokens is None:
            out.append(("tok_unknown", "1"))
        else:
            out += [("tok_sum", str(int(tokens))), *_measure("tok", str(tokens))]
    elif kind == EntryType.HANDOFF:
        event = fields.get("event", "")
        out.append((f"handoff|{event}", "1"))
        if event == "first_reply":
            out += _measure("wait", fields.get("wait_ms"))
    elif kind == EntryType.ACTION:
        name, event = fields.get(TOOL_NAME, ""), fields.get("event", "")
        out.append((f"action|{name}|{event}", "1"))
        if event in ("confirmed", "declined"):
            out += _measure(f"decide|{name}", fields.get("decide_ms"))
    elif kind == EntryType.FEEDBACK:
        out += feedback_rollups(fields)
    return out


def write_once_call(
    index: AuditIndexKeys,
    stream: str,
    done_key: str,
    rows: Sequence[Mapping[str, str]],
    *,
    maxlen: int,
    done_ttl_seconds: int,
) -> tuple[list[str], list[str | int]]:
    """The keys and arguments of :data:`WRITE_ONCE` for one turn's ``rows``."""
    first = rows[0]
    args: list[str | int] = [
        maxlen,
        done_ttl_seconds,
        len(rows),
        first.get(TURN_ID, ""),
        first.get(CHAT_ID, ""),
        CHAT_TURNS_KEPT,
        index.minute_prefix,
        _TRIM_BATCH,
    ]
    for row in rows:
        args.append(len(row))
        for name, value in row.items():
            args.extend((name, value))
        updates = rollups(row)
        args.append(len(updates))
        for name, value in updates:
            args.extend((name, value))
    keys = [
        stream,
        done_key,
        index.turns,
        index.order,
        index.chats,
        index.names,
        index.minutes,
        index.start,
    ]
    return keys, args


def _measure(name: str, raw: str | None) -> list[tuple[str, str]]:
    value = _number(raw)
    if value is None:
        return []
    return [(f"{name}|b{bucket(value)}", "1"), (f"{MAX_PREFIX}{name}", repr(value))]


def _number(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None
