"""Fixtures of the core-engine unit tests: the demo store, the default tools, an executor."""

from collections.abc import Iterator

import pytest

from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.store import ShopStore
from turn import TurnContext


@pytest.fixture(scope="session")
def store() -> ShopStore:
    """The demo store shipped with the project."""
    return ShopStore.load()


@pytest.fixture
def default_registry(store: ShopStore) -> ToolRegistry:
    """The four support tools over the demo store."""
    return build_default_tool_registry(store)


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
