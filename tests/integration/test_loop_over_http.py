"""The bounded tool loop with the real AsyncOpenAI client over HTTP and the real default tools."""

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from pydantic import PrivateAttr

from bot.llm.errors import LLMTimeoutError
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.types import Message
from bot.tool_loop import BoundedToolLoop, ToolLoopError
from tests.fakes.openai_server import (
    RecordedRequest,
    ScriptedOpenAIServer,
    error,
    hang,
    text_answer,
    tool_call_answer,
)
from tools.context import ToolContext
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutionStatus, ToolExecutor
from tools.registry import ToolRegistry
from tools.store import Order, ShopStore

CONTEXT = ToolContext(chat_id=555, user_id=7, turn_id="turn-http")
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Ты помогаешь клиенту магазина."},
    {"role": "user", "content": "Где заказ 8041 и можно ли вернуть кофемашину?"},
]


class CountingStore(ShopStore):
    """The demo store, remembering which orders the tool looked up."""

    _order_lookups: list[str] = PrivateAttr(default_factory=list)

    @property
    def order_lookups(self) -> list[str]:
        return self._order_lookups

    def find_order(self, order_id: str) -> Order | None:
        self._order_lookups.append(order_id)
        return super().find_order(order_id)


LoopFactory = Callable[..., Awaitable[BoundedToolLoop]]


@pytest.fixture
def store() -> CountingStore:
    return CountingStore.model_validate(ShopStore.load().model_dump())


@pytest.fixture
def registry(store: CountingStore) -> ToolRegistry:
    return build_default_tool_registry(store)


@pytest.fixture
def executor(registry: ToolRegistry) -> Iterator[ToolExecutor]:
    executor = ToolExecutor(registry)
    yield executor
    executor.close()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def make_loop(
    server: ScriptedOpenAIServer, registry: ToolRegistry, executor: ToolExecutor
) -> AsyncIterator[LoopFactory]:
    """Builds loops over a real OpenAIChatClient to ``server``; closes the clients."""
    clients: list[OpenAIChatClient] = []

    async def make(*, timeout_seconds: float = 2.0, max_retries: int = 0) -> BoundedToolLoop:
        client = OpenAIChatClient.create(
            api_key="test-key",
            base_url=server.base_url,
            model="test-model",
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
        )
        clients.append(client)
        return BoundedToolLoop(client, registry, executor, max_steps=3)

    yield make
    for client in clients:
        await client.close()


def tool_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


def requested_call_ids(request: RecordedRequest) -> list[str]:
    return [
        call["id"]
        for message in request.messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls", [])
    ]


async def test_direct_answer(
    server: ScriptedOpenAIServer, make_loop: LoopFactory, registry: ToolRegistry
) -> None:
    server.script(text_answer("Здравствуйте! Чем помочь?", usage=(40, 8)))
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Здравствуйте! Чем помочь?"
    assert result.model == "scripted-model"
    assert (result.model_steps, result.tool_calls_count) == (1, 0)
    assert (result.prompt_tokens, result.completion_tokens, result.total_tokens) == (40, 8, 48)
    [request] = server.requests
    assert request.body["messages"] == MESSAGES
    assert request.body["tools"] == registry.api_schemas()
    assert request.body["tool_choice"] == "auto"
    assert request.body["parallel_tool_calls"] is False
    assert server.unscripted == []


async def test_one_tool_call_goes_back_to_the_model_as_ok_json(
    server: ScriptedOpenAIServer, make_loop: LoopFactory, store: CountingStore
) -> None:
    server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        text_answer("Заказ 8041 передан в службу доставки."),
    )
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ 8041 передан в службу доставки."
    assert result.tool_names == ("get_order_status",)
    assert store.order_lookups == ["8041"]
    assert len(server.requests) == 2
    [call_id] = requested_call_ids(server.requests[1])
    [tool] = tool_messages(server.requests[1])
    assert tool["tool_call_id"] == call_id == result.audit_records[0].call_id
    content = json.loads(tool["content"])
    assert content["ok"] is True
    assert content["data"]["order_id"] == "8041"
    assert content["data"]["status_text"] == "Передан в службу доставки"
    assert server.unscripted == []


