"""Outer update middlewares that run the rest of the chain inside a context of their own."""

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any

from aiogram import BaseMiddleware
from aiogram.dispatcher.event.bases import NextMiddlewareType
from aiogram.types import TelegramObject


class ScopedMiddleware(BaseMiddleware, ABC):
    """Runs the rest of the chain inside :meth:`scope` of the event."""

    async def __call__(
        self,
        handler: NextMiddlewareType[TelegramObject],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Run the rest of the chain inside the event's scope."""
        with self.scope(event):
            return await handler(event, data)

    @abstractmethod
    def scope(self, event: TelegramObject) -> AbstractContextManager[object]:
        """The context the handling of ``event`` runs in."""
