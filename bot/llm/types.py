"""What the application exchanges with a chat model, independent of any SDK."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import orjson
from pydantic import BaseModel

from turn import ToolCall, Usage

Message = dict[str, Any]
"""One chat message in the OpenAI wire shape (role, content, tool_calls, tool_call_id)."""


class EncodedPart:
    """One content part of a message, encoded as JSON once: an image's part (megabytes).

    Every model call of a turn sends the whole conversation again, and a turn with
    tools makes several. The customer's images are made into these parts once per
    turn; the OpenAI client copies their bytes into each request body as they are,
    instead of encoding the images' data URLs again at every step of the tool loop.
    A client that reads messages rather than sending them sees :meth:`as_dict`.
    """

    __slots__ = ("json",)

    def __init__(self, encoded: bytes) -> None:
        self.json = encoded

    @classmethod
    def image(cls, data_url: str) -> "EncodedPart":
        """An ``image_url`` part of a user message for ``data_url``."""
        return cls(orjson.dumps({"type": "image_url", "image_url": {"url": data_url}}))

    def as_dict(self) -> dict[str, Any]:
        """The part as plain JSON values."""
        value: dict[str, Any] = orjson.loads(self.json)
        return value


ToolDefinition = dict[str, Any]
"""One function tool in the OpenAI wire shape."""

ToolChoice = Literal["auto", "none"]

MODEL_PROBE_TEXT = "Health check: reply with the single word ok."
"""The one question a start-up probe asks the model (a few tokens; never a customer's turn)."""

TextListener = Callable[[str], None]
"""Told each piece of answer text as the model writes it; must return at once (no I/O)."""


@dataclass(frozen=True, slots=True)
class LLMResult:
    """One model response; any usage count may be unknown (``None``)."""

    text: str | None
    refusal: str | None
    finish_reason: str | None
    tool_calls: tuple[ToolCall, ...]
    model: str
    response_id: str
    usage: Usage = field(default_factory=Usage)

    def tool_calls_message(self) -> Message:
        """The assistant message that asked for these tool calls, for the next request."""
        return {
            "role": "assistant",
            "content": self.text,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ],
        }


class ToolCallingClient(Protocol):
    """The one capability the tool loop and the summary service need from a model."""

    async def generate_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        tool_choice: ToolChoice = "auto",
        *,
        on_text: TextListener | None = None,
    ) -> LLMResult:
        """Send the conversation (and tools, if any) and return the model's answer.

        With ``on_text`` the answer's text is also told piece by piece as it is
        written, in order; the pieces joined are the result's ``text``. A failure
        after some pieces raises as any other: the pieces are not an answer.
        """
        ...

    @property
    def model_name(self) -> str:
        """The configured model name, for logs and metadata."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


StructuredT = TypeVar("StructuredT", bound=BaseModel)


@dataclass(frozen=True, slots=True, kw_only=True)
class StructuredResult(Generic[StructuredT]):
    """A model's answer in a given shape: ``value``, or why there is none (``refusal``)."""

    value: StructuredT | None
    refusal: str | None
    model: str
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class StructuredOutputClient(Protocol):
    """A model that answers in the shape of a pydantic model (Structured Outputs).

    Two implementations: the OpenAI-compatible client (``json_schema``, with JSON
    mode plus validation for servers without it) and the offline demo analyst.
    """

    async def generate_structured(
        self, messages: Sequence[Message], output: type[StructuredT]
    ) -> StructuredResult[StructuredT]:
        """Ask for one answer shaped like ``output``; a malformed one raises.

        Raises :class:`~bot.llm.errors.LLMBadResponseError` when the answer does
        not validate, and the other :class:`~bot.llm.errors.LLMClientError` kinds
        as a chat request does.
        """
        ...

    @property
    def model_name(self) -> str:
        """The configured model name."""
        ...
