"""A reply the previous version committed is delivered exactly as that version delivered it.

During a rolling deploy a chat's outbox may hold an entry the previous
version wrote (its flat form: ``format``, ``text``, ``card_edit``, ``card``,
``question``, ``person_offer``, ``reply_keyboard``, ``language``) when a
worker of this version takes the chat over. The entries below are JSON as the
previous version stored them; the real worker, runner and deliverers send
them to the fake Bot API over HTTP, and write their audit to the real Redis.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiogram import Bot

from bot import customer_texts
from bot.storage.keys import telegram_conversation
from bot.testing.audit_entries import stream_entries
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tests.queue.test_delivery_steps import (
    LEGACY_ANSWER_WITH_CARD,
    LEGACY_LINK_REQUEST,
    LEGACY_OFFER,
    LEGACY_QUESTION,
)

pytestmark = pytest.mark.timeout(60)

CHAT = 8300
STREAM = "legacy:audit"


@pytest.fixture
async def stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[TelegramStack]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="legacy",
        AUDIT_STREAM=STREAM,
        SESSION_LEASE_SECONDS=3,
    )
    async with open_application(settings, llm=ScriptedClient(lambda *_: text_result("-"))) as app:
        built = TelegramStack(app, bot, telegram=telegram)
        # No workers of their own: the test drains the chat when its outbox is written.
        async with built.running(work=False):
            yield built


def _with_card_message(entry: str, message_id: int) -> str:
    """The entry's card edit pointed at a message the fake Bot API really holds."""
    fields: dict[str, Any] = json.loads(entry)
    fields["card_edit"]["message_id"] = message_id
    return json.dumps(fields, ensure_ascii=False)


async def _audit(stack: TelegramStack, count: int) -> list[dict[str, str]]:
    """The audit stream once it holds ``count`` entries (10 s at most)."""
    async with asyncio.timeout(10):
        while True:
            entries = await stream_entries(stack.app.redis, STREAM)
            if len(entries) >= count:
                return entries
            await asyncio.sleep(0.01)


async def test_entries_of_the_previous_version_are_delivered_in_its_order_with_its_audit(
    stack: TelegramStack, bot: Bot
) -> None:
    telegram = stack.telegram
    old_card = await bot.send_message(CHAT, "Отменить заказ 41?")
    calls_before = len(telegram.calls)
    outbox = stack.app.keys.conversation(telegram_conversation(CHAT)).outbox
    await stack.app.redis.hset(
        outbox,
        mapping={
            "8": _with_card_message(LEGACY_ANSWER_WITH_CARD, old_card.message_id),
            "9": LEGACY_QUESTION,
            "10": LEGACY_OFFER,
            "11": LEGACY_LINK_REQUEST,
        },
    )

    await stack.drain(CHAT)

    english = stack.app.languages.texts("en")
    sent = [
        (call.method, call.params.get("text"))
        for call in telegram.calls[calls_before:]
        if call.ok and call.method in ("sendMessage", "editMessageText")
    ]
    assert sent == [
        ("editMessageText", "Заказ 41: отменён"),
        ("sendMessage", "Отменить заказ 42? Нажмите кнопку."),
        ("sendMessage", "Отменить заказ 42"),
        ("sendMessage", english.gettext(customer_texts.CSAT_QUESTION)),
        ("sendMessage", customer_texts.ESCALATION_OFFER),
        ("sendMessage", "Поделитесь номером"),
    ]
    keyboards = {text: keyboard for _, text, keyboard in telegram.keyboards(CHAT)}
    assert len(keyboards["Отменить заказ 42"][0]) == 2, "the card's two buttons"
    assert len(keyboards[english.gettext(customer_texts.CSAT_QUESTION)][0]) == 5
    assert len(keyboards[customer_texts.ESCALATION_OFFER][0]) == 1
    [link] = [
        call
        for call in telegram.calls_of("sendMessage")
        if call.params["text"] == "Поделитесь номером"
    ]
    markup = link.params["reply_markup"]
    assert markup["keyboard"][0][0]["request_contact"] is True
    assert markup["keyboard"][0][0]["text"] == english.gettext(customer_texts.LINK_BUTTON)

    entries = await _audit(stack, 3)
    assert [(entry["type"], entry["turn_id"]) for entry in entries] == [
        ("turn", "K7M2P9QRS8"),
        ("feedback", "K7M2P9QRS9"),
        ("analysis", "K7M2P9QRSA"),
    ]
    assert entries[0]["outcome"] == "answered"
    assert entries[1]["event"] == "asked"
    assert entries[2]["event"] == "escalation_offered"
    assert not await stack.app.redis.exists(outbox), "every entry delivered and dropped"


async def test_an_answer_of_the_previous_version_to_a_blocked_chat_is_recorded_undelivered(
    stack: TelegramStack,
) -> None:
    telegram = stack.telegram
    keys = stack.app.keys.conversation(telegram_conversation(CHAT))
    await stack.app.redis.set(keys.blocked, "1")
    await stack.app.redis.hset(
        keys.outbox, mapping={"9": LEGACY_QUESTION, "8": LEGACY_ANSWER_WITH_CARD}
    )

    await stack.drain(CHAT)

    [turn] = await _audit(stack, 1)
    assert (turn["turn_id"], turn["outcome"]) == ("K7M2P9QRS8", "undelivered")
    assert telegram.sent_texts(CHAT) == [], "nothing sent to a chat that blocked the bot"
    assert not telegram.calls_of("editMessageText")
    assert not await stack.app.redis.exists(keys.outbox)
