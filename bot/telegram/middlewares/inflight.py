"""Counting the updates being handled right now (for /healthz and the metrics)."""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiogram.types import TelegramObject

from bot.telegram.middlewares.scoped import ScopedMiddleware


class InFlightMiddleware(ScopedMiddleware):
    """Outer update middleware: knows which updates are inside the dispatcher right now."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def in_flight(self) -> int:
        """Updates entered and not yet finished."""
        return len(self._tasks)

    @contextmanager
    def scope(self, event: TelegramObject) -> Iterator[None]:
        """Track the update's task for as long as its handling runs."""
        task = asyncio.current_task()
        if task is None or task in self._tasks:
            yield
            return
        self._tasks.add(task)
        try:
            yield
        finally:
            self._tasks.discard(task)
