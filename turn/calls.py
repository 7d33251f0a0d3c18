"""A tool call as the model asked for it."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One function call requested by the model.

    ``arguments`` is the raw JSON text written by the model: it is untrusted
    until the tool's arguments model has validated it.
    """

    id: str
    name: str
    arguments: str
