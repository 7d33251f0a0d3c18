"""Once a proposal's time ran out, later turns no longer say a card awaits the customer.

The real intake and worker pool over a real Redis and the fake Bot API; the
model is a scripted client that records what each turn showed it.
"""

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiogram import Bot

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import ScriptedClient, text_result, tool_result
from bot.testing.settings import make_settings
from bot.testing.telegram_server import FakeTelegramServer
from bot.testing.telegram_stack import TelegramStack, open_application

CHAT = 8300
AWAITS = "ждёт решения клиента"
EXPIRED = "срок карточки истёк"


def model(
    messages_: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Proposes a cancel when asked; otherwise echoes."""
    if messages_[-1]["role"] == "tool":
        return text_result("Нажмите «Подтвердить» на карточке.")
    text = str(messages_[-1]["content"])
    if "отмените" in text:
        return tool_result("cancel_order", {"order_id": "8042", "reason": "передумал"})
    return text_result(f"Ответ: {text}")


def developer_notes(request: tuple[list[Message], Any, Any]) -> list[str]:
    messages = request[0]
    # The first message is the instruction; the notes are the developer messages after it.
    return [str(m["content"]) for m in messages[1:] if m["role"] in ("developer", "system")]


async def _stack(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot, card_window_seconds: float
) -> AsyncIterator[tuple[TelegramStack, ScriptedClient]]:
    settings = make_settings(
        TELEGRAM_API_BASE_URL=telegram.base_url,
        REDIS_URL=redis_server.url,
        REDIS_KEY_PREFIX="expirednote",
        AUDIT_STREAM="expirednote:audit",
        ACTION_CONFIRM_SECONDS=card_window_seconds,
    )
    client = ScriptedClient(model)
    async with open_application(settings, llm=client) as app:
        stack = TelegramStack(app, bot, telegram=telegram)
        async with stack.running():
            yield stack, client


@pytest.mark.parametrize(
    "case",
    [(0.001, EXPIRED, AWAITS), (600, AWAITS, EXPIRED)],
    ids=["expired", "still-waiting"],
)
async def test_the_next_turn_is_told_whether_the_card_still_waits(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    bot: Bot,
    case: tuple[float, str, str],
) -> None:
    card_window_seconds, told, not_told = case
    async for stack, client in _stack(redis_server, telegram, bot, card_window_seconds):
        await stack.feed(telegram.message_update(CHAT, "отмените заказ 8042"))
        await telegram.wait_for(lambda: len(telegram.keyboards(CHAT)) == 1)

        await stack.feed(telegram.message_update(CHAT, "а что с заказом?"))
        await telegram.wait_for(lambda: "Ответ: а что с заказом?" in telegram.sent_texts(CHAT))

        notes = developer_notes(client.requests[-1])
        assert [note for note in notes if told in note], notes
        assert not [note for note in notes if not_told in note], notes
