"""Counting the updates being handled, so that shutdown can wait for them (bounded)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject


class InFlightMiddleware(BaseMiddleware):
    """Outer update middleware: knows which updates are inside the dispatcher right now."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

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
        self._idle.clear()
        try:
            return await handler(event, data)
        finally:
            self._tasks.discard(task)
            if not self._tasks:
                self._idle.set()

    async def wait_idle(self, grace_seconds: float) -> bool:
        """Wait until no update is being handled; ``False`` if ``grace_seconds`` ran out first."""
        # Tasks created just before intake stopped may not have entered yet: let them
        # take their first step so that they are counted.
        for _ in range(3):
            await asyncio.sleep(0)
        try:
            async with asyncio.timeout(grace_seconds):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def cancel_all(self) -> int:
        """Cancel the updates still in flight and wait for them to unwind; returns how many."""
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)
