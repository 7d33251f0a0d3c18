"""The Telegram side of the bot in the test's (or bench's) own event loop.

:class:`TelegramStack` is what ``python -m bot`` runs, built by the same
:func:`bot.telegram.assembly.build_telegram_side`, without a process of its
own: updates are fed to the real intake (or long-polled from a Bot API), the
worker pool of this event loop runs them through the real dispatcher, and
replies go to whatever Bot API the ``Bot`` talks to. Tests add their own
questions to it by subclassing; :func:`open_application` gives them the
engine the runner would build.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from aiogram import Bot
from aiogram.types import Update

from bot import customer_texts
from bot.app import Application, build_application
from bot.engine.chat_service import ChatService
from bot.llm.types import ToolCallingClient
from bot.queue.admission import IntakeVerdict
from bot.sessions.handoff_machine import utc_now
from bot.settings import Settings
from bot.storage.connection import every_master
from bot.storage.keys import telegram_conversation
from bot.telegram.assembly import TelegramSide, build_telegram_side
from bot.telegram.polling import Poller
from bot.telegram.update_intake import TelegramIntake
from bot.testing.pool_stop import stop_pool
from bot.testing.telegram_server import FakeTelegramServer

SWEEP_PERIOD_SECONDS = 0.05
"""How often a test's sweepers look for idle handoffs and due questions (production: minutes)."""


@asynccontextmanager
async def open_application(
    settings: Settings,
    *,
    llm: ToolCallingClient | None = None,
    flush: bool = True,
    clock: Callable[[], datetime] = utc_now,
) -> AsyncIterator[Application]:
    """The engine ``build_application`` builds, closed at the end; its data flushed first.

    ``clock``: the support-hours clock (see ``build_application``).
    """
    app = await build_application(settings, llm=llm, clock=clock)
    try:
        if flush:
            for where in await every_master(app.redis):
                await app.redis.flushdb(**where)
        yield app
    finally:
        await app.aclose()


class TelegramStack:
    """Intake, dispatcher, worker pool and sweepers of one bot, run in this event loop.

    ``telegram`` is the fake Bot API of a test (for :meth:`settle`); ``chat``
    stands in for the application's chat service (a test's watched one).
    ``app`` is the engine, ``bot`` the Bot the workers send with, ``intake``
    where updates are accepted into their chat's queue (all parts of ``side``).
    """

    def __init__(
        self,
        app: Application,
        bot: Bot,
        *,
        telegram: FakeTelegramServer | None = None,
        chat: ChatService | None = None,
        sweep_period_seconds: float = SWEEP_PERIOD_SECONDS,
    ) -> None:
        self.side: TelegramSide = build_telegram_side(
            app, bot, chat=chat, sweep_period_seconds=sweep_period_seconds
        )
        self.app: Application = self.side.app
        self.bot: Bot = self.side.bot
        self.intake: TelegramIntake = self.side.intake
        self._telegram = telegram

    @property
    def telegram(self) -> FakeTelegramServer:
        """The test's fake Bot API."""
        assert self._telegram is not None, "this stack was built without a fake Bot API"
        return self._telegram

    @asynccontextmanager
    async def running(
        self, *, work: bool = True, sweep: bool = False, poll: bool = False
    ) -> AsyncIterator[None]:
        """Run the workers (``work``), the sweepers (``sweep``) and long polling (``poll``).

        On the way out: polling stops first, then the sweepers, then the workers
        finish the chats in hand, as the runner stops them.
        """
        side = self.side
        sweepers = side.sweepers if sweep else []
        working = asyncio.create_task(side.workers.run(), name="workers") if work else None
        sweeping = [asyncio.create_task(sweeper.run()) for sweeper in sweepers]
        poller = (
            Poller(
                bot=side.bot,
                intake=side.intake,
                allowed_updates=side.front.dispatcher.resolve_used_update_types(),
            )
            if poll
            else None
        )
        polling = asyncio.create_task(poller.run(), name="polling") if poller else None
        try:
            yield
        finally:
            if poller is not None and polling is not None:
                poller.stop()
                await polling
            for sweeper in sweepers:
                sweeper.stop()
            for task in sweeping:
                await task
            if working is not None:
                await stop_pool(side.workers, working, side.app.redis)

    async def feed(self, update: dict[str, Any]) -> IntakeVerdict | None:
        """Accept one update as the webhook would (queued, not yet handled); intake's answer."""
        return await self.intake.accept(Update.model_validate(update, context={"bot": self.bot}))

    async def drain(self, chat_id: int) -> None:
        """Handle everything queued in ``chat_id`` now (for a stack run without workers)."""
        await self.side.workers.drain_now(telegram_conversation(chat_id))

    async def settle(self, chat_id: int) -> None:
        """Wait until every update queued so far in ``chat_id`` was handled (a /help barrier)."""
        telegram = self.telegram
        before = telegram.sent_texts(chat_id).count(customer_texts.HELP)
        await self.feed(telegram.message_update(chat_id, "/help"))
        await telegram.wait_for(
            lambda: telegram.sent_texts(chat_id).count(customer_texts.HELP) > before
        )
