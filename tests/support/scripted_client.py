"""An in-process ToolCallingClient for unit tests of the layers above the model."""

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.llm.types import LLMResult, Message, ToolChoice, ToolDefinition
from tools.call import ToolCall

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
        prompt_tokens=usage,
        completion_tokens=usage,
        total_tokens=None if usage is None else usage * 2,
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
        prompt_tokens=usage,
        completion_tokens=usage,
        total_tokens=None if usage is None else usage * 2,
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
    ) -> LLMResult:
        self.requests.append((list(messages), list(tools), tool_choice))
        return self.responder(messages, tools, tool_choice)

    async def close(self) -> None:
        return None


def echo_responder(
    messages: Sequence[Message], tools: Sequence[ToolDefinition], tool_choice: ToolChoice
) -> LLMResult:
    """Answers ``Ответ: <last user text>``; summary requests get a fixed summary."""
    last_user = next(m for m in reversed(messages) if m["role"] == "user")
    if not tools and str(last_user["content"]).startswith("<previous_summary>"):
        return text_result("Краткое резюме прошлых сообщений.")
    return text_result(f"Ответ: {last_user['content']}")