async def test_two_tools_in_sequence(server: ScriptedOpenAIServer, make_loop: LoopFactory) -> None:
    server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        tool_call_answer("get_return_policy", {"product": "Кофемашина"}),
        text_answer("Заказ в пути; кофемашину можно вернуть за 14 дней."),
    )
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ в пути; кофемашину можно вернуть за 14 дней."
    assert result.tool_names == ("get_order_status", "get_return_policy")
    assert [r.status for r in result.audit_records] == [ToolExecutionStatus.SUCCESS] * 2
    # The last step offers no tools at all, so it sends no tool_choice either.
    assert [r.body.get("tool_choice") for r in server.requests] == ["auto", "auto", None]
    last = server.requests[2]
    tools = tool_messages(last)
    assert [t["tool_call_id"] for t in tools] == requested_call_ids(last)
    policy = json.loads(tools[1]["content"])
    assert policy == {
        "ok": True,
        "data": {
            "product": "кофемашина",
            "found": True,
            "return_days": 14,
            "conditions": "Товар должен сохранить комплектность и не иметь следов использования.",
        },
    }
    assert server.unscripted == []


async def test_a_500_is_retried_by_the_sdk_and_the_turn_succeeds(
    server: ScriptedOpenAIServer, make_loop: LoopFactory
) -> None:
    server.script(error(500, headers={"retry-after-ms": "10"}), text_answer("Ответ после сбоя."))
    loop = await make_loop(max_retries=1)

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Ответ после сбоя."
    assert result.model_steps == 1
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    assert server.unscripted == []


async def test_a_hung_model_ends_the_turn_with_a_timeout(
    server: ScriptedOpenAIServer, make_loop: LoopFactory
) -> None:
    server.script(hang())
    loop = await make_loop(timeout_seconds=0.3)

    with pytest.raises(ToolLoopError) as raised:
        await loop.run(MESSAGES, CONTEXT)

    assert isinstance(raised.value.__cause__, LLMTimeoutError)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "arguments",
    ['{"order_id": 8041', '{"order_id": "80"}', '{"order_id": "8041", "user_id": 1}'],
    ids=["not-json", "bad-pattern", "extra-field"],
)
async def test_malformed_tool_arguments_are_answered_and_the_model_corrects_itself(
    server: ScriptedOpenAIServer, make_loop: LoopFactory, store: CountingStore, arguments: str
) -> None:
    server.script(
        tool_call_answer("get_order_status", arguments),
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        text_answer("Заказ 8041 в пути."),
    )
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ 8041 в пути."
    assert store.order_lookups == ["8041"]  # the handler never ran for the rejected call
    rejected = result.audit_records[0]
    assert (rejected.tool_name, rejected.status, rejected.error_code) == (
        "get_order_status",
        ToolExecutionStatus.REJECTED,
        "invalid_arguments",
    )
    tool_reply = json.loads(server.requests[1].messages[-1]["content"])
    assert tool_reply["ok"] is False
    assert tool_reply["error"]["code"] == "invalid_arguments"
    assert "8041" not in tool_reply["error"]["message"]


async def test_a_one_letter_product_search_is_retried_by_the_model_not_failed(
    server: ScriptedOpenAIServer, make_loop: LoopFactory
) -> None:
    server.script(
        tool_call_answer("search_products", {"query": "ч"}),
        tool_call_answer("search_products", {"query": "чайник"}),
        text_answer("Есть чайник HeatUp 1.5."),
    )
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Есть чайник HeatUp 1.5."
    reply = json.loads(server.requests[1].messages[-1]["content"])
    assert reply["error"]["code"] == "invalid_arguments"
    assert "query" in reply["error"]["message"]
    assert "at least 2 characters" in reply["error"]["message"]
    # The rule is stated before the call too, because the strict schema drops minLength.
    schema = next(
        tool["function"]["parameters"]["properties"]["query"]
        for tool in server.requests[0].body["tools"]
        if tool["function"]["name"] == "search_products"
    )
    assert "minLength" not in schema
    assert "От 2 до 100 символов" in schema["description"]


async def test_the_last_step_offers_no_tools_to_a_server_that_ignores_tool_choice(
    server: ScriptedOpenAIServer, make_loop: LoopFactory
) -> None:
    server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        tool_call_answer("get_support_hours", {}),
        text_answer("Заказ 8041 в пути."),
    )
    loop = await make_loop()

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ 8041 в пути."
    last = server.requests[-1].body
    assert "tools" not in last
    assert "tool_choice" not in last
    assert "tools" in server.requests[0].body
