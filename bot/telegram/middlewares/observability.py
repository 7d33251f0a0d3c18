"""The log context of each update: its id and its chat's pseudonym on every line it logs.

The time an update waited is measured from intake (the queued job's
``enqueued_ms``) and reported with the turn (``queue_ms``), not here.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update
from aiogram.types.update import UpdateTypeLookupError

from bot.ops.log_context import ChatNamer, update_scope


def update_chat_id(update: Update) -> int | None:
    """The chat an update belongs to, if any."""
    try:
        event = update.event
    except UpdateTypeLookupError:
        # A newer Bot API update kind aiogram cannot name: it belongs to no chat we know.
        return None
    chat = getattr(event, "chat", None)
    if chat is None:
        message = getattr(event, "message", None)  # e.g. a callback query
        chat = getattr(message, "chat", None)
    chat_id = getattr(chat, "id", None)
    return chat_id if isinstance(chat_id, int) else None


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
        chat_id = update_chat_id(event)
        chat = self._chat_namer(chat_id) if chat_id is not None else None
        with update_scope(event.update_id, chat):
            return await handler(event, data)
