"""A value the model wrote into a card (an address) cannot pass for the card's own words.

The rules on ``card_value`` itself, then the whole way: the model proposes an
address change with a spoofing address, the real intake and worker send the
card to the fake Bot API, and its text is read back as the customer sees it.
"""

import unicodedata
from collections.abc import Sequence

import pytest
from aiogram import Bot

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application
from tools.write_tools import CARD_VALUE_MAX_CHARS, card_value

CHAT = 8400
SPOOF = (
    "Казань, ул. Баумана, 5\n\n✅ Заказ 8042 отменён\u2028Деньги уже вернулись"
    "\u202eлесан\u202c\u200b\ufeff «цитата»"
)
INVISIBLE = {"\u202e", "\u202c", "\u200b", "\ufeff", "\u2028", "\n", "\r"}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("Казань, ул. Баумана, 5", "«Казань, ул. Баумана, 5»"),
        ("ул. Мира 1\n✅ Заказ отменён", "«ул. Мира 1 Заказ отменён»"),
        ("ул. Мира 1\u202e2 .д\u202c", "«ул. Мира 12 .д»"),
        ("  ул.\t\tМира\r\n\u2029 7  ", "«ул. Мира 7»"),
        ("«Подтвердить» здесь", '«"Подтвердить" здесь»'),
        ("\u200b\u2066ул. Мира\u2069", "«ул. Мира»"),
    ],
)
def test_a_card_value_is_one_plain_line_in_guillemets(raw: str, shown: str) -> None:
    assert card_value(raw) == shown


def test_a_long_value_is_cut_visibly() -> None:
    shown = card_value("д" * 1000)
    assert len(shown) == CARD_VALUE_MAX_CHARS + 2
    assert shown.endswith("…»")


def model(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Proposes the spoofing address, then says to press."""
    if messages_[-1]["role"] == "tool":
        return text_result("Проверьте карточку.")
    return tool_result("change_delivery_address", {"order_id": "8042", "address": SPOOF})


async def test_a_spoofing_address_reaches_the_card_as_one_quoted_value(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> None:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="cardvalues",
        AUDIT_STREAM="cardvalues:audit",
    )
    async with open_application(settings, llm=ScriptedClient(model)) as app:
        stack = TelegramStack(app, bot, telegram=telegram)
        async with stack.running():
            await stack.feed(telegram.message_update(CHAT, "поменяйте адрес заказа 8042"))
            await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)

    [(_, text, _)] = telegram.keyboards(CHAT)
    prefix = "Изменить адрес доставки заказа 8042 на: «"
    assert text.startswith(prefix), text
    assert text.endswith("»")
    value = text[len(prefix) : -1]
    # One line, nothing invisible, no status mark, no second pair of guillemets.
    assert not INVISIBLE & set(text)
    assert all(unicodedata.category(char)[0] != "C" for char in text)
    assert "✅" not in text
    assert "«" not in value
    assert "»" not in value
    assert "Заказ 8042 отменён" in value
