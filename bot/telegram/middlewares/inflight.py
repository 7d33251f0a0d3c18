"""Counting the updates being handled right now (for /healthz and the metrics)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject


class InFlightMiddleware(BaseMiddleware):
    """Outer update middleware: knows which updates are inside the dispatcher right now."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def in_flight(self) -> int:
        """Updates entered and not yet finished."""
        return len(self._tasks)

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        """Track the update's task for as long as its handling runs."""
        task = asyncio.current_task()
        if task is None or task in self._tasks:
            return await handler(event, data)
        self._tasks.add(task)
        try:
            return await handler(event, data)
        finally:
            self._tasks.discard(task)
