"""The offline demo model picks the tools a real model would and answers in Russian from them."""

import re

import pytest

from bot.app import build_offline_model
from bot.llm.offline import OFFLINE_MODEL_NAME
from bot.llm.types import Message
from bot.tool_loop import BoundedToolLoop
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.store import ShopStore
from turn import TurnContext

CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def conversation(text: str) -> list[Message]:
    return [
        {"role": "developer", "content": "Инструкция."},
        {"role": "user", "content": text},
    ]


async def test_the_answer_retells_both_tool_results_in_russian(
    store: ShopStore,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    """Which tools it calls is in the ToolCallingClient contract; the wording is its own."""
    model = build_offline_model(store)
    loop = BoundedToolLoop(model, default_registry, default_executor, 3)

    result = await loop.run(conversation("Где заказ 8041 и можно ли вернуть кофемашину?"), context)

    assert "Заказ 8041: Передан в службу доставки." in result.text
    assert "2026-12-05" in result.text
    assert "«кофемашина» можно вернуть в течение 14 дней" in result.text
    assert result.model == OFFLINE_MODEL_NAME == model.model_name


async def test_tool_errors_are_retold_in_russian(
    store: ShopStore,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    loop = BoundedToolLoop(build_offline_model(store), default_registry, default_executor, 3)

    result = await loop.run(conversation("Где мой заказ 5150?"), context)

    assert result.text == "Заказ 5150 не найден."


async def test_no_tools_when_tool_choice_is_none(
    store: ShopStore, default_registry: ToolRegistry
) -> None:
    result = await build_offline_model(store).generate_with_tools(
        conversation("Где заказ 8041?"), default_registry.api_schemas(), tool_choice="none"
    )

    assert result.tool_calls == ()
    assert result.finish_reason == "stop"
    assert result.text
    assert CYRILLIC.search(result.text)


@pytest.mark.parametrize("text", ["Расскажите анекдот", "Здравствуйте!"])
async def test_no_tools_when_nothing_matches(
    store: ShopStore, default_registry: ToolRegistry, text: str
) -> None:
    result = await build_offline_model(store).generate_with_tools(
        conversation(text), default_registry.api_schemas()
    )

    assert result.tool_calls == ()
    assert result.finish_reason == "stop"
    assert result.text
    assert CYRILLIC.search(result.text)


async def test_tools_not_offered_are_never_requested(store: ShopStore) -> None:
    result = await build_offline_model(store).generate_with_tools(
        conversation("Где заказ 8041?"),
        [{"type": "function", "function": {"name": "get_support_hours"}}],
    )

    assert result.tool_calls == ()


async def test_summary_mode_without_tools_keeps_the_customer_questions(store: ShopStore) -> None:
    messages: list[Message] = [
        {"role": "developer", "content": "Сожми историю."},
        {
            "role": "user",
            "content": "Клиент: Где заказ 8041?\nБот: В пути.\nКлиент: Можно вернуть наушники?",
        },
    ]

    result = await build_offline_model(store).generate_with_tools(messages, [])

    assert result.tool_calls == ()
    assert result.text == "Клиент спрашивал: Где заказ 8041?; Можно вернуть наушники?."
