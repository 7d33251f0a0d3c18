"""How a turn ended and how a tool execution ended: the audit's and the front ends' words."""

from dataclasses import dataclass
from enum import StrEnum


class TurnOutcome(StrEnum):
    """The outcome of one customer turn (the audit's ``outcome`` field)."""

    ANSWERED = "answered"
    UNDELIVERED = "undelivered"
    EMPTY_MESSAGE = "empty_message"
    MESSAGE_TOO_LONG = "message_too_long"
    BAD_INPUT = "bad_input"
    MODEL_UNAVAILABLE = "model_unavailable"
    # The provider refused the key or does not know the model: a configuration fault.
    MODEL_MISCONFIGURED = "model_misconfigured"
    # No connection to the provider at all (refused, no such host, a proxy that refused).
    MODEL_UNREACHABLE = "model_unreachable"
    BAD_REQUEST = "bad_request"
    MODEL_ERROR = "model_error"
    TOOL_FAILURE = "tool_failure"
    LIMIT = "limit"
    DEADLINE = "deadline"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    BUSY = "busy"
    ERROR = "error"


class ToolStatus(StrEnum):
    """How one tool execution ended (the audit's ``status`` field)."""

    SUCCESS = "success"
    BUSINESS_ERROR = "business_error"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    TECHNICAL_ERROR = "technical_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffRequest:
    """A step's outcome: the model asked for a person (``reason``: a closed category)."""

    reason: str
