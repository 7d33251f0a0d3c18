"""The ToolCallingClient contract, run against every implementation.

The scripted client, the offline demo model and the OpenAI client over HTTP (to
the scripted server) answer the same conversations. The scripted ones are told
what to answer; the offline model decides from the customer's words, so each
scenario is worded so that it decides the same. Answer *texts* differ between
implementations and are not compared; everything else is.
"""

import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from bot.app import build_offline_model
from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.openai_client import OpenAIChatClient
from bot.llm.types import (
    LLMResult,
    Message,
    TextListener,
    ToolCallingClient,
    ToolChoice,
    ToolDefinition,
)
from bot.testing.counting_shop import CountingShop, counting_shop
from bot.testing.openai_server import ScriptedOpenAIServer, text_answer, tool_call_answer
from bot.testing.scripted_client import Script, ScriptedClient, text_result, tool_result
from bot.tryout.model import OfflineChatModel
from tools.default_registry import build_default_tool_registry
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from tools.shop_data import ShopData
from turn import ToolStatus, TurnContext


@dataclass(frozen=True)
class Say:
    """The model answers with text."""

    text: str


@dataclass(frozen=True)
class Call:
    """The model asks for one tool call."""

    name: str
    arguments: dict[str, Any]


Step = Say | Call
Received = tuple[list[Message], ToolChoice | None]


@dataclass
class ModelUnderTest:
    """A client, how to tell it what to answer, and what it was sent."""

    client: ToolCallingClient
    script: Callable[[Sequence[Step]], None]
    received: Callable[[], list[Received]]


class _RecordingOfflineModel(OfflineChatModel):
    """The offline model, remembering what it was sent (it has no server to ask)."""

    def __init__(self, shop_data: ShopData) -> None:
        super().__init__(
            build_offline_model(shop_data, build_default_tool_registry(shop_data)).knowledge
        )
        self.requests: list[Received] = []

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        self.requests.append((copy.deepcopy(list(messages)), tool_choice))
        return await super().generate_with_tools(messages, tools, tool_choice, on_text=on_text)


def _scripted() -> ModelUnderTest:
    script = Script()
    client = ScriptedClient(script)

    def add(steps: Sequence[Step]) -> None:
        script.add(
            *(
                tool_result(step.name, step.arguments)
                if isinstance(step, Call)
                else text_result(step.text)
                for step in steps
            )
        )

    def received() -> list[Received]:
        return [(messages, choice) for messages, _, choice in client.requests]

    return ModelUnderTest(client, add, received)


def _offline(shop: ShopData) -> ModelUnderTest:
    model = _RecordingOfflineModel(shop)
    # It decides from the customer's words: the script only documents what it will do.
    return ModelUnderTest(model, lambda steps: None, lambda: model.requests)


def _over_http(server: ScriptedOpenAIServer) -> ModelUnderTest:
    def script(steps: Sequence[Step]) -> None:
        server.script(
            *(
                tool_call_answer(step.name, step.arguments)
                if isinstance(step, Call)
                else text_answer(step.text)
                for step in steps
            )
        )

    client = OpenAIChatClient.create(
        api_key="test-key",
        base_url=server.base_url,
        model="test-model",
        timeout_seconds=2.0,
        max_retries=0,
    )
    return ModelUnderTest(
        client,
        script,
        lambda: [
            (request.messages, request.body.get("tool_choice")) for request in server.requests
        ],
    )


@pytest.fixture
def shop() -> CountingShop:
    """The demo shop data, counting order lookups."""
    return counting_shop()


@pytest.fixture
def registry(shop: CountingShop) -> ToolRegistry:
    """The four support tools over ``shop``."""
    return build_default_tool_registry(shop)


@pytest.fixture
def executor(registry: ToolRegistry) -> Iterator[ToolExecutor]:
    """An executor of ``registry``; its threads stop afterwards."""
    executor = ToolExecutor(registry)
    yield executor
    executor.close()


@pytest.fixture(params=["scripted", "offline", "openai-http"])
async def model(
    request: pytest.FixtureRequest, shop: CountingShop
) -> AsyncIterator[ModelUnderTest]:
    """Each implementation; the HTTP one talks to a scripted server of this test.

    A request the server was not scripted for is answered 500 and fails the test.
    """
    async with AsyncExitStack() as stack:
        if request.param == "scripted":
            under_test = _scripted()
        elif request.param == "offline":
            under_test = _offline(shop)
        else:
            under_test = _over_http(await stack.enter_async_context(ScriptedOpenAIServer()))
        yield under_test
        await under_test.client.close()


def conversation(text: str) -> list[Message]:
    return [
        {"role": "developer", "content": "Ты помогаешь клиенту магазина."},
        {"role": "user", "content": text},
    ]


CONTEXT = TurnContext(conversation_key="tg:555", chat_id=555, user_id=7, turn_id="turn-contract")


