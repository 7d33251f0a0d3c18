"""A chat completion as the server-sent events OpenAI streams it (``chat.completion.chunk``).

The first event carries the role, then content arrives a few characters per
event, each tool call as its id and name followed by pieces of its arguments,
then an event with the finish reason; with ``include_usage`` a last event with
empty ``choices`` carries the usage; ``data: [DONE]`` ends the stream.
"""

import json
from collections.abc import Iterator
from typing import Any, Final

DEFAULT_STREAM_CHUNK_CHARS: Final = 8
"""Characters of content (or tool arguments) per event unless a step says otherwise."""

JsonBody = dict[str, Any]


def completion_events(
    completion: JsonBody, *, chunk_chars: int, include_usage: bool
) -> list[bytes]:
    """Every SSE event of ``completion`` streamed, ``[DONE]`` included, encoded."""
    if chunk_chars < 1:
        raise ValueError("chunk_chars must be positive")
    return [_event(chunk) for chunk in _chunks(completion, chunk_chars, include_usage)] + [
        b"data: [DONE]\n\n"
    ]


def _chunks(completion: JsonBody, size: int, include_usage: bool) -> Iterator[JsonBody]:
    def chunk(choices: list[JsonBody], usage: Any = None) -> JsonBody:
        body: JsonBody = {
            "id": completion.get("id", "chatcmpl-stream"),
            "object": "chat.completion.chunk",
            "created": completion.get("created", 0),
            "model": completion.get("model", ""),
            "choices": choices,
        }
        if include_usage:
            body["usage"] = usage
        return body

    def delta(values: JsonBody, finish_reason: str | None = None) -> list[JsonBody]:
        return [{"index": 0, "delta": values, "logprobs": None, "finish_reason": finish_reason}]

    for choice in completion.get("choices", []):
        message = choice.get("message", {})
        yield chunk(delta({"role": "assistant", "content": ""}))
        for piece in _pieces(message.get("content") or "", size):
            yield chunk(delta({"content": piece}))
        for piece in _pieces(message.get("refusal") or "", size):
            yield chunk(delta({"refusal": piece}))
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function", {})
            head = {"index": index, "id": call.get("id"), "type": "function"}
            yield chunk(
                delta(
                    {
                        "tool_calls": [
                            {**head, "function": {"name": function.get("name"), "arguments": ""}}
                        ]
                    }
                )
            )
            for piece in _pieces(function.get("arguments") or "", size):
                yield chunk(
                    delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
        yield chunk(delta({}, choice.get("finish_reason")))
    if include_usage:
        yield chunk([], completion.get("usage"))


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _event(chunk: JsonBody) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"
