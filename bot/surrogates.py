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
