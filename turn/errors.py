"""Errors of the turn's lowest floor: why a tool loop ended without an answer, and a tool's "no".

The seed design's names are the public API: :class:`ToolLoopError` is the base
(``except ToolLoopError`` catches every loop failure), and the loop raises
:class:`ToolLoopProtocolError`, :class:`ToolLoopLimitError` or
:class:`ToolLoopExecutionError` where the seed raises them; a failed model call
is a plain :class:`ToolLoopError`. Each carries its
:class:`~turn.outcomes.TurnOutcome` ``kind``, so the chat service translates by
kind (``bot.chat_errors.chat_error_for``) instead of by class or by
digging in ``__cause__``; the original exception stays in the chain for the logs.
"""

from turn.outcomes import TurnOutcome
from turn.records import ToolExecutionRecord


class ToolLoopError(RuntimeError):
    """A tool loop ended without an answer; ``kind`` says why.

    Raised as it is for a failed model call (``model_unavailable``,
    ``bad_request`` or ``model_error``) and when the turn as a whole (model
    calls, tools, streams) ran out of time (``deadline``); the subclasses below
    name the other ways a loop ends: the protocol (``model_error``), the budget
    (``limit``), a tool that could not run (``tool_failure``).
    """

    def __init__(self, message: str, kind: TurnOutcome) -> None:
        super().__init__(message)
        self.kind = kind


class ToolLoopProtocolError(ToolLoopError):
    """The model answered outside the protocol: a refusal, no text, an odd finish reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message, TurnOutcome.MODEL_ERROR)


class ToolLoopLimitError(ToolLoopError):
    """The step or tool-call budget ran out before a final answer."""

    def __init__(self, message: str) -> None:
        super().__init__(message, TurnOutcome.LIMIT)


class ToolLoopExecutionError(ToolLoopError):
    """A tool call could not be executed (timeout, crash).

    ``audit`` is the failed execution's record (tool name, status, duration), so
    the application sees which tool failed and how; the executor's own error is
    the cause.
    """

    def __init__(self, message: str, audit: ToolExecutionRecord) -> None:
        super().__init__(message, TurnOutcome.TOOL_FAILURE)
        self.audit = audit


class ToolBusinessError(RuntimeError):
    """Raised by a tool handler when a product rule says no (not a malfunction).

    The executor turns it into a normal result the model can explain.
    """

    def __init__(self, message: str, code: str = "business_error") -> None:
        super().__init__(message)
        self.code = code
