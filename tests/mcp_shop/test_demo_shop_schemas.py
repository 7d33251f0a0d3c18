"""The demo shop's MCP tools take exactly the arguments the built-in tools' models declare.

The server's schemas are derived from the arguments models, so the two cannot drift:
every property (but the bound ``customer_id``) carries the model's rules and words.
"""

from typing import Any

import pytest
from pydantic import BaseModel

from bot.settings import DEMO_SHOP_DATA
from bot.storage.connection import AsyncRedisClient
from bot.storage.keys import RedisKeys
from bot.tryout.demo_shop import RedisDemoShop
from bot.tryout.demo_shop_mcp import build_demo_shop_server
from tools.order_actions import (
    CancelOrderArguments,
    ChangeDeliveryAddressArguments,
    RequestReturnArguments,
)
from tools.order_status import GetOrderStatusArguments
from tools.product_search import SearchProductsArguments
from tools.return_policy import GetReturnPolicyArguments
from tools.shop_data import ShopData

MODELS: dict[str, type[BaseModel]] = {
    "get_order_status": GetOrderStatusArguments,
    "get_return_policy": GetReturnPolicyArguments,
    "search_products": SearchProductsArguments,
    "cancel_order": CancelOrderArguments,
    "request_return": RequestReturnArguments,
    "change_delivery_address": ChangeDeliveryAddressArguments,
}
RULES = ("type", "description", "minLength", "maxLength", "pattern", "minItems", "maxItems")


def _rules(schema: dict[str, Any]) -> dict[str, Any]:
    rules = {key: schema[key] for key in RULES if key in schema}
    if "items" in schema:
        rules["items"] = _rules(schema["items"])
    return rules


@pytest.mark.parametrize("tool", sorted(MODELS))
async def test_a_demo_tools_arguments_are_its_models(
    redis_client: AsyncRedisClient, tool: str
) -> None:
    shop_data = ShopData.load(DEMO_SHOP_DATA)
    server = build_demo_shop_server(
        RedisDemoShop(redis_client, RedisKeys("schemas"), shop_data), shop_data
    )
    [listed] = [item for item in await server.list_tools() if item.name == tool]
    expected = MODELS[tool].model_json_schema()

    properties = dict(listed.input_schema["properties"])
    properties.pop("customer_id", None)
    assert {name: _rules(spec) for name, spec in properties.items()} == {
        name: _rules(spec) for name, spec in expected["properties"].items()
    }
    required = set(listed.input_schema.get("required", [])) - {"customer_id"}
    assert required == set(expected.get("required", []))
