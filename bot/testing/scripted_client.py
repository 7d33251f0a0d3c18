"""An in-process ToolCallingClient for unit tests of the layers above the model."""

import itertools
import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.llm.streaming import tell_text
from bot.llm.types import LLMResult, Message, TextListener, ToolChoice, ToolDefinition
from turn import ToolCall, Usage

Responder = Callable[[Sequence[Message], Sequence[ToolDefinition], ToolChoice], LLMResult]

_ids = itertools.count(1)


def text_result(text: str, *, usage: int | None = 10, model: str = "scripted") -> LLMResult:
    """A final text answer."""
    return LLMResult(
        text=text,
        refusal=None,
        finish_reason="stop",
        tool_calls=(),
        model=model,
        response_id=f"resp-{next(_ids)}",
        usage=_usage(usage),
    )


def tool_result(name: str, arguments: dict[str, Any], *, usage: int | None = 10) -> LLMResult:
    """A request for one tool call."""
    return LLMResult(
        text=None,
        refusal=None,
        finish_reason="tool_calls",
        tool_calls=(ToolCall(id=f"call-{next(_ids)}", name=name, arguments=json.dumps(arguments)),),
        model="scripted",
        response_id=f"resp-{next(_ids)}",
        usage=_usage(usage),
    )


@dataclass
class ScriptedClient:
    """Answers from ``responder`` (or raises what it raises) and records every request."""

    responder: Responder
    requests: list[tuple[list[Message], list[ToolDefinition], ToolChoice]] = field(
        default_factory=list
    )

    @property
    def model_name(self) -> str:
        return "scripted"

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        self.requests.append((list(messages), list(tools), tool_choice))
        return tell_text(self.responder(messages, tools, tool_choice), on_text)

    async def close(self) -> None:
        return None


@dataclass
class Script:
    """A responder answering its steps in order and raising the exceptions among them.

    A call past the last step raises :class:`AssertionError`: the caller asked the
    model more often than the test allowed.
    """

    steps: deque[LLMResult | Exception] = field(default_factory=deque)

    def add(self, *steps: LLMResult | Exception) -> None:
        """Queue more steps."""
        self.steps.extend(steps)

    def __call__(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
    ) -> LLMResult:
        if not self.steps:
            raise AssertionError("unscripted model call")
        step = self.steps.popleft()
        if isinstance(step, Exception):
            raise step
        return step


def scripted(*steps: LLMResult | Exception) -> ScriptedClient:
    """A client answering ``steps`` in order (see :class:`Script`)."""
    return ScriptedClient(Script(deque(steps)))


def echo_responder(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Answers ``Ответ: <last user text>``; summary requests get a fixed summary."""
    last_user = next(m for m in reversed(messages) if m["role"] == "user")
    if not tools and str(last_user["content"]).startswith("<previous_summary>"):
        return text_result("Краткое резюме прошлых сообщений.")
    return text_result(f"Ответ: {last_user['content']}")


def _usage(tokens: int | None) -> Usage:
    return Usage(
        prompt_tokens=tokens,
        completion_tokens=tokens,
        total_tokens=None if tokens is None else tokens * 2,
    )
