"""The offline demo model picks the tools a real model would and answers in Russian from them."""

import json
import re

import pytest
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field

from bot.app import build_offline_model
from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.types import Message
from bot.settings import DEMO_HELP_CENTER
from bot.storage.keys import RedisKeys
from bot.tryout.demo_shop import RedisDemoShop
from bot.tryout.model import DEMO_TOOL_ROLES, OFFLINE_MODEL_DESCRIPTION, OFFLINE_MODEL_NAME, Role
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.knowledge.library import HelpCenter
from tools.registry import RegisteredTool, ToolRegistry
from tools.shop_data import ShopData
from turn import TurnContext

CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def conversation(text: str) -> list[Message]:
    return [
        {"role": "developer", "content": "Инструкция."},
        {"role": "user", "content": text},
    ]


async def test_the_answer_retells_both_tool_results_in_russian(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    """Which tools it calls is in the ToolCallingClient contract; the wording is its own."""
    model = build_offline_model(shop_data, default_registry)
    loop = BoundedToolLoop(model, default_registry, default_executor, 3)

    result = await loop.run(conversation("Где заказ 8041 и можно ли вернуть кофемашину?"), context)

    assert "Заказ 8041: Передан в службу доставки." in result.text
    assert "2026-12-05" in result.text
    assert "«кофемашина» можно вернуть в течение 14 дней" in result.text
    assert result.model == OFFLINE_MODEL_NAME == model.model_name


async def test_tool_errors_are_retold_in_russian(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    loop = BoundedToolLoop(
        build_offline_model(shop_data, default_registry), default_registry, default_executor, 3
    )

    result = await loop.run(conversation("Где мой заказ 5150?"), context)

    assert result.text == "Заказ 5150 не найден."


async def test_no_tools_when_tool_choice_is_none(
    shop_data: ShopData, default_registry: ToolRegistry
) -> None:
    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        conversation("Где заказ 8041?"), default_registry.api_schemas(), tool_choice="none"
    )

    assert result.tool_calls == ()
    assert result.finish_reason == "stop"
    assert result.text
    assert CYRILLIC.search(result.text)


@pytest.mark.parametrize("text", ["Расскажите анекдот", "Здравствуйте!"])
async def test_no_tools_when_nothing_matches(
    shop_data: ShopData, default_registry: ToolRegistry, text: str
) -> None:
    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        conversation(text), default_registry.api_schemas()
    )

    assert result.tool_calls == ()
    assert result.finish_reason == "stop"
    assert result.text
    assert CYRILLIC.search(result.text)


async def test_tools_not_offered_are_never_requested(
    shop_data: ShopData, default_registry: ToolRegistry
) -> None:
    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        conversation("Где заказ 8041?"),
        [{"type": "function", "function": {"name": "get_support_hours"}}],
    )

    assert result.tool_calls == ()


async def test_summary_mode_without_tools_keeps_the_customer_questions(
    shop_data: ShopData, default_registry: ToolRegistry
) -> None:
    messages: list[Message] = [
        {"role": "developer", "content": "Сожми историю."},
        {
            "role": "user",
            "content": (
                "<previous_summary>\n\n</previous_summary>\n<messages>\n"
                "Клиент: Где заказ 8041?\nБот: В пути.\nКлиент: Можно вернуть наушники?\n"
                "</messages>"
            ),
        },
    ]

    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        messages, []
    )

    assert result.tool_calls == ()
    assert result.text == "Клиент спрашивал: Где заказ 8041?; Можно вернуть наушники?."


async def run_offline(
    text: str, shop_data: ShopData, registry: ToolRegistry, executor: ToolExecutor, ctx: TurnContext
) -> tuple[tuple[str, ...], str]:
    loop = BoundedToolLoop(build_offline_model(shop_data, registry), registry, executor, 3)
    result = await loop.run(conversation(text), ctx)
    return result.tool_names, result.text


