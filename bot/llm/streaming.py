"""Assembling a streamed chat completion into one :class:`LLMResult`, deltas passed on.

Content arrives in pieces, each tool call as its id and name followed by pieces
of its arguments (keyed by the call's index), then a finish reason; the usage,
when asked for, comes in a last chunk without choices. A stream that ends
before its finish reason was cut mid-way: nothing of it may be used.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx2
from openai.types.chat import ChatCompletionChunk

from bot.llm.errors import LLMBadResponseError, LLMUnavailableError
from bot.llm.http_client import body_pieces
from bot.llm.parsing import usage_of
from bot.llm.types import LLMResult, TextListener
from turn import ToolCall, Usage


async def sse_data(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The data of each ``data:`` line of a server-sent event stream, as it arrives.

    Comments, event names and blank lines are skipped; a line may end in ``\\n``,
    ``\\r\\n`` or ``\\r`` and may be split between reads. Each event is one line of
    JSON in a chat completion stream, so lines are not joined into events.
    """
    rest = b""
    async for piece in body_pieces(response):
        if not piece:
            continue
        text = rest + piece if rest else piece
        lines = text.splitlines()
        rest = b"" if text.endswith((b"\n", b"\r")) else lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if rest.startswith(b"data:"):
        yield rest[5:].strip()


@dataclass(slots=True)
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Collects the chunks of one streamed completion; tells ``on_text`` each content piece."""

    def __init__(self, on_text: TextListener | None = None) -> None:
        self._on_text = on_text
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _ToolCallParts] = {}
        self._finish_reason: str | None = None
        self._model = ""
        self._response_id = ""
        self._usage = Usage()
        self._chunks = 0

    @property
    def writing(self) -> bool:
        """Whether the answer is under way: text, a refusal or a tool call came, no finish yet."""
        return self._finish_reason is None and bool(self._content or self._refusal or self._calls)

    def add(self, chunk: ChatCompletionChunk) -> None:
        """Take one chunk; only the first choice counts (one is asked for)."""
        self._chunks += 1
        self._model = chunk.model or self._model
        self._response_id = chunk.id or self._response_id
        if chunk.usage is not None:
            self._usage = usage_of(chunk.usage)
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            self._content.append(delta.content)
            if self._on_text is not None:
                self._on_text(delta.content)
        if delta.refusal:
            self._refusal.append(delta.refusal)
        for call in delta.tool_calls or ():
            parts = self._calls.setdefault(call.index, _ToolCallParts())
            if call.id:
                parts.id = call.id
            if call.function is not None:
                if call.function.name:
                    parts.name += call.function.name
                if call.function.arguments:
                    parts.arguments.append(call.function.arguments)
        if choice.finish_reason is not None:
            self._finish_reason = choice.finish_reason

    def result(self) -> LLMResult:
        """The whole completion; raises when the stream ended before its finish reason."""
        if self._chunks == 0:
            raise LLMBadResponseError("the model provider sent an empty stream")
        if self._finish_reason is None:
            raise LLMUnavailableError("the model's stream ended before the answer was complete")
        calls = tuple(
            ToolCall(id=parts.id, name=parts.name, arguments="".join(parts.arguments))
            for _, parts in sorted(self._calls.items())
        )
        if any(not call.id or not call.name for call in calls):
            raise LLMBadResponseError("the model provider streamed a tool call without id or name")
        return LLMResult(
            text="".join(self._content) if self._content else None,
            refusal="".join(self._refusal) if self._refusal else None,
            finish_reason=self._finish_reason,
            tool_calls=calls,
            model=self._model,
            response_id=self._response_id,
            usage=self._usage,
        )


def tell_text(result: LLMResult, on_text: TextListener | None) -> LLMResult:
    """``result``, its whole text told to ``on_text`` at once (for a model that does not stream)."""
    if on_text is not None and result.text:
        on_text(result.text)
    return result
