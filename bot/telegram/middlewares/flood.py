"""Flood control per user: a token bucket for messages and a daily cap of model turns.

Both live in Redis so that they hold across processes, and both are checked
in one round trip by a Lua script that reads Redis' own clock (so processes
with skewed clocks agree). Over a limit the user is told once (per streak of
rate-limited messages, per day for the cap) and the message goes no further.
If Redis is unreachable the message passes (fail open): the turn itself then
reports the outage to the customer.
"""

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from aiogram import BaseMiddleware, Bot
from aiogram.types import Message, TelegramObject
from redis.exceptions import RedisError

from bot.redis_connection import AsyncRedisClient
from bot.telegram import messages
from bot.telegram.sending import ReplySender

logger = logging.getLogger(__name__)

# KEYS[1] the user's bucket (hash: tokens, ts, warned); KEYS[2] today's turn counter.
# ARGV: burst, interval in ms, counts a turn (0/1), daily limit, counter TTL in s.
_FLOOD_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local burst = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'warned')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
tokens = math.min(burst, tokens + math.max(0, now - ts) / interval)
local ttl = math.ceil(burst * interval) + 1000
if tokens < 1 then
  local verdict = 'rate_quiet'
  if state[3] ~= '1' then verdict = 'rate_warn' end
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now), 'warned', '1')
  redis.call('PEXPIRE', KEYS[1], ttl)
  return verdict
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', tostring(now), 'warned', '0')
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[3] == '1' then
  local used = redis.call('INCR', KEYS[2])
  if used == 1 then redis.call('EXPIRE', KEYS[2], tonumber(ARGV[5])) end
  local limit = tonumber(ARGV[4])
  if used == limit + 1 then return 'daily_warn' end
  if used > limit then return 'daily_quiet' end
end
return 'ok'
"""

# The day's counter outlives the day a little, whatever the time zone of the reader.
_DAY_COUNTER_TTL_SECONDS = 2 * 24 * 3600


class FloodVerdict(StrEnum):
    """What the limiter decided about one message."""

    OK = "ok"
    RATE_WARN = "rate_warn"
    RATE_QUIET = "rate_quiet"
    DAILY_WARN = "daily_warn"
    DAILY_QUIET = "daily_quiet"

    @property
    def allowed(self) -> bool:
        """Whether the message may go on."""
        return self is FloodVerdict.OK


@dataclass(frozen=True, slots=True)
class FloodLimits:
    """A burst of ``burst`` messages, then one per ``interval_seconds``; ``daily_turns`` a day."""

    burst: int
    interval_seconds: float
    daily_turns: int


def flood_keys(key_prefix: str, user_id: int, day: str) -> tuple[str, str]:
    """The bucket and the day counter of a user, under the user's hash tag."""
    base = f"{key_prefix}:{{u{user_id}}}"
    return f"{base}:flood", f"{base}:turns:{day}"


class RedisFloodLimiter:
    """The token bucket and the daily counter, checked in one Redis round trip."""

    def __init__(self, redis: AsyncRedisClient, *, key_prefix: str, limits: FloodLimits) -> None:
        self._script = redis.register_script(_FLOOD_SCRIPT)
        self._prefix = key_prefix
        self._limits = limits

    async def check(self, user_id: int, *, counts_turn: bool) -> FloodVerdict:
        """Take one token (and one of today's turns if ``counts_turn``)."""
        day = datetime.now(UTC).strftime("%Y%m%d")
        result = await self._script(
            keys=list(flood_keys(self._prefix, user_id, day)),
            args=[
                self._limits.burst,
                self._limits.interval_seconds * 1000,
                1 if counts_turn else 0,
                self._limits.daily_turns,
                _DAY_COUNTER_TTL_SECONDS,
            ],
        )
        return FloodVerdict(result.decode() if isinstance(result, bytes) else str(result))


def is_model_turn(message: Message) -> bool:
    """A text that is not a command: it will cost a model turn."""
    return message.text is not None and not message.text.startswith("/")


class FloodControlMiddleware(BaseMiddleware):
    """Inner message middleware: runs only for messages a handler will take."""

    def __init__(self, limiter: RedisFloodLimiter) -> None:
        self._limiter = limiter

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Let the message through, or tell the user once that a limit is reached."""
        if not isinstance(event, Message) or event.from_user is None:
            return await handler(event, data)
        try:
            verdict = await self._limiter.check(
                event.from_user.id, counts_turn=is_model_turn(event)
            )
        except (RedisError, OSError) as error:
            logger.warning(
                "Flood control unavailable (%s); message let through", type(error).__name__
            )
            return await handler(event, data)
        if verdict.allowed:
            return await handler(event, data)
        logger.info("User %s over a limit: %s", event.from_user.id, verdict.value)
        notice = {
            FloodVerdict.RATE_WARN: messages.RATE_LIMITED,
            FloodVerdict.DAILY_WARN: messages.DAILY_LIMIT,
        }.get(verdict)
        if notice is not None:
            bot: Bot = data["bot"]
            replies: ReplySender = data["replies"]
            await replies.send_plain(bot, event.chat.id, notice)
        return None
