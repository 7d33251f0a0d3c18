"""The real Telegram runner in polling mode as a task of the caller's event loop."""

import asyncio

from bot.settings import Settings
from bot.telegram.process import run_bot
from bot.testing.pool_stop import until_stopped
from bot.testing.telegram_server import FakeTelegramServer


class PollingBot:
    """The real runner (``run_bot`` in polling mode) as a task of this test's event loop.

    ``start()`` returns once the bot polls the fake Bot API; ``stop()`` is what
    SIGTERM does (graceful: turns in flight finish) and returns the exit code.
    """

    def __init__(self, settings: Settings, telegram: FakeTelegramServer) -> None:
        self._settings = settings
        self._telegram = telegram
        self._task: asyncio.Task[int] | None = None
        self._stop = asyncio.Event()

    async def start(self, within: float = 15.0) -> None:
        """Start the runner and wait (bounded) until its first ``getUpdates``."""
        polls_before = self._telegram.received("getUpdates")
        self._stop = asyncio.Event()
        task = asyncio.create_task(run_bot(self._settings, "polling", self._stop))
        self._task = task
        await self._telegram.wait_for(
            lambda: self._telegram.received("getUpdates") > polls_before or task.done(), within
        )
        if task.done():
            raise RuntimeError("the bot stopped during start-up")

    async def stop(self, within: float = 20.0) -> int:
        """Stop gracefully (idempotent); returns the runner's exit code."""
        if self._task is None:
            return 0
        self._stop.set()
        async with asyncio.timeout(within):
            code = await until_stopped(self._task, self._settings.redis)
        self._task = None
        return code
