"""The tool loop tells a reply stream each step's text and the tools a step waits for."""

from collections.abc import Sequence

import pytest

from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.errors import LLMUnavailableError
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from bot.testing.scripted_client import scripted, text_result, tool_result
from tools.execution import ToolExecutor
from tools.registry import ToolRegistry
from turn import ToolLoopError, TurnContext, TurnOutcome

CONTEXT = TurnContext(conversation_key="tg:1", chat_id=1, user_id=1, turn_id="turn-stream")
MESSAGES = [{"role": "user", "content": "Где заказ 8041?"}]


class Seen:
    """A ReplyStream keeping what it was told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_text(self, piece: str) -> None:
        self.events.append(("text", piece))

    def on_tools(self, names: tuple[str, ...]) -> None:
        self.events.append(("tools", names))


async def test_tools_are_announced_before_they_run_and_the_answer_is_told(
    default_registry: ToolRegistry, default_executor: ToolExecutor
) -> None:
    client = scripted(
        tool_result("get_order_status", {"order_id": "8041"}), text_result("Заказ в пути.")
    )
    loop = BoundedToolLoop(client, default_registry, default_executor)
    seen = Seen()

    result = await loop.run(MESSAGES, CONTEXT, stream=seen)

    assert result.text == "Заказ в пути."
    assert seen.events == [("tools", ("get_order_status",)), ("text", "Заказ в пути.")]


class CutAfterText:
    """A model that streams the start of an answer, then loses its stream."""

    model_name = "cut"

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        assert on_text is not None, "the loop passes its stream's listener"
        on_text("Сейчас проверю ваш заказ")
        raise LLMUnavailableError("the model's stream was cut")

    async def close(self) -> None:
        return None


async def test_a_model_failure_after_text_was_told_still_fails_the_turn(
    default_registry: ToolRegistry, default_executor: ToolExecutor
) -> None:
    loop = BoundedToolLoop(CutAfterText(), default_registry, default_executor)
    seen = Seen()

    with pytest.raises(ToolLoopError) as raised:
        await loop.run(MESSAGES, CONTEXT, stream=seen)
    assert seen.events == [("text", "Сейчас проверю ваш заказ")], "the text was told first"
    assert raised.value.kind is TurnOutcome.MODEL_UNAVAILABLE
