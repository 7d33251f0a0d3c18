"""The loop recovers from the model's mistakes, with the real AsyncOpenAI client over HTTP.

A rejected call (unknown tool, arguments that fail validation or are not
JSON) is answered to the model as its tool message, naming the field and the
rule but never the value, and the model may correct itself; the last allowed
step offers no tools at all, even to a server that ignores ``tool_choice``.
"""

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.types import Message
from bot.testing.counting_shop import CountingShop, counting_shop
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, tool_call_answer
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from turn import ToolStatus, TurnContext

CONTEXT = TurnContext(conversation_key="tg:555", chat_id=555, user_id=7, turn_id="turn-http")
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Ты помогаешь клиенту магазина."},
    {"role": "user", "content": "Где заказ 8041?"},
]


@pytest.fixture
def shop() -> CountingShop:
    return counting_shop()


@pytest.fixture
def executor(shop: CountingShop) -> Iterator[ToolExecutor]:
    executor = ToolExecutor(build_default_tool_registry(shop))
    yield executor
    executor.close()


@pytest.fixture
async def loop(
    openai_server: ScriptedOpenAIServer, shop: CountingShop, executor: ToolExecutor
) -> AsyncIterator[BoundedToolLoop]:
    client = OpenAIChatClient.create(
        api_key="test-key",
        base_url=openai_server.base_url,
        model="test-model",
        timeout_seconds=2.0,
        max_retries=0,
    )
    yield BoundedToolLoop(client, build_default_tool_registry(shop), executor, max_steps=3)
    await client.close()


@pytest.mark.parametrize(
    "arguments",
    ['{"order_id": 8041', '{"order_id": "80"}', '{"order_id": "8041", "user_id": 1}'],
    ids=["not-json", "bad-pattern", "extra-field"],
)
async def test_malformed_tool_arguments_are_answered_and_the_model_corrects_itself(
    openai_server: ScriptedOpenAIServer, loop: BoundedToolLoop, shop: CountingShop, arguments: str
) -> None:
    openai_server.script(
        tool_call_answer("get_order_status", arguments),
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        text_answer("Заказ 8041 в пути."),
    )

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ 8041 в пути."
    assert shop.order_lookups == ["8041"]  # the handler never ran for the rejected call
    rejected = result.audit_records[0]
    assert (rejected.tool_name, rejected.status, rejected.error_code) == (
        "get_order_status",
        ToolStatus.REJECTED,
        "invalid_arguments",
    )
    tool_reply = json.loads(openai_server.requests[1].messages[-1]["content"])
    assert tool_reply["ok"] is False
    assert tool_reply["error"]["code"] == "invalid_arguments"
    assert "8041" not in tool_reply["error"]["message"]


async def test_a_one_letter_product_search_is_retried_by_the_model_not_failed(
    openai_server: ScriptedOpenAIServer, loop: BoundedToolLoop
) -> None:
    openai_server.script(
        tool_call_answer("search_products", {"query": "ч"}),
        tool_call_answer("search_products", {"query": "чайник"}),
        text_answer("Есть чайник HeatUp 1.5."),
    )

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Есть чайник HeatUp 1.5."
    reply = json.loads(openai_server.requests[1].messages[-1]["content"])
    assert reply["error"]["code"] == "invalid_arguments"
    assert "query" in reply["error"]["message"]
    assert "at least 2 characters" in reply["error"]["message"]
    # The rule is stated before the call too, because the strict schema drops minLength.
    schema = next(
        tool["function"]["parameters"]["properties"]["query"]
        for tool in openai_server.requests[0].body["tools"]
        if tool["function"]["name"] == "search_products"
    )
    assert "minLength" not in schema
    assert "От 2 до 100 символов" in schema["description"]


async def test_the_last_step_offers_no_tools_to_a_server_that_ignores_tool_choice(
    openai_server: ScriptedOpenAIServer, loop: BoundedToolLoop
) -> None:
    openai_server.script(
        tool_call_answer("get_order_status", {"order_id": "8041"}),
        tool_call_answer("get_support_hours", {}),
        text_answer("Заказ 8041 в пути."),
    )

    result = await loop.run(MESSAGES, CONTEXT)

    assert result.text == "Заказ 8041 в пути."
    last = openai_server.requests[-1].body
    assert "tools" not in last
    assert "tool_choice" not in last
    assert "tools" in openai_server.requests[0].body
