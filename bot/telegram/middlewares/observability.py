"""Log context and queue time of each update: one middleware where it enters, one where it starts.

:class:`UpdateLogContextMiddleware` comes early among the outer middlewares
(it never awaits before passing the update on, so arrival order is kept): it
names the update and its chat for every log line of its handling and notes
when it arrived. :class:`QueueTimeMiddleware` comes last: the time between the
two is what the update waited (behind the chat's earlier updates, for
de-duplication).
"""

from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update

from bot.log_context import ChatNamer, update_scope
from bot.telegram.middlewares.ordering import update_chat_id

# The workflow data key of the update's arrival time (perf_counter seconds).
RECEIVED_AT = "update_received_at"


class UpdateLogContextMiddleware(BaseMiddleware):
    """Outer update middleware: sets the update id and chat pseudonym of the log context."""

    def __init__(self, chat_namer: ChatNamer) -> None:
        self._chat_namer = chat_namer

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Run the rest of the chain inside the update's log context."""
        if not isinstance(event, Update):
            return await handler(event, data)
        data[RECEIVED_AT] = perf_counter()
        chat_id = update_chat_id(event)
        chat = self._chat_namer(chat_id) if chat_id is not None else None
        with update_scope(event.update_id, chat):
            return await handler(event, data)


class QueueTimeMiddleware(BaseMiddleware):
    """Outer update middleware, registered last: reports how long the update waited."""

    def __init__(self, record: Callable[[float], None]) -> None:
        self._record = record

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Record the wait, then go on."""
        received = data.get(RECEIVED_AT)
        if isinstance(received, float):
            self._record(perf_counter() - received)
        return await handler(event, data)
