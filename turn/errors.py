"""Errors of the turn's lowest floor: why a tool loop ended without an answer, and a tool's "no".

Every loop error carries its :class:`~turn.outcomes.TurnOutcome` kind, so the
chat service translates by kind instead of digging in ``__cause__``; the
original exception stays in the chain for the logs.
"""

from typing import ClassVar

from turn.outcomes import TurnOutcome


class ToolLoopError(RuntimeError):
    """Base of every way a tool loop can end without an answer; ``kind`` says which."""

    default_kind: ClassVar[TurnOutcome] = TurnOutcome.MODEL_UNAVAILABLE

    def __init__(self, message: str, kind: TurnOutcome | None = None) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind


class ToolLoopModelError(ToolLoopError):
    """A model call failed; ``kind`` is model_unavailable, bad_request or model_error."""


class ToolLoopProtocolError(ToolLoopError):
    """The model answered outside the protocol: refusal, empty text, odd finish reason."""

    default_kind = TurnOutcome.MODEL_ERROR


class ToolLoopLimitError(ToolLoopError):
    """The step or tool-call budget ran out before a final answer."""

    default_kind = TurnOutcome.LIMIT


class ToolLoopExecutionError(ToolLoopError):
    """A tool call could not be executed (timeout, crash); its audit went to the observer."""

    default_kind = TurnOutcome.TOOL_FAILURE


class ToolBusinessError(RuntimeError):
    """Raised by a tool handler when a product rule says no (not a malfunction).

    The executor turns it into a normal result the model can explain.
    """

    def __init__(self, message: str, code: str = "business_error") -> None:
        super().__init__(message)
        self.code = code
