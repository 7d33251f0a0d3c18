"""Offline token estimate for budgeting the history window (no tokenizer download)."""

from collections.abc import Iterable
from math import ceil

from bot.llm.types import Message

# Measured on Russian prose: cl100k spends a token per 2.65 characters, o200k
# per 4.52. Dividing by 3 is within about a tenth for cl100k and conservative
# for o200k (see docs/engine.md, "Sessions, history and summaries").
CHARS_PER_TOKEN = 3.0
# Role, separators and framing the API adds around every message.
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of a piece of text."""
    return ceil(len(text) / CHARS_PER_TOKEN)


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens of one chat message, framing included."""
    content = message.get("content")
    tokens = MESSAGE_OVERHEAD_TOKENS
    if isinstance(content, str):
        tokens += estimate_text_tokens(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        tokens += estimate_text_tokens(str(function.get("name", "")))
        tokens += estimate_text_tokens(str(function.get("arguments", "")))
    return tokens


def estimate_messages_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of a whole request's messages."""
    return sum(estimate_message_tokens(message) for message in messages)
