"""Turn ids: the short incident code a customer can quote to support staff."""

import secrets

_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud over the phone


def new_turn_id() -> str:
    """A fresh 10-character id (about 50 bits), e.g. ``K7M2QX9PAF``."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(10))
