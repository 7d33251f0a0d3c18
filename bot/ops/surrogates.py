"""Lone surrogates: code points no UTF-8 encoder takes, found in text from outside.

A terminal that cut a pasted Cyrillic line mid-character, or a Telegram client
that split an emoji, leaves half a UTF-16 pair. It can be neither sent to the
model nor stored, so it becomes U+FFFD and the rest of the text is kept.
"""

import re

REPLACEMENT_CHARACTER = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD."""
    return _LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text)


def without_lone_surrogates(value: object) -> object:
    """``value`` (dicts, lists, strings: JSON-shaped) with lone surrogates replaced."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {key: without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value