async def test_a_greeting_gets_a_text_answer(model: ModelUnderTest, registry: ToolRegistry):
    model.script([Say("Здравствуйте! Чем могу помочь?")])

    result = await model.client.generate_with_tools(
        conversation("Здравствуйте!"), registry.api_schemas()
    )

    assert result.text
    assert result.text.strip()
    assert (result.refusal, result.finish_reason, result.tool_calls) == (None, "stop", ())
    assert result.model
    assert result.response_id


async def test_an_order_question_asks_for_the_order_tool(
    model: ModelUnderTest, registry: ToolRegistry
):
    model.script([Call("get_order_status", {"order_id": "8041"})])

    result = await model.client.generate_with_tools(
        conversation("Где заказ 8041?"), registry.api_schemas()
    )

    assert (result.text, result.finish_reason) == (None, "tool_calls")
    [call] = result.tool_calls
    assert call.id
    assert call.name == "get_order_status"
    assert json.loads(call.arguments) == {"order_id": "8041"}


async def test_told_text_pieces_join_into_the_answer(model: ModelUnderTest, registry: ToolRegistry):
    """With a listener the text is told as it is written; the pieces are the answer."""
    model.script([Say("Здравствуйте! Чем могу помочь вам сегодня?")])
    pieces: list[str] = []

    result = await model.client.generate_with_tools(
        conversation("Здравствуйте!"), registry.api_schemas(), on_text=pieces.append
    )

    assert result.text
    assert pieces
    assert all(pieces)
    assert "".join(pieces) == result.text
    assert (result.refusal, result.finish_reason, result.tool_calls) == (None, "stop", ())
    assert result.usage.total_tokens is not None


async def test_a_tool_call_with_a_listener_is_whole_and_tells_no_text(
    model: ModelUnderTest, registry: ToolRegistry
):
    model.script([Call("get_order_status", {"order_id": "8041"})])
    pieces: list[str] = []

    result = await model.client.generate_with_tools(
        conversation("Где заказ 8041?"), registry.api_schemas(), on_text=pieces.append
    )

    assert pieces == []
    assert (result.text, result.finish_reason) == (None, "tool_calls")
    [call] = result.tool_calls
    assert call.id
    assert call.name == "get_order_status"
    assert json.loads(call.arguments) == {"order_id": "8041"}


async def test_without_tools_the_answer_is_text(model: ModelUnderTest):
    """Summary mode: no tools offered, tools forbidden."""
    model.script([Say("Клиент спрашивал о заказе 8041.")])

    result = await model.client.generate_with_tools(
        conversation("Клиент: Где заказ 8041?\nБот: В пути."), [], "none"
    )

    assert result.text
    assert result.tool_calls == ()


async def test_usage_counts_add_up(model: ModelUnderTest, registry: ToolRegistry):
    model.script([Say("Здравствуйте!")])

    result = await model.client.generate_with_tools(
        conversation("Здравствуйте!"), registry.api_schemas()
    )

    usage = result.usage
    assert usage.prompt_tokens is not None
    assert usage.completion_tokens is not None
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_the_model_receives_the_conversation_and_the_callers_list_is_intact(
    model: ModelUnderTest, registry: ToolRegistry
):
    messages = conversation("Где заказ 8041?")
    sent = copy.deepcopy(messages)
    model.script([Call("get_order_status", {"order_id": "8041"})])

    await model.client.generate_with_tools(messages, registry.api_schemas(), "auto")

    assert messages == sent
    assert model.received() == [(sent, "auto")]


async def test_two_questions_run_two_tools_in_sequence_through_the_loop(
    model: ModelUnderTest, registry: ToolRegistry, executor: ToolExecutor, shop: CountingShop
):
    """The loop over the client: each tool result goes back to the model under its call id."""
    model.script(
        [
            Call("get_order_status", {"order_id": "8041"}),
            Call("get_return_policy", {"product": "кофемашина"}),
            Say("Заказ в пути; кофемашину можно вернуть за 14 дней."),
        ]
    )
    loop = BoundedToolLoop(model.client, registry, executor, max_steps=3)

    result = await loop.run(conversation("Где заказ 8041 и можно ли вернуть кофемашину?"), CONTEXT)

    assert result.text.strip()
    assert result.tool_names == ("get_order_status", "get_return_policy")
    assert [r.status for r in result.audit_records] == [ToolStatus.SUCCESS] * 2
    assert result.model_steps == 3
    assert shop.order_lookups == ["8041"]
    received = model.received()
    # The last step offers no tools; over HTTP such a request carries no tool_choice at all.
    assert [choice or "none" for _, choice in received] == ["auto", "auto", "none"]
    last = received[-1][0]
    asked = [call["id"] for m in last if m["role"] == "assistant" for call in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert asked == answered == [record.call_id for record in result.audit_records]
    order, policy = (json.loads(m["content"]) for m in last if m["role"] == "tool")
    assert order["ok"] is True
    assert order["data"]["status_text"] == "Передан в службу доставки"
    assert policy == {
        "ok": True,
        "data": {
            "product": "кофемашина",
            "found": True,
            "return_days": 14,
            "conditions": "Товар должен сохранить комплектность и не иметь следов использования.",
        },
    }
