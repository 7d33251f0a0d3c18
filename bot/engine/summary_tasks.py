"""Summaries in the background for callers that hold no lease of their own (the console).

A worker folds the summary itself while it holds the chat's lease; the
console answers, then lets this supervisor run the summary in a tracked task
(at most one per conversation) so that the next prompt never waits for it.
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundSummaries:
    """One tracked summary task per conversation; drained (bounded) at shutdown."""

    def __init__(self, summarise: Callable[[str], Coroutine[Any, Any, None]]) -> None:
        self._summarise = summarise
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def schedule(self, conversation_key: str) -> bool:
        """Start a summary of ``conversation_key`` unless one runs; ``True`` if started."""
        running = self._tasks.get(conversation_key)
        if running is not None and not running.done():
            return False
        task: asyncio.Task[None] = asyncio.create_task(
            self._summarise(conversation_key), name=f"summary:{conversation_key}"
        )
        self._tasks[conversation_key] = task
        task.add_done_callback(lambda done: self._forget(conversation_key, done))
        return True

    async def drain(self, grace_seconds: float) -> None:
        """Wait (at most ``grace_seconds``) for running summaries, then cancel the rest."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _forget(self, conversation_key: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(conversation_key) is task:
            del self._tasks[conversation_key]
