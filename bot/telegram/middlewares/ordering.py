"""Turns of one chat run one at a time, in arrival order; different chats run concurrently."""

from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update
from aiogram.types.update import UpdateTypeLookupError

from bot.keyed_locks import KeyedLocks


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


class ChatOrderingMiddleware(BaseMiddleware):
    """Outer update middleware, registered before any middleware that awaits.

    aiogram starts one task per update in arrival order (polling with
    ``handle_as_tasks``); each task reaches this middleware without having
    awaited anything, and ``KeyedLocks`` queues waiters first come, first
    served, so the updates of one chat leave here in the order they arrived.
    Across processes the chat service's Redis lease keeps turns exclusive.
    """

    def __init__(self, locks: KeyedLocks) -> None:
        self._locks = locks

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Run the rest of the chain while holding the chat's lock."""
        chat_id = update_chat_id(event) if isinstance(event, Update) else None
        if chat_id is None:
            return await handler(event, data)
        async with self._locks.hold(f"chat:{chat_id}"):
            return await handler(event, data)
