"""What can go wrong in a chat turn, in words a front end can act on.

One hierarchy per floor: the tool loop raises a :class:`turn.ToolLoopError` (its
own floor, below this one; the seed's subclasses name the failure, ``kind`` too), the
session store raises ``SessionStoreError``, and the chat service translates both
here, at its boundary, into a :class:`ChatServiceError` (:func:`chat_error_for`).
Front ends catch only this one and act on its ``kind`` (also the audit outcome);
it carries the turn id, the incident code shown to the customer. The loop's and the store's own
exceptions stay in ``__cause__`` for the logs.

Subclasses exist only where the engine raises or a caller catches a failure by
its class: the customer's input, and the session storage.
"""

from typing import ClassVar

from turn import TurnOutcome


class ChatServiceError(RuntimeError):
    """Base of every failed turn; ``kind`` says which failure it was."""

    kind: TurnOutcome
    default_kind: ClassVar[TurnOutcome] = TurnOutcome.ERROR

    def __init__(self, message: str, turn_id: str = "", kind: TurnOutcome | None = None) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind
        self.turn_id = turn_id
        # A worker's turn: its audit entries (stream fields, see bot.audit.schema),
        # written after the customer has been told, like an answered turn's.
        self.audit_fields: tuple[dict[str, str], ...] = ()


class ChatInputError(ChatServiceError):
    """The customer's message cannot be processed as it is; ``str()`` is fit for the user."""

    default_kind = TurnOutcome.BAD_INPUT


class EmptyMessageError(ChatInputError):
    """Empty or whitespace-only message."""

    default_kind = TurnOutcome.EMPTY_MESSAGE


class MessageTooLongError(ChatInputError):
    """Message over the configured maximum length."""

    default_kind = TurnOutcome.MESSAGE_TOO_LONG


class ChatStorageError(ChatServiceError):
    """Session storage is unavailable, or the conversation stayed busy too long."""

    default_kind = TurnOutcome.STORAGE_UNAVAILABLE


class ChatBusyError(ChatStorageError):
    """Another turn of the same conversation held it for longer than the wait allows."""

    default_kind = TurnOutcome.BUSY


def chat_error_for(kind: TurnOutcome, message: str, turn_id: str) -> ChatServiceError:
    """The chat error of a tool loop's failure ``kind`` (the loop's error is its cause)."""
    return ChatServiceError(message, turn_id, kind)
