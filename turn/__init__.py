"""What a turn is: the lowest floor of the import graph, imported by everything above it.

Nothing here imports ``bot``, ``tools`` or ``prompts``.

- :class:`TurnContext`: who a turn is for (conversation, chat, user, turn id).
- :class:`ToolCall`: one function call as the model asked for it.
- :class:`Usage`: token counts, summed in one place.
- :class:`TurnOutcome`, :class:`ToolStatus`: how a turn and a tool execution ended;
  :class:`HandoffRequest`: a step that asked for a person.
- :class:`ToolLoopError` with its kind, and the seed's subclasses
  :class:`ToolLoopProtocolError`, :class:`ToolLoopLimitError`,
  :class:`ToolLoopExecutionError` (which carries the failed execution's
  :class:`ToolExecutionRecord`); :class:`ToolBusinessError` for tools.
- :class:`TurnInput`: what the customer sent (text, voice, photo), for the audit.
- :func:`new_turn_id`: the incident code a customer can quote.
"""

from turn.calls import ToolCall
from turn.context import TurnContext
from turn.errors import (
    ToolBusinessError,
    ToolLoopError,
    ToolLoopExecutionError,
    ToolLoopLimitError,
    ToolLoopProtocolError,
)
from turn.ids import TURN_ID_ALPHABET, new_turn_id
from turn.inputs import TEXT_INPUT, ImagePart, InputKind, TurnInput
from turn.outcomes import HandoffRequest, ToolStatus, TurnOutcome
from turn.records import ToolExecutionRecord
from turn.usage import Usage

__all__ = [
    "TEXT_INPUT",
    "TURN_ID_ALPHABET",
    "HandoffRequest",
    "ImagePart",
    "InputKind",
    "ToolBusinessError",
    "ToolCall",
    "ToolExecutionRecord",
    "ToolLoopError",
    "ToolLoopExecutionError",
    "ToolLoopLimitError",
    "ToolLoopProtocolError",
    "ToolStatus",
    "TurnContext",
    "TurnInput",
    "TurnOutcome",
    "Usage",
    "new_turn_id",
]
