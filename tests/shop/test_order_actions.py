"""The three demo write tools: preconditions, the card's text, the handler's outcome."""

import json
from datetime import UTC, datetime

import pytest

from bot.language.catalogs import Catalogs
from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.tryout.demo_shop import RedisDemoShop
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.shop_backend import Customer
from tools.shop_data import ShopData
from turn import ToolBusinessError, ToolCall, TurnContext

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ALICE = Customer(user_id=1001, chat_id=1001)


@pytest.fixture
def registry(redis_client: AsyncRedisClient) -> ToolRegistry:
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    shop = RedisDemoShop(redis_client, RedisKeys("acttest"), shop_data, clock=lambda: NOW)
    return build_default_tool_registry(shop_data, clock=lambda: NOW, shop=shop)


async def order_status(registry: ToolRegistry, order_id: str) -> dict[str, object]:
    executor = ToolExecutor(registry)
    try:
        result = await executor.execute(
            ToolCall(id="c", name="get_order_status", arguments=json.dumps({"order_id": order_id})),
            TurnContext(conversation_key="tg:1001", chat_id=1001, user_id=1001, turn_id="t"),
        )
    finally:
        executor.close()
    payload: dict[str, object] = json.loads(result.content)
    return payload


def test_write_tools_are_registered_as_writes(registry: ToolRegistry) -> None:
    names = {"cancel_order", "request_return", "change_delivery_address"}
    assert names <= set(registry.names())
    for name in names:
        tool = registry.write_tool(name)
        assert tool is not None
        assert tool.kind == "write"
    assert registry.write_tool("get_order_status") is None
    assert registry.get("get_order_status").kind == "read"
    schemas = {schema["function"]["name"] for schema in registry.api_schemas()}
    assert names <= schemas


async def test_cancel_8042_is_described_then_done_once(registry: ToolRegistry) -> None:
    tool = registry.write_tool("cancel_order")
    assert tool is not None
    arguments = tool.arguments_model.model_validate({"order_id": "8042", "reason": "передумал"})
    state = await tool.check(arguments, ALICE)
    assert tool.describe(arguments, state) == (
        "Отменить заказ 8042: наушники, чехол для наушников. "
        "Деньги вернутся на карту в течение 5 дней."
    )
    first = await tool.handler(arguments, ALICE, "act-1")
    again = await tool.handler(arguments, ALICE, "act-1")
    assert first.done
    assert first.card_text == "✅ Заказ 8042 отменён"
    assert again == first
    status = await order_status(registry, "8042")
    assert status["data"]["status"] == "cancelled"  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        ("cancel_order", {"order_id": "8041", "reason": "долго"}, "not_cancellable"),
        ("cancel_order", {"order_id": "5150", "reason": "долго"}, "order_not_found"),
        (
            "request_return",
            {"order_id": "8042", "items": ["наушники"], "reason": "x"},
            "not_returnable",
        ),
        (
            "request_return",
            {"order_id": "8043", "items": ["мышь"], "reason": "x"},
            "item_not_in_order",
        ),
        (
            "request_return",
            {"order_id": "8043", "items": ["клавиатура"] * 10, "reason": "x"},
            "item_quantity_exceeded",
        ),
        (
            "change_delivery_address",
            {"order_id": "8041", "address": "Москва, ул. Ленина, 1"},
            "address_not_changeable",
        ),
    ],
)
async def test_preconditions_refuse_with_a_code(
    registry: ToolRegistry, name: str, arguments: dict[str, object], code: str
) -> None:
    tool = registry.write_tool(name)
    assert tool is not None
    with pytest.raises(ToolBusinessError) as error:
        await tool.check(tool.arguments_model.model_validate(arguments), ALICE)
    assert error.value.code == code


async def test_return_of_8043_gives_a_number_shown_by_order_status(registry: ToolRegistry) -> None:
    tool = registry.write_tool("request_return")
    assert tool is not None
    arguments = tool.arguments_model.model_validate(
        {"order_id": "8043", "items": ["клавиатура"], "reason": "не подошла"}
    )
    await tool.check(arguments, ALICE)
    result = await tool.handler(arguments, ALICE, "act-2")
    status = await order_status(registry, "8043")
    return_id = status["data"]["return_id"]  # type: ignore[index]
    assert isinstance(return_id, str)
    assert return_id.startswith("R8043-")
    assert return_id in result.message


async def test_address_change_is_shown_by_order_status(registry: ToolRegistry) -> None:
    tool = registry.write_tool("change_delivery_address")
    assert tool is not None
    arguments = tool.arguments_model.model_validate(
        {"order_id": "8042", "address": "Казань, ул. Баумана, 5"}
    )
    state = await tool.check(arguments, ALICE)
    assert "Казань, ул. Баумана, 5" in tool.describe(arguments, state)
    result = await tool.handler(arguments, ALICE, "act-3")
    assert result.done
    status = await order_status(registry, "8042")
    assert status["data"]["delivery_address"] == "Казань, ул. Баумана, 5"  # type: ignore[index]
    # A rule that no longer holds at execution is an outcome, not a crash.
    cancel = registry.write_tool("cancel_order")
    assert cancel is not None
    cancel_args = cancel.arguments_model.model_validate({"order_id": "8043", "reason": "x"})
    refused = await cancel.handler(cancel_args, ALICE, "act-4")
    assert not refused.done
    assert refused.error_code == "not_cancellable"


async def test_lookup_tells_what_a_run_under_the_key_did_without_running_it(
    registry: ToolRegistry,
) -> None:
    tool = registry.write_tool("cancel_order")
    assert tool is not None
    arguments = tool.arguments_model.model_validate({"order_id": "8042", "reason": "передумал"})
    assert await tool.lookup(arguments, ALICE, "act-9") is None
    status = await order_status(registry, "8042")
    assert status["data"]["status"] == "processing"  # type: ignore[index]
    done = await tool.handler(arguments, ALICE, "act-9")
    assert await tool.lookup(arguments, ALICE, "act-9") == done


async def test_an_english_customer_hears_a_refusal_in_english(
    redis_client: AsyncRedisClient,
) -> None:
    """What the check refuses is told in the customer's language (a retelling model says it)."""
    catalogs = Catalogs()
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    shop = RedisDemoShop(redis_client, RedisKeys("acttest"), shop_data, clock=lambda: NOW)
    registry = build_default_tool_registry(
        shop_data,
        clock=lambda: NOW,
        shop=shop,
        localize=lambda language, message: catalogs.texts(language or "ru").gettext(message),
    )
    tool = registry.write_tool("cancel_order")
    assert tool is not None
    english = Customer(user_id=1001, chat_id=1001, language="en")
    arguments = tool.arguments_model.model_validate({"order_id": "9999", "reason": "no"})

    with pytest.raises(ToolBusinessError) as refused:
        await tool.check(arguments, english)

    assert str(refused.value) == "Order 9999 was not found."
