"""The demo shop's MCP server as a client sees it: a real child process, the SDK's client.

Over streamable HTTP and over stdio, against a real redis-server: the tool list
(titles, annotations, schemas), read tools, a write tool applied once and
answered the same when repeated, and refusals as ``isError`` results.
"""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from mcp import Client
from mcp_types import CallToolResult

from bot.settings import DEMO_SHOP_DATA
from bot.storage.keys import RedisKeys
from bot.testing.mcp_shop import DemoShopMcpProcess, stdio_parameters
from bot.testing.redis_server import RedisServer
from bot.tryout.demo_shop import RedisDemoShop
from tools.shop_backend import Customer
from tools.shop_data import ShopData

READ_TOOLS = {
    "get_order_status",
    "get_return_policy",
    "search_products",
    "get_support_hours",
    "find_customer_by_phone",
}
WRITE_TOOLS = {"cancel_order", "request_return", "change_delivery_address"}


@pytest.fixture
def key_prefix() -> str:
    """A prefix of this test's own: the shared redis-server holds other tests' keys."""
    return f"mcp{uuid.uuid4().hex[:8]}"


@pytest.fixture
def shop_process(
    redis_server: RedisServer, key_prefix: str, tmp_path: Path
) -> Iterator[DemoShopMcpProcess]:
    """``python -m bot shop-mcp`` listening on a free port."""
    process = DemoShopMcpProcess(redis_server.url, key_prefix, tmp_path)
    process.start()
    yield process
    process.stop()


def _error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert isinstance(error, dict)
    return error


async def test_tools_over_http_read_write_and_refuse(
    shop_process: DemoShopMcpProcess, redis_server: RedisServer, key_prefix: str
) -> None:
    async with Client(shop_process.url) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == READ_TOOLS | WRITE_TOOLS
        for name, tool in listed.items():
            annotations = tool.annotations
            assert annotations is not None
            assert tool.title is not None
            assert any("а" <= char <= "я" for char in tool.title.lower()), tool.title
            if name in READ_TOOLS:
                assert annotations.read_only_hint is True
                assert annotations.destructive_hint is False
            else:
                assert annotations.read_only_hint is False
                assert annotations.destructive_hint is True
                assert annotations.idempotent_hint is True
            assert tool.output_schema is not None
        # Whose orders: an argument of every order tool, for the application to bind.
        for name in {"get_order_status"} | WRITE_TOOLS:
            assert "customer_id" in listed[name].input_schema["required"]
        assert "customer_id" not in listed["search_products"].input_schema["properties"]
        items = listed["request_return"].input_schema["properties"]["items"]
        assert items["type"] == "array"
        assert items["items"]["type"] == "string"
        assert listed["get_order_status"].input_schema["properties"]["order_id"]["pattern"]

        # Read: 5150 is the demo customer 100500's own order, nobody else's.
        own = await client.call_tool(
            "get_order_status", {"customer_id": "100500", "order_id": "5150"}
        )
        assert not own.is_error
        assert own.structured_content is not None
        assert own.structured_content["status"] == "ready_for_pickup"
        foreign = await client.call_tool(
            "get_order_status", {"customer_id": "777", "order_id": "5150"}
        )
        assert _error(foreign) == {"code": "order_not_found", "message": "Заказ 5150 не найден."}
        assert foreign.content[0].type == "text"

        # Write: done once; the same call again answers the same and changes nothing more.
        arguments = {"customer_id": "777", "order_id": "8042", "reason": "передумал"}
        first = await client.call_tool("cancel_order", arguments)
        again = await client.call_tool("cancel_order", {**arguments, "reason": "всё же отмена"})
        assert not first.is_error
        assert first.structured_content is not None
        assert first.structured_content["order"]["status"] == "cancelled"
        assert first.structured_content["message"].startswith("Заказ 8042 отменён")
        assert again.structured_content == first.structured_content

        # A shop rule says no: isError with its code, nothing changed.
        refused = await client.call_tool(
            "cancel_order", {"customer_id": "777", "order_id": "8041", "reason": "долго"}
        )
        assert _error(refused)["code"] == "not_cancellable"

        found = await client.call_tool("find_customer_by_phone", {"phone": "+7 916 123-45-67"})
        assert found.structured_content == {"customer_id": "100500", "name": "Анна"}
        missing = await client.call_tool("find_customer_by_phone", {"phone": "+79990000000"})
        assert _error(missing)["code"] == "customer_not_found"

        # Arguments that fail the schema: the fields and rules, never the values.
        invalid = await client.call_tool(
            "get_order_status", {"customer_id": "777", "order_id": "секрет-12"}
        )
        error = _error(invalid)
        assert error["code"] == "invalid_arguments"
        assert error["message"].startswith("order_id: ")
        assert "секрет" not in str(invalid.content)

    # The same demo orders the bot's built-in tools read: customer 777 sees 8042 cancelled.
    redis = aioredis.Redis.from_url(redis_server.url)
    try:
        shop = RedisDemoShop(redis, RedisKeys(key_prefix), ShopData.load(DEMO_SHOP_DATA))
        order = await shop.order(Customer(user_id=777, chat_id=777), "8042")
        assert order is not None
        assert order.status == "cancelled"
        untouched = await shop.order(Customer(user_id=778, chat_id=778), "8042")
        assert untouched is not None
        assert untouched.status == "processing"
        receipts = [key async for key in redis.scan_iter(match=f"{key_prefix}:*done*")]
        assert len(receipts) == 1
    finally:
        await redis.aclose()
    assert shop_process.stop() == 0


async def test_tools_over_stdio(redis_server: RedisServer, key_prefix: str, tmp_path: Path) -> None:
    async with Client(stdio_parameters(redis_server.url, key_prefix, tmp_path)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == READ_TOOLS | WRITE_TOOLS
        search = await client.call_tool("search_products", {"query": "наушники"})
        assert search.structured_content is not None
        assert search.structured_content["total_found"] == 2
        changed = await client.call_tool(
            "change_delivery_address",
            {"customer_id": "c-42", "order_id": "8042", "address": "Москва, ул. Ленина, 1"},
        )
        assert changed.structured_content is not None
        assert changed.structured_content["order"]["delivery_address"] == "Москва, ул. Ленина, 1"
        # A list-valued argument; a return of an order not yet delivered is refused.
        refused = await client.call_tool(
            "request_return",
            {
                "customer_id": "c-42",
                "order_id": "8042",
                "items": ["наушники", "чехол для наушников"],
                "reason": "не подошли",
            },
        )
        assert _error(refused)["code"] == "not_returnable"

    # A customer id that is not a number is the customer the built-in tools know by that
    # chat (the console's conversation id): the same order, changed.
    redis = aioredis.Redis.from_url(redis_server.url)
    try:
        shop = RedisDemoShop(redis, RedisKeys(key_prefix), ShopData.load(DEMO_SHOP_DATA))
        order = await shop.order(Customer(user_id=None, chat_id="c-42"), "8042")
        assert order is not None
        assert order.delivery_address == "Москва, ул. Ленина, 1"
    finally:
        await redis.aclose()
