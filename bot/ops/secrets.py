"""Secrets kept out of what operators read: masked in text and in every log record.

A library's error may quote a secret whole (h11 prints an illegal header value,
a server's error body may echo the header it refused); the application never
logs one itself, and this is the net for what others say.
"""

import logging
from collections.abc import Iterable

MASK = "***"
# Shorter values are not masked on their own: masking two letters everywhere would
# garble every line and hide nothing worth hiding.
MIN_SECRET_CHARS = 6


class SecretMask:
    """Replaces each secret (and each long word of it, as a token after "Bearer") with ``***``.

    Also the forms an error message quotes: stripped of blanks, and escaped as
    Python's ``repr`` writes bytes or text (a newline as ``\\n``).
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        pieces: set[str] = set()
        for secret in secrets:
            for form in (secret, secret.strip()):
                pieces.update({form, repr(form)[1:-1]})
            words = secret.split()
            # "Bearer <token>": the token is the secret, not the scheme's name.
            if len(words) > 1 and words[0].isalpha():
                words = words[1:]
            pieces.update(words)
        self._pieces = sorted(
            (piece for piece in pieces if len(piece) >= MIN_SECRET_CHARS), key=len, reverse=True
        )

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def __call__(self, text: str) -> str:
        """``text`` without any of the secrets."""
        for piece in self._pieces:
            if piece in text:
                text = text.replace(piece, MASK)
        return text


class SecretLogFilter(logging.Filter):
    """A handler's filter: every record's message and traceback with the secrets masked."""

    def __init__(self, mask: SecretMask) -> None:
        super().__init__()
        self._mask = mask
        self._tracebacks = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record in place; never drops one."""
        if not self._mask:
            return True
        message = record.getMessage()
        masked = self._mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info:
            # Formatted here, masked, and kept as text: both formatters use it then.
            text = record.exc_text or self._tracebacks.formatException(record.exc_info)
            record.exc_text = self._mask(text)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self._mask(record.exc_text)
        return True
