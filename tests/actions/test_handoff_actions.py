"""Actions while a person is called in: the card and its outcome are mirrored into the topic."""

from collections.abc import AsyncIterator, Sequence

import pytest
from aiogram import Bot

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from bot.testing.redis_server import RedisServer
from bot.testing.scripted_client import text_result, tool_result
from bot.testing.telegram_server import FakeTelegramServer
from tests.telegram.test_handoff import CUSTOMER, STAFF, Desk, _desk

CARD = (
    "Отменить заказ 8042: наушники, чехол для наушников. Деньги вернутся на карту в течение 5 дней."
)


def proposing(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    if messages[-1]["role"] == "tool":
        return text_result("Нажмите «Подтвердить» на карточке.")
    if messages[-1]["content"] == "отмените заказ 8042" and tools:
        return tool_result("cancel_order", {"order_id": "8042", "reason": "передумал"})
    return text_result(f"Ответ: {messages[-1]['content']}")


@pytest.fixture
async def desk(
    redis_server: RedisServer, telegram: FakeTelegramServer, bot: Bot
) -> AsyncIterator[Desk]:
    async for built in _desk(redis_server, telegram, bot):
        built.model.responder = proposing
        yield built


async def test_a_waiting_handoff_mirrors_the_card_and_the_outcome_into_the_topic(
    desk: Desk, telegram: FakeTelegramServer
) -> None:
    thread = await desk.hand_off()

    await desk.customer("отмените заказ 8042")
    await telegram.wait_for(lambda: bool(telegram.keyboards(CUSTOMER)))
    [(card_id, text, keyboard)] = telegram.keyboards(CUSTOMER)
    assert text == CARD
    await telegram.wait_for(
        lambda: (
            f"Клиенту предложено действие (карточка с кнопками): {CARD}"
            in telegram.topic_texts(STAFF, thread)
        )
    )

    await desk.feed(telegram.callback_update(CUSTOMER, card_id, keyboard[0][0]["callback_data"]))

    await telegram.wait_for(
        lambda: (
            "Итог действия по кнопке клиента: ✅ Заказ 8042 отменён"
            in telegram.topic_texts(STAFF, thread)
        )
    )
    assert "Заказ 8042 отменён. Деньги вернутся на карту в течение 5 дней." in (
        telegram.sent_texts(CUSTOMER)
    )
