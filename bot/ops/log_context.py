"""Which update, chat and turn a log line belongs to, carried by context variables.

Set where an update enters (update id, chat pseudonym) and where a turn starts
(turn id); every log record made in that task, and in tasks it starts, carries
them (:class:`LogContextFilter`). Only identifiers go here, never message text.

The chat is named by its keyed pseudonym (the same as in the audit stream with
``AUDIT_HMAC_KEY``), so a log line can be matched with the audit entries of its
chat without showing the chat id. Without a key the chat is left out: an unkeyed
hash of a Telegram chat id is undone by hashing every possible id.
"""

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from bot.audit.pseudonym import ChatPseudonymizer
from bot.storage.keys import telegram_chat_id

_update_id: ContextVar[int | None] = ContextVar("log_update_id", default=None)
_chat: ContextVar[str | None] = ContextVar("log_chat", default=None)
_turn_id: ContextVar[str | None] = ContextVar("log_turn_id", default=None)
# How this process names chats in log text (set at start-up, inherited by its tasks).
_namer: ContextVar["ChatNamer | None"] = ContextVar("log_chat_namer", default=None)


@contextmanager
def update_scope(update_id: int, chat: str | None) -> Iterator[None]:
    """Log records inside carry ``update_id`` and ``chat`` (a pseudonym, or ``None``)."""
    update_token = _update_id.set(update_id)
    chat_token = _chat.set(chat)
    try:
        yield
    finally:
        _chat.reset(chat_token)
        _update_id.reset(update_token)


def bind_turn(turn_id: str) -> None:
    """Log records from here on, in this task and the tasks it starts, carry ``turn_id``.

    A handler's task ends with its turn, so the value needs no reset.
    """
    _turn_id.set(turn_id)


def current_context() -> dict[str, int | str]:
    """The identifiers set in this context (only those that are set)."""
    values: dict[str, int | str | None] = {
        "update_id": _update_id.get(),
        "chat": _chat.get(),
        "turn_id": _turn_id.get(),
    }
    return {name: value for name, value in values.items() if value is not None}


class LogContextFilter(logging.Filter):
    """Copies the context's identifiers onto every record (attached to the handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the attributes; never drops a record."""
        for name, value in current_context().items():
            setattr(record, name, value)
        return True


ChatNamer = Callable[[int], str | None]
"""How the chat of an update is named in logs: its pseudonym, or ``None`` to leave it out."""


def chat_namer(hmac_key: bytes | None) -> ChatNamer:
    """Chats named by their keyed pseudonym under ``hmac_key``; left out without a key.

    A key too short for the audit stream's pseudonyms (under 16 bytes) counts as none.
    """
    if hmac_key is None or len(hmac_key) < 16:
        return lambda chat_id: None
    pseudonymizer = ChatPseudonymizer(hmac_key)
    return lambda chat_id: pseudonymizer(str(chat_id))


def name_chats(namer: ChatNamer) -> None:
    """Log lines of this task, and of the tasks it starts, name chats with ``namer``.

    Set once where a process starts, before its tasks: :func:`chat_label` uses it.
    """
    _namer.set(namer)


def chat_label(chat: int | str) -> str:
    """How a log line's text names a chat (its id, or its conversation key ``tg:<id>``).

    Its keyed pseudonym (as in the ``chat`` field and the audit stream), or
    ``a chat`` without a key: never the chat id. A conversation key of another
    front end (the console's) is not a chat id and is named as it is.
    """
    chat_id = chat if isinstance(chat, int) else telegram_chat_id(chat)
    if isinstance(chat, str) and chat_id is None and not chat.startswith("tg:"):
        return chat
    namer = _namer.get()
    named = namer(chat_id) if namer is not None and chat_id is not None else None
    return named or "a chat"
