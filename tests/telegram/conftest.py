"""Fixtures of the Telegram tests: the fake Bot API server and a Bot pointed at it."""

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer

from bot.testing.telegram_server import FakeTelegramServer


@pytest.fixture
async def bot(telegram: FakeTelegramServer) -> AsyncIterator[Bot]:
    """A real aiogram Bot whose HTTP session talks to the fake server."""
    session = AiohttpSession(api=TelegramAPIServer.from_base(telegram.base_url))
    bot = Bot(token=telegram.token, session=session)
    yield bot
    # aiogram's close() waits a fixed 250 ms for TLS connections to shut down; this
    # session speaks plain HTTP to 127.0.0.1, so its aiohttp session is closed here
    # and close() finds nothing left to wait for.
    client = await session.create_session()
    await client.close()
    await bot.session.close()
