"""The turn's one deadline covers the model calls and the tools between them, all together.

A real registry and executor; the model is an in-process client whose every
call takes a while. No single wait comes near the deadline: only the sum of
them passes it. The loop's clock is the test's (:mod:`bot.testing.clock`): each
call spends its seconds at once, so what the deadline cut is certain however
loaded the machine is, and the test takes no real time.
"""

import asyncio
import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, ConfigDict

from bot.engine.tool_loop import BoundedToolLoop
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from bot.testing.clock import SteppedClockLoop, run_with_stepped_clock
from tools.execution import ToolExecutionRecord, ToolExecutor
from tools.registry import RegisteredTool, ToolRegistry
from turn import ToolCall, ToolLoopError, TurnContext, TurnOutcome, Usage

CONTEXT = TurnContext(conversation_key="tg:10", chat_id=10, user_id=20, turn_id="turn")
MESSAGES: list[Message] = [
    {"role": "developer", "content": "Инструкция."},
    {"role": "user", "content": "Вопрос клиента"},
]
# Each step (model call or tool) spends 25 s of the loop's clock: two fit in the 60 s
# deadline, the third passes it. The slack (10 s) is real time the machine may take.
STEP_SECONDS = 25.0
DEADLINE = 60.0


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class Result(BaseModel):
    text: str


class SlowModel:
    """Asks for the slow tool, then (if asked again) answers; each call takes a while."""

    model_name = "slow"

    def __init__(self, clock: SteppedClockLoop | None = None) -> None:
        self.clock = clock
        self.calls = 0
        self.cut: list[int] = []

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        self.calls += 1
        try:
            await _spend(self.clock)
        except asyncio.CancelledError:
            self.cut.append(self.calls)
            raise
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


async def _spend(clock: SteppedClockLoop | None) -> None:
    """One step's time: the test's clock moves on by a step (without one: none passes)."""
    if clock is not None:
        await clock.spend(STEP_SECONDS)
    else:
        await asyncio.sleep(0)


def _loop(
    deadline: float | None, clock: SteppedClockLoop | None = None
) -> tuple[BoundedToolLoop, ToolExecutor, SlowModel]:
    async def slow(arguments: Arguments) -> Result:
        await _spend(clock)
        return Result(text=arguments.text)

    registry = ToolRegistry()
    registry.register(
        RegisteredTool(
            name="slow",
            description="Медленный инструмент.",
            arguments_model=Arguments,
            handler=slow,
            # Its own timeout is no nearer than the deadline's: only the sum may end the turn.
            timeout_seconds=STEP_SECONDS + 5,
        )
    )
    executor = ToolExecutor(registry)
    model = SlowModel(clock)
    return (
        BoundedToolLoop(model, registry, executor, max_steps=3, deadline_seconds=deadline),
        executor,
        model,
    )


def test_model_call_tool_model_call_together_pass_the_deadline() -> None:
    # 3 x 25 s: each well under the 60 s deadline, together over it.
    async def main(clock: SteppedClockLoop) -> None:
        loop, executor, model = _loop(DEADLINE, clock)
        seen = Seen()
        try:
            with pytest.raises(ToolLoopError) as raised:
                await loop.run(MESSAGES, CONTEXT, observer=seen)
        finally:
            executor.close()

        assert raised.value.kind is TurnOutcome.DEADLINE
        assert "deadline of 60 s" in str(raised.value)
        # Cut at the deadline, in the middle of the second call, not when it would have ended.
        assert model.cut == [2]
        # What finished before the deadline is reported; the cut call is not.
        assert seen.steps == [1]
        assert [record.tool_name for record in seen.tools] == ["slow"]
        assert model.calls == 2

    run_with_stepped_clock(main)


def test_the_same_steps_within_a_longer_deadline_answer() -> None:
    # The control: 3 x 25 s inside a 100 s deadline end in the answer, nothing cut.
    async def main(clock: SteppedClockLoop) -> None:
        loop, executor, model = _loop(100.0, clock)
        try:
            result = await loop.run(MESSAGES, CONTEXT)
        finally:
            executor.close()
        assert result.text == "Ответ."
        assert (model.calls, model.cut) == (2, [])

    run_with_stepped_clock(main)


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
