"""Turn ids: the short incident code a customer can quote to support staff."""

import secrets

TURN_ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""No 0/O, no 1/I: codes are read aloud over the phone."""

TURN_ID_LENGTH = 10


def new_turn_id() -> str:
    """A fresh 10-character id (about 50 bits), e.g. ``K7M2QX9PAF``."""
    return "".join(secrets.choice(TURN_ID_ALPHABET) for _ in range(TURN_ID_LENGTH))
