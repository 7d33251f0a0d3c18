"""The log context of each update: its id and its chat's pseudonym on every line it logs.

The time an update waited is measured from intake (the queued job's
``enqueued_ms``) and reported with the turn (``queue_ms``), not here.
"""

from contextlib import AbstractContextManager, nullcontext

from aiogram.types import TelegramObject, Update
from aiogram.types.update import UpdateTypeLookupError

from bot.ops.log_context import ChatNamer, update_scope
from bot.telegram.middlewares.scoped import ScopedMiddleware


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


class UpdateLogContextMiddleware(ScopedMiddleware):
    """Outer update middleware: sets the update id and chat pseudonym of the log context."""

    def __init__(self, chat_namer: ChatNamer) -> None:
        self._chat_namer = chat_namer

    def scope(self, event: TelegramObject) -> AbstractContextManager[object]:
        """The update's log context (its id, its chat's pseudonym); none for other events."""
        if not isinstance(event, Update):
            return nullcontext()
        chat_id = update_chat_id(event)
        chat = self._chat_namer(chat_id) if chat_id is not None else None
        return update_scope(event.update_id, chat)
