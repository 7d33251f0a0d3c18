"""A turn's audit entries and their index, written once (see :mod:`bot.audit.index`).

The stream, the turn's done mark and every index key share the stream's hash
tag. The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.keys import AuditIndexKeys
from bot.storage.scripts.base import Arg, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntryArgs:
    """One entry of the write: its stream fields and its rollup updates, in order.

    A rollup field ``max|f`` keeps the larger value; ``hll|`` adds the chat to
    the minute's HyperLogLog; ``name|`` counts the value (a name) in the minute
    as ``n|<name>`` and, the first time in that minute, records it as last seen
    at the minute's end; any other is added to the minute's count.
    """

    fields: tuple[tuple[str, str], ...]
    rollups: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOnce(LuaScript):
    """Append a turn's entries and update the index, unless the turn was written before.

    Returns 1 written, 0 written before (the mark is set first, ``SET NX``).
    """

    SOURCE = """
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) then return 0 end
local prefix = ARGV[7]
local ids = {}
local last_ms = 0
-- The rollups of every entry, gathered per minute and written per minute: one read
-- and one write of the minute's hash however many entries and fields the turn has.
local minutes, order = {}, {}
-- Names first seen in a minute, as last seen at the minute's end: never before an entry
-- that names them (a filter finds them while the stream holds one), one write a minute.
local names = {}
local every = tonumber(ARGV[9])
local i = 10
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
  local rollups = tonumber(ARGV[i])
  i = i + 1
  local m = minutes[minute]
  if rollups > 0 and not m then
    m = {add = {}, max = {}, fields = {}, chats = {}}
    minutes[minute] = m
    order[#order + 1] = minute
  end
  for _ = 1, rollups do
    local f, v = ARGV[i], ARGV[i + 1]
    i = i + 2
    local kind = string.sub(f, 1, 4)
    if kind == 'max|' then
      if m.max[f] == nil and m.add[f] == nil then m.fields[#m.fields + 1] = f end
      if m.max[f] == nil or tonumber(v) > tonumber(m.max[f]) then m.max[f] = v end
    elseif kind == 'hll|' then
      m.chats[#m.chats + 1] = v
    elseif kind == 'name' then
      -- Counted in the minute as 'n|<name>': a name the minute had before needs no write.
      local f = 'n|' .. v
      if m.add[f] == nil then m.fields[#m.fields + 1] = f end
      m.add[f] = (m.add[f] or 0) + 1
    else
      if m.add[f] == nil and m.max[f] == nil then m.fields[#m.fields + 1] = f end
      m.add[f] = (m.add[f] or 0) + tonumber(v)
    end
  end
end
-- The trim runs when a minute opens, and when the minute's count of entries passes a
-- multiple of 'every': at most 'every' turns between two trims (each drops up to a
-- batch), never a look at the stream's head on every write.
local opened, due = false, false
for _, minute in ipairs(order) do
  local m = minutes[minute]
  local mkey = prefix .. minute
  -- Every entry counts in 'entries': a minute whose hash has none of the fields is new
  -- (or was trimmed), the only case its ZADD can change anything.
  local fresh = true
  if #m.fields > 0 then
    local current = redis.call('HMGET', mkey, unpack(m.fields))
    local write = {'HSET', mkey}
    for n, f in ipairs(m.fields) do
      local now = tonumber(current[n])
      if current[n] then
        fresh = false
      elseif string.sub(f, 1, 2) == 'n|' then
        names[#names + 1] = string.sub(f, 3)
        names[#names + 1] = string.format('%d', (tonumber(minute) + 1) * 60000 - 1)
      end
      if m.add[f] ~= nil then
        local after = (now or 0) + m.add[f]
        if f == 'entries' and math.floor((now or 0) / every) ~= math.floor(after / every) then
          due = true
        end
        write[#write + 1] = f
        write[#write + 1] = string.format('%d', after)
      elseif not now or tonumber(m.max[f]) > now then
        write[#write + 1] = f
        write[#write + 1] = m.max[f]
      end
    end
    if #write > 2 then redis.call(unpack(write)) end
  end
  if fresh and redis.call('ZADD', KEYS[7], minute, minute) == 1 then opened = true end
  if #m.chats > 0 then redis.call('PFADD', mkey .. ':c', unpack(m.chats)) end
end
if #names > 0 then redis.call('HSET', KEYS[6], unpack(names)) end
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
-- The index's first entry is the first write's, which opened a minute: a write
-- inside a minute already indexed never needs to look.
if opened then redis.call('SET', KEYS[8], ids[1], 'NX') end
local first = nil
if opened or due then first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1] end
if first then
  local first_ms, first_seq = string.match(first[1], '^(%d+)-(%d+)')
  first_ms, first_seq = tonumber(first_ms), tonumber(first_seq)
  local batch = tonumber(ARGV[8])
  local dropped = false
  -- Scores are milliseconds: turns whose newest entry is of a millisecond before the
  -- first entry's are gone. Those of the first entry's own millisecond are left for
  -- a later write (the first entry's turn is always among them: not read each time).
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. first_ms,
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
      dropped = true
    end
  end
  -- Minutes fall out of the stream only as turns do, at most about one a minute:
  -- looked for by a write that opens a minute or drops turns, not by every write.
  if opened or dropped then
    local first_minute = math.floor(first_ms / 60000)
    local trimmed = false
    for _, minute in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', '(' .. first_minute,
        'LIMIT', 0, batch)) do
      redis.call('DEL', prefix .. minute, prefix .. minute .. ':c')
      redis.call('ZREM', KEYS[7], minute)
      trimmed = true
    end
    -- Names last seen before the stream's first entry (a few dozen names).
    if trimmed then
      local names_seen = redis.call('HGETALL', KEYS[6])
      for n = 1, #names_seen, 2 do
        if tonumber(names_seen[n + 1]) < first_ms then
          redis.call('HDEL', KEYS[6], names_seen[n])
        end
      end
    end
  end
end
return 1
"""

    stream: str
    # The turn's done mark.
    done: str
    index: AuditIndexKeys
    maxlen: int
    done_ttl: int
    turn_id: str
    chat: str
    # How many of a chat's newest turns the index names.
    chats_kept: int
    # The most index entries trimmed in one write.
    trim_batch: int
    entries: tuple[AuditEntryArgs, ...]
    # Entries of a minute between two trims (1: every write trims).
    trim_every: int = 1

    def keys(self) -> list[str]:
        index = self.index
        return [
            self.stream,
            self.done,
            index.turns,
            index.order,
            index.chats,
            index.names,
            index.minutes,
            index.start,
        ]

    def args(self) -> list[Arg]:
        args: list[Arg] = [
            self.maxlen,
            self.done_ttl,
            len(self.entries),
            self.turn_id,
            self.chat,
            self.chats_kept,
            self.index.minute_prefix,
            self.trim_batch,
            self.trim_every,
        ]
        for entry in self.entries:
            # Each list as its length, then its (name, value) pairs flattened.
            for items in (entry.fields, entry.rollups):
                args.append(len(items))
                args.extend(part for item in items for part in item)
        return args