async def test_asking_for_an_operator_says_people_answer_in_support_hours(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    tools, text = await run_offline(
        "Позовите оператора", shop_data, default_registry, default_executor, context
    )

    assert tools == ("get_support_hours",)
    assert text.startswith("Я бот и не могу сам позвать оператора")
    assert "сотрудники поддержки на связи в часы работы" in text


async def test_returning_a_product_without_its_own_policy_gets_the_return_policy(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    tools, text = await run_offline(
        "Хочу вернуть чайник", shop_data, default_registry, default_executor, context
    )

    assert tools == ("get_return_policy",)
    assert "«чайник» отдельных условий возврата нет" in text
    assert "каталоге" not in text


async def test_order_question_without_a_number_asks_for_the_number(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    tools, text = await run_offline(
        "Где мой заказ?", shop_data, default_registry, default_executor, context
    )

    assert tools == ()
    assert "номер заказа" in text


async def test_the_last_step_without_tools_answers_instead_of_summarising(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    loop = BoundedToolLoop(
        build_offline_model(shop_data, default_registry), default_registry, default_executor, 1
    )

    result = await loop.run(conversation("Здравствуйте"), context)

    assert result.text == "Здравствуйте! Чем могу помочь?"


class _ParcelWeightArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parcel: str = Field(min_length=2, max_length=100, description="Номер посылки.")


class _ParcelWeightResult(BaseModel):
    parcel: str
    weight_kg: float


def _parcel_weight(arguments: _ParcelWeightArguments) -> _ParcelWeightResult:
    return _ParcelWeightResult(parcel=arguments.parcel, weight_kg=1.5)


async def test_a_tool_registered_in_the_registry_is_known_without_editing_bot(
    shop_data: ShopData, context: TurnContext
) -> None:
    """A new tool needs no line in bot/: the demo model learns it from the registry."""
    registry = build_default_tool_registry(shop_data)
    registry.register(
        RegisteredTool(
            name="test_parcel_weight",
            description="Вес посылки.",
            arguments_model=_ParcelWeightArguments,
            handler=_parcel_weight,
            blocking=False,
        )
    )
    executor = ToolExecutor(registry)
    try:
        model = build_offline_model(shop_data, registry)
        loop = BoundedToolLoop(model, registry, executor, 3)
        named = await loop.run(conversation("test_parcel_weight AB-17"), context)
        shipped = await loop.run(conversation("Где заказ 8041?"), context)
    finally:
        executor.close()

    assert model.knowledge.tools == registry.names()
    assert "test_parcel_weight" in model.knowledge.unknown_tools()
    # Named in the message: called with its arguments filled from the rest of it.
    assert named.tool_names == ("test_parcel_weight",)
    # Written in Latin letters only: answered in English.
    assert named.text == 'Result: {"parcel": "AB-17", "weight_kg": 1.5}'
    # The shipped tools keep their rules.
    assert shipped.tool_names == ("get_order_status",)


def test_the_roles_follow_the_registry(shop_data: ShopData, default_registry: ToolRegistry) -> None:
    """A shipped tool the registry lacks is not one the model knows."""
    knowledge = build_offline_model(shop_data, default_registry).knowledge

    assert knowledge.tool(Role.ORDER_STATUS) == "get_order_status"
    assert knowledge.tool(Role.HELP_CENTER) is None
    assert knowledge.tool(Role.CANCEL_ORDER) is None
    assert "get_order_status" not in knowledge.unknown_tools()


async def test_one_table_gives_every_shipped_tool_its_role_and_its_words(
    shop_data: ShopData,
) -> None:
    """DEMO_TOOL_ROLES is the one mapping: a registry with every shipped tool fills every role."""
    client = aioredis.Redis()
    try:
        registry = build_default_tool_registry(
            shop_data,
            help_center=HelpCenter.load(DEMO_HELP_CENTER),
            shop=RedisDemoShop(client, RedisKeys("unit"), shop_data),
        )
        knowledge = build_offline_model(shop_data, registry).knowledge
    finally:
        await client.aclose()

    assert sorted(role.role for role in DEMO_TOOL_ROLES.values()) == sorted(Role)
    assert set(DEMO_TOOL_ROLES) == set(registry.names())
    assert {knowledge.tool(role) for role in Role} == set(registry.names())
    assert knowledge.unknown_tools() == ()


def test_the_description_says_in_one_line_what_it_is_and_how_to_use_a_real_model(
    shop_data: ShopData, default_registry: ToolRegistry
) -> None:
    model = build_offline_model(shop_data, default_registry)

    assert model.description == OFFLINE_MODEL_DESCRIPTION
    assert "\n" not in OFFLINE_MODEL_DESCRIPTION
    assert len(OFFLINE_MODEL_DESCRIPTION) <= 200
    assert "not a language model" in OFFLINE_MODEL_DESCRIPTION
    assert "OPENAI_API_KEY" in OFFLINE_MODEL_DESCRIPTION


@pytest.mark.parametrize(
    ("text", "product"),
    [
        ("Хочу вернуть электрический чайник", "электрический чайник"),
        ("Можно сдать наушники обратно?", "наушники"),
        ("Хочу вернуть товар", None),
        ("Как вернуть деньги за возврат?", None),
        ("верну ли я деньги если передумал", None),
    ],
)
async def test_the_returned_product_is_one_the_shop_names_never_a_generic_word(
    shop_data: ShopData, default_registry: ToolRegistry, text: str, product: str | None
) -> None:
    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        conversation(text), default_registry.api_schemas()
    )

    calls = [(call.name, json.loads(call.arguments)) for call in result.tool_calls]
    if product is None:
        assert calls == []
        assert result.text
        assert "«" not in result.text
    else:
        assert calls == [("get_return_policy", {"product": product})]


@pytest.mark.parametrize(
    ("text", "order_id"),
    [
        ("Где заказ 8041?", "8041"),
        ("заказ №8042", "8042"),
        ("8043", "8043"),
        ("почему доставка платная если у меня заказ на 4000", None),
        ("доставка от 3000 ₽ бесплатная?", None),
        ("заказ на сумму 5000 руб не оплачивается", None),
        ("what's the status for 8041", "8041"),
        ("is delivery free from 3000 rub", None),
        ("my order of $4000 was not paid", None),
    ],
)
async def test_four_digits_are_an_order_number_unless_they_are_a_sum(
    shop_data: ShopData, default_registry: ToolRegistry, text: str, order_id: str | None
) -> None:
    result = await build_offline_model(shop_data, default_registry).generate_with_tools(
        conversation(text), default_registry.api_schemas()
    )

    calls = [(call.name, json.loads(call.arguments)) for call in result.tool_calls]
    if order_id is None:
        assert "get_order_status" not in [name for name, _ in calls]
    else:
        assert calls == [("get_order_status", {"order_id": order_id})]


async def test_an_english_customer_gets_the_same_tools_and_an_english_answer(
    shop_data: ShopData,
    default_registry: ToolRegistry,
    default_executor: ToolExecutor,
    context: TurnContext,
) -> None:
    loop = BoundedToolLoop(
        build_offline_model(shop_data, default_registry), default_registry, default_executor, 3
    )

    result = await loop.run(
        conversation("Where is order 8041 and can I return the coffee machine?"), context
    )
    hours = await loop.run(conversation("What are your opening hours?"), context)

    assert result.tool_names == ("get_order_status", "get_return_policy")
    assert "Order 8041: handed over to the delivery service." in result.text
    assert "Expected delivery date: 2026-12-05." in result.text
    assert 'The "coffee machine" can be returned within 14 days.' in result.text
    assert hours.tool_names == ("get_support_hours",)
    assert "Schedule (Europe/Moscow): Monday: 09:00–21:00" in hours.text
    assert "Sunday: closed" in hours.text
