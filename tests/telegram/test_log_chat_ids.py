"""Log text names a chat by its pseudonym (the ``chat`` field's), never by its chat id.

The real runner in polling mode against the fake Bot API and a real Redis: a
customer blocks and unblocks the bot, a reply is retried after a 500; every
line those log is read.
"""

import logging
from contextvars import copy_context

import pytest

from bot.audit.pseudonym import chat_pseudonym
from bot.ops.log_context import chat_label, chat_namer, name_chats
from bot.testing.polling_bot import PollingBot
from bot.testing.redis_server import RedisServer
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer

KEY = "log-pseudonym-key-of-this-test-0123"
BLOCKER = 4_242_001
CUSTOMER = 4_242_002


async def test_log_lines_of_blocks_and_retried_sends_carry_no_chat_id(
    telegram: FakeTelegramServer, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="logids",
        AUDIT_HMAC_KEY=KEY,
    )
    bot = PollingBot(settings, telegram)
    with caplog.at_level(logging.INFO):
        await bot.start()
        try:
            await telegram.push(telegram.member_update(BLOCKER, "member", "kicked"))
            await telegram.push(telegram.member_update(BLOCKER, "kicked", "member"))
            telegram.fail_next("sendMessage", 500, "Internal Server Error")
            await telegram.push_message(CUSTOMER, "Где мой заказ?")
            await telegram.wait_for_texts(CUSTOMER, 1)
            await telegram.wait_for(
                lambda: sum("has the bot again" in r.getMessage() for r in caplog.records) == 1
            )
        finally:
            assert await bot.stop() == 0

    lines = [record.getMessage() for record in caplog.records]
    for chat_id in (BLOCKER, CUSTOMER):
        assert not [line for line in lines if str(chat_id) in line]
    retry = [line for line in lines if line.startswith("Sending to")]
    assert retry, lines
    assert all(chat_pseudonym(str(CUSTOMER), KEY.encode()) in line for line in retry)
    blocker = chat_pseudonym(str(BLOCKER), KEY.encode())
    assert f"{blocker} blocked or removed the bot: no more sends to it" in lines
    assert f"{blocker} has the bot again" in lines


def test_a_chat_is_named_by_its_pseudonym_or_not_at_all() -> None:
    # In a context of its own: the namer set here does not outlive the test.
    copy_context().run(_labels)


def _labels() -> None:
    name_chats(chat_namer(None))
    assert chat_label(77) == "a chat"
    assert chat_label("tg:-100123") == "a chat"
    assert chat_label("console-ann") == "console-ann"

    name_chats(chat_namer(KEY.encode()))
    assert chat_label(77) == chat_pseudonym("77", KEY.encode())
    assert chat_label("tg:-100123") == chat_pseudonym("-100123", KEY.encode())
    assert chat_label("tg:not-a-number") == "a chat"
