"""The tools this application allows, built fresh for every application instance."""

from collections.abc import Callable
from datetime import UTC, datetime

from tools.help_center import build_search_help_center_tool
from tools.knowledge.library import HelpCenter
from tools.order_actions import (
    build_cancel_order_tool,
    build_change_delivery_address_tool,
    build_request_return_tool,
)
from tools.order_status import build_order_status_tool
from tools.product_search import build_product_search_tool
from tools.registry import ToolRegistry
from tools.return_policy import build_return_policy_tool
from tools.shop_backend import ShopBackend
from tools.shop_data import ShopData
from tools.support_hours import build_support_hours_tool
from tools.write_tools import Localize, as_written


def build_default_tool_registry(
    shop_data: ShopData,
    timezone: str | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    help_center: HelpCenter | None = None,
    shop: ShopBackend | None = None,
    *,
    demo_shop: bool = True,
    localize: Localize = as_written,
) -> ToolRegistry:
    """A new registry with the four read-only support tools over ``shop_data``.

    With ``help_center``, ``search_help_center`` over it is the fifth. With
    ``shop`` (a backend that can change orders), ``get_order_status`` reads it
    and the three write tools over it are registered. Without ``demo_shop`` (a shop
    connected its own tools over MCP) the tools over the demo shop's data (orders,
    products, return policies, the write tools) are left out; the support hours and
    the help center stay. ``localize``: the write tools' cards and outcomes in the
    customer's language (the application's catalogs).
    """
    registry = ToolRegistry()
    if demo_shop:
        registry.register(build_order_status_tool(shop_data, shop))
        registry.register(build_return_policy_tool(shop_data))
        registry.register(build_product_search_tool(shop_data))
    registry.register(build_support_hours_tool(shop_data, timezone=timezone, clock=clock))
    if help_center is not None:
        registry.register(build_search_help_center_tool(help_center))
    if shop is not None and demo_shop:
        registry.register_write(build_cancel_order_tool(shop, localize))
        registry.register_write(build_request_return_tool(shop, shop_data, clock, localize))
        registry.register_write(build_change_delivery_address_tool(shop, localize))
    return registry
