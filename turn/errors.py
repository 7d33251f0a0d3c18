"""Errors of the turn's lowest floor: why a tool loop ended without an answer, and a tool's "no".

One loop error, carrying its :class:`~turn.outcomes.TurnOutcome` kind: the chat
service translates it by kind (``bot.engine.chat_errors.chat_error_for``) instead
of digging in ``__cause__``; the original exception stays in the chain for the logs.
"""

from turn.outcomes import TurnOutcome


class ToolLoopError(RuntimeError):
    """A tool loop ended without an answer; ``kind`` says why.

    ``model_unavailable``, ``bad_request`` or ``model_error``: a model call failed or
    answered outside the protocol (refusal, empty text, odd finish reason);
    ``limit``: the step or tool-call budget ran out; ``tool_failure``: a tool call
    could not be executed (timeout, crash; its audit went to the observer);
    ``deadline``: the turn as a whole (model calls, tools, streams) ran out of time.
    """

    def __init__(self, message: str, kind: TurnOutcome) -> None:
        super().__init__(message)
        self.kind = kind


class ToolBusinessError(RuntimeError):
    """Raised by a tool handler when a product rule says no (not a malfunction).

    The executor turns it into a normal result the model can explain.
    """

    def __init__(self, message: str, code: str = "business_error") -> None:
        super().__init__(message)
        self.code = code
