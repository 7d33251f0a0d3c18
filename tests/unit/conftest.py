"""Fixtures of the core-engine unit tests: the demo shop data, the default tools, an executor."""

from collections.abc import Iterator

import pytest

from bot.settings import DEMO_SHOP_DATA
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from turn import TurnContext


@pytest.fixture(scope="session")
def shop_data() -> ShopData:
    """The demo shop data shipped with the project."""
    return ShopData.load(DEMO_SHOP_DATA)


@pytest.fixture
def default_registry(shop_data: ShopData) -> ToolRegistry:
    """The four support tools over the demo shop data."""
    return build_default_tool_registry(shop_data)


@pytest.fixture
def default_executor(default_registry: ToolRegistry) -> Iterator[ToolExecutor]:
    """An executor of the default tools; its worker threads are stopped afterwards."""
    executor = ToolExecutor(default_registry)
    yield executor
    executor.close()


@pytest.fixture
def context() -> TurnContext:
    """A customer without restricted orders."""
    return TurnContext(conversation_key="tg:42", chat_id=42, user_id=7, turn_id="turn-1")
