"""The provider's JSON read into the SDK's types, validated in one pass by pydantic-core.

A completion or chunk that does not validate (an unknown finish reason from a
compatible server, a field it leaves out) is built the SDK's lenient way
instead, as the SDK itself would have: what the turn needs is checked on access.
"""

import json
from typing import Any

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import ValidationError

from bot.llm.errors import LLMBadResponseError, LLMUnavailableError
from turn import Usage


def parse_completion(body: bytes) -> ChatCompletion:
    """The completion in a response's ``body``."""
    try:
        return ChatCompletion.model_validate_json(body)
    except ValidationError:
        pass
    data = _json_object(
        body,
        not_json="the model provider sent a body that is not JSON",
        not_object="the model provider sent something that is not a chat completion",
    )
    return ChatCompletion.construct(**data)


def parse_chunk(data: str | bytes) -> ChatCompletionChunk:
    """One stream event's ``chat.completion.chunk``.

    An ``error`` object in the stream means the provider gave up on the answer.
    """
    try:
        return ChatCompletionChunk.model_validate_json(data)
    except ValidationError:
        pass
    value = _json_object(
        data,
        not_json="the model provider streamed an event that is not JSON",
        not_object="the model provider streamed something that is not a chunk",
    )
    if value.get("error"):
        raise LLMUnavailableError("the model provider ended the stream with an error")
    return ChatCompletionChunk.construct(**value)


def usage_of(usage: CompletionUsage) -> Usage:
    """The token counts of the SDK's ``usage``."""
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def _json_object(data: str | bytes, *, not_json: str, not_object: str) -> dict[str, Any]:
    """``data`` as a JSON object; :class:`LLMBadResponseError` with the message that fits."""
    try:
        value = json.loads(data)
    except ValueError as error:
        raise LLMBadResponseError(not_json) from error
    if not isinstance(value, dict):
        raise LLMBadResponseError(not_object)
    return value
