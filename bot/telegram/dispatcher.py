"""Building the aiogram Dispatcher: routers per feature, middlewares in a fixed order.

Order of the update's outer middlewares (after aiogram's own error and user
context middlewares, which do not await):

1. in-flight counting (for a bounded drain at shutdown);
2. per-chat ordering: must come before anything that awaits, so that the
   arrival order is fixed before the first suspension;
3. de-duplication of update ids (Redis ``SET NX``).

Flood control is an *inner* message middleware: it runs only for messages a
handler takes (an ignored group message costs the user nothing).
Services reach handlers as workflow data (``chat_service``, ``replies``,
``settings``), never through globals.
"""

from dataclasses import dataclass

from aiogram import Dispatcher, Router

from bot.keyed_locks import KeyedLocks
from bot.redis_connection import AsyncRedisClient
from bot.settings import Settings
from bot.telegram.filters import AddressedToBot
from bot.telegram.handlers import chat, commands, errors, other
from bot.telegram.middlewares.dedup import UpdateDeduplicationMiddleware
from bot.telegram.middlewares.flood import FloodControlMiddleware, FloodLimits, RedisFloodLimiter
from bot.telegram.middlewares.inflight import InFlightMiddleware
from bot.telegram.middlewares.ordering import ChatOrderingMiddleware
from bot.telegram.ports import ChatPort
from bot.telegram.sending import ReplySender


@dataclass(frozen=True)
class TelegramFrontEnd:
    """The dispatcher and the parts the runner needs at shutdown."""

    dispatcher: Dispatcher
    in_flight: InFlightMiddleware
    replies: ReplySender


def build_dispatcher(
    settings: Settings, *, chat_service: ChatPort, redis: AsyncRedisClient
) -> TelegramFrontEnd:
    """A dispatcher wired to ``chat_service`` and ``redis``; nothing global, nothing started."""
    replies = ReplySender(max_attempts=settings.telegram.send_max_attempts)
    dispatcher = Dispatcher(
        # No FSM: its storage and event isolation are unused, and one middleware fewer
        # stands between an update's arrival and the ordering lock.
        disable_fsm=True,
        chat_service=chat_service,
        replies=replies,
        settings=settings,
    )
    in_flight = InFlightMiddleware()
    dispatcher.update.outer_middleware(in_flight)
    dispatcher.update.outer_middleware(ChatOrderingMiddleware(KeyedLocks()))
    dispatcher.update.outer_middleware(
        UpdateDeduplicationMiddleware(redis, key_prefix=settings.redis.key_prefix)
    )
    flood = settings.flood
    dispatcher.message.middleware(
        FloodControlMiddleware(
            RedisFloodLimiter(
                redis,
                key_prefix=settings.redis.key_prefix,
                limits=FloodLimits(
                    burst=flood.burst,
                    interval_seconds=flood.interval_seconds,
                    daily_turns=flood.daily_turn_limit,
                ),
            )
        )
    )

    messages_router = Router(name="messages")
    messages_router.message.filter(AddressedToBot(allow_groups=settings.telegram.allow_groups))
    # Order matters: commands, then text turns, then the catch-all for other messages.
    messages_router.include_routers(
        commands.build_router(), chat.build_router(), other.build_router()
    )
    dispatcher.include_routers(errors.build_router(), messages_router)
    return TelegramFrontEnd(dispatcher=dispatcher, in_flight=in_flight, replies=replies)
