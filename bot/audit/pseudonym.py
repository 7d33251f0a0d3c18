"""Keyed pseudonyms of chat ids: the stream never shows the real id, staff with the key can search.

A pseudonym is ``h:`` followed by the first 16 hex digits (64 bits) of
HMAC-SHA256(key, chat id). Without the key nobody can tell which chat it is,
not even by hashing every possible chat id; with the key, staff compute the
pseudonym of the chat a customer names and find its turns.
"""

import hashlib
import hmac

PSEUDONYM_PREFIX = "h:"
PSEUDONYM_HEX_DIGITS = 16


def chat_pseudonym(chat_id: str, key: bytes) -> str:
    """The pseudonym of ``chat_id`` under ``key`` (the same on every call and machine)."""
    digest = hmac.new(key, chat_id.encode("utf-8"), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:PSEUDONYM_HEX_DIGITS]


def is_pseudonym(value: str) -> bool:
    """Whether ``value`` has the shape of a pseudonym (so it must not be hashed again)."""
    digits = value.removeprefix(PSEUDONYM_PREFIX)
    return (
        value.startswith(PSEUDONYM_PREFIX)
        and len(digits) == PSEUDONYM_HEX_DIGITS
        and all(char in "0123456789abcdef" for char in digits)
    )


class ChatPseudonymizer:
    """Replaces chat ids by their keyed pseudonym (the key is given once, at construction)."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the pseudonym key must be at least 16 bytes")
        self._key = key

    def __call__(self, chat_id: str) -> str:
        """The pseudonym of ``chat_id``."""
        return chat_pseudonym(chat_id, self._key)

    def __repr__(self) -> str:
        # Never show the key, even in a debugger or a log of the object.
        return "ChatPseudonymizer(key=***)"
