"""What can go wrong in a chat turn, in words a front end can act on.

Each error says what *kind* of failure it was (``kind`` is also the audit
outcome) and carries the turn id, the incident code shown to the customer.
The loop's and the store's own exceptions stay in ``__cause__`` for the logs.
"""

from typing import ClassVar

from turn import TurnOutcome


class ChatServiceError(RuntimeError):
    """Base of every failed turn."""

    kind: ClassVar[TurnOutcome] = TurnOutcome.ERROR

    def __init__(self, message: str, turn_id: str = "") -> None:
        super().__init__(message)
        self.turn_id = turn_id
        # A worker's turn: its audit entries (stream fields, see bot.audit.schema),
        # written after the customer has been told, like an answered turn's.
        self.audit_fields: tuple[dict[str, str], ...] = ()


class ChatInputError(ChatServiceError):
    """The customer's message cannot be processed as it is; ``str()`` is fit for the user."""

    kind = TurnOutcome.BAD_INPUT


class EmptyMessageError(ChatInputError):
    """Empty or whitespace-only message."""

    kind = TurnOutcome.EMPTY_MESSAGE


class MessageTooLongError(ChatInputError):
    """Message over the configured maximum length."""

    kind = TurnOutcome.MESSAGE_TOO_LONG


class ChatModelUnavailableError(ChatServiceError):
    """The model timed out, was rate limited or could not be reached: try again later."""

    kind = TurnOutcome.MODEL_UNAVAILABLE


class ChatBadRequestError(ChatServiceError):
    """The provider refused the request itself (for example, context too long)."""

    kind = TurnOutcome.BAD_REQUEST


class ChatModelProtocolError(ChatServiceError):
    """The model answered outside the protocol (refusal, empty text, malformed response)."""

    kind = TurnOutcome.MODEL_ERROR


class ChatToolFailureError(ChatServiceError):
    """A tool call could not be executed (unknown tool, bad arguments, timeout, crash)."""

    kind = TurnOutcome.TOOL_FAILURE


class ChatLimitError(ChatServiceError):
    """The turn ran out of model steps or tool calls before an answer."""

    kind = TurnOutcome.LIMIT


class ChatStorageError(ChatServiceError):
    """Session storage is unavailable, or the conversation stayed busy too long."""

    kind = TurnOutcome.STORAGE_UNAVAILABLE


class ChatBusyError(ChatStorageError):
    """Another turn of the same conversation held it for longer than the wait allows."""

    kind = TurnOutcome.BUSY


def _subclasses(cls: type[ChatServiceError]) -> list[type[ChatServiceError]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in _subclasses(direct))]


_BY_KIND: dict[TurnOutcome, type[ChatServiceError]] = {
    cls.kind: cls for cls in _subclasses(ChatServiceError)
}


def chat_error_for(kind: TurnOutcome, message: str, turn_id: str) -> ChatServiceError:
    """The chat error of ``kind`` (the generic one for a kind without its own class)."""
    return _BY_KIND.get(kind, ChatServiceError)(message, turn_id)
