"""What can go wrong in a chat turn, in words a front end can act on.

Each error says what *kind* of failure it was (``kind`` is also the audit
outcome) and carries the turn id, the incident code shown to the customer.
The loop's and the store's own exceptions stay in ``__cause__`` for the logs.
"""

from typing import ClassVar


class ChatServiceError(RuntimeError):
    """Base of every failed turn."""

    kind: ClassVar[str] = "error"

    def __init__(self, message: str, turn_id: str = "") -> None:
        super().__init__(message)
        self.turn_id = turn_id


class ChatInputError(ChatServiceError):
    """The customer's message cannot be processed as it is; ``str()`` is fit for the user."""

    kind = "bad_input"


class EmptyMessageError(ChatInputError):
    """Empty or whitespace-only message."""

    kind = "empty_message"


class MessageTooLongError(ChatInputError):
    """Message over the configured maximum length."""

    kind = "message_too_long"


class ChatModelUnavailableError(ChatServiceError):
    """The model timed out, was rate limited or could not be reached: try again later."""

    kind = "model_unavailable"


class ChatBadRequestError(ChatServiceError):
    """The provider refused the request itself (for example, context too long)."""

    kind = "bad_request"


class ChatModelProtocolError(ChatServiceError):
    """The model answered outside the protocol (refusal, empty text, malformed response)."""

    kind = "model_error"


class ChatToolFailureError(ChatServiceError):
    """A tool call could not be executed (unknown tool, bad arguments, timeout, crash)."""

    kind = "tool_failure"


class ChatLimitError(ChatServiceError):
    """The turn ran out of model steps or tool calls before an answer."""

    kind = "limit"


class ChatStorageError(ChatServiceError):
    """Session storage is unavailable, or the conversation stayed busy too long."""

    kind = "storage_unavailable"


class ChatBusyError(ChatStorageError):
    """Another turn of the same conversation held it for longer than the wait allows."""

    kind = "busy"
