"""A Bot API answer about the staff group that aiogram cannot read stops start-up in one line.

The real :func:`bot.telegram.process.run_bot` (its preflight) against the fake Bot API (told to
answer ``getChat`` or ``getChatMember`` with something that is not the Bot API's
shape) and a real Redis.
"""

import asyncio

import pytest

from bot.telegram.process import run_bot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer

pytestmark = pytest.mark.timeout(60)

STAFF = -1001234567891


@pytest.mark.parametrize(
    ("method", "result"),
    [
        ("getChat", {"id": STAFF, "title": "Поддержка"}),
        ("getChat", "не объект"),
        ("getChatMember", {"status": "administrator"}),
    ],
    ids=["getChat-without-type", "getChat-a-string", "getChatMember-without-user"],
)
async def test_an_unreadable_answer_is_one_line_and_exit_1(
    method: str,
    result: object,
    telegram: FakeTelegramServer,
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    telegram.make_forum(STAFF)
    telegram.answer_next(method, result)
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="staffunreadable",
        STAFF_CHAT_ID=STAFF,
    )
    async with asyncio.timeout(30):
        assert await run_bot(settings, "polling", asyncio.Event()) == 1

    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "error: the STAFF_CHAT_ID group could not be checked: the Bot API's answer to "
        f"{method} could not be read"
    ]
    assert telegram.calls_of("getUpdates") == []
