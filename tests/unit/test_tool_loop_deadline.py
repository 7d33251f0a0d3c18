"""The turn's one deadline covers the model calls and the tools between them, all together.

A real registry and executor; the model is an in-process client whose every
call takes a while. No single wait comes near any timeout of its own: only the
sum of them passes the deadline.
"""

import asyncio
import json
import time
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, ConfigDict

from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from tools.execution import ToolExecutionRecord, ToolExecutor
from tools.registry import RegisteredTool, ToolRegistry
from turn import ToolCall, ToolLoopError, TurnContext, TurnOutcome, Usage

CONTEXT = TurnContext(conversation_key="tg:10", chat_id=10, user_id=20, turn_id="turn")
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Вопрос клиента"},
]
STEP_SECONDS = 0.4
DEADLINE = 1.0


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class Result(BaseModel):
    text: str


class SlowModel:
    """Asks for the slow tool, then (if asked again) answers; each call takes a while."""

    model_name = "slow"

    def __init__(self) -> None:
        self.calls = 0

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        self.calls += 1
        await asyncio.sleep(STEP_SECONDS)
        calls: tuple[ToolCall, ...] = ()
        if tools and self.calls == 1:
            calls = (ToolCall(id="c1", name="slow", arguments=json.dumps({"text": "x"})),)
        return LLMResult(
            text=None if calls else "Ответ.",
            refusal=None,
            finish_reason="tool_calls" if calls else "stop",
            tool_calls=calls,
            model="slow",
            response_id=f"r{self.calls}",
            usage=Usage(),
        )

    async def close(self) -> None:
        return None


class Seen:
    def __init__(self) -> None:
        self.tools: list[ToolExecutionRecord] = []
        self.steps: list[int] = []

    def on_model_response(self, step: int, result: LLMResult) -> None:
        self.steps.append(step)

    def on_tool_executed(self, step: int, record: ToolExecutionRecord) -> None:
        self.tools.append(record)


def _loop(deadline: float | None) -> tuple[BoundedToolLoop, ToolExecutor, SlowModel]:
    async def slow(arguments: Arguments) -> Result:
        await asyncio.sleep(STEP_SECONDS)
        return Result(text=arguments.text)

    registry = ToolRegistry()
    registry.register(
        RegisteredTool(
            name="slow",
            description="Медленный инструмент.",
            arguments_model=Arguments,
            handler=slow,
        )
    )
    executor = ToolExecutor(registry)
    model = SlowModel()
    return (
        BoundedToolLoop(model, registry, executor, max_steps=3, deadline_seconds=deadline),
        executor,
        model,
    )


async def test_model_call_tool_model_call_together_pass_the_deadline() -> None:
    # 3 x 0.4 s: each under any timeout, together over a 1 s deadline.
    loop, executor, model = _loop(DEADLINE)
    seen = Seen()
    started = time.monotonic()
    try:
        with pytest.raises(ToolLoopError) as raised:
            await loop.run(MESSAGES, CONTEXT, observer=seen)
    finally:
        executor.close()
    took = time.monotonic() - started

    assert raised.value.kind is TurnOutcome.DEADLINE
    assert "deadline of 1 s" in str(raised.value)
    # Cut at the deadline, not when the call would have ended (a loaded machine adds a bit).
    assert DEADLINE <= took < DEADLINE + STEP_SECONDS / 2
    # What finished before the deadline is reported; the cut call is not.
    assert seen.steps == [1]
    assert [record.tool_name for record in seen.tools] == ["slow"]
    assert model.calls == 2


async def test_a_turn_within_its_deadline_answers() -> None:
    loop, executor, _ = _loop(5.0)
    try:
        result = await loop.run(MESSAGES, CONTEXT)
    finally:
        executor.close()
    assert result.text == "Ответ."


def test_a_deadline_must_be_positive() -> None:
    registry = ToolRegistry()
    executor = ToolExecutor(registry)
    try:
        with pytest.raises(ValueError, match="deadline_seconds"):
            BoundedToolLoop(SlowModel(), registry, executor, deadline_seconds=0)
    finally:
        executor.close()
