"""The satisfaction question's buttons: what each sends back, and reading it back."""

import re

from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH

_CALLBACK = re.compile(rf"^csat:([{TURN_ID_ALPHABET}]{{{TURN_ID_LENGTH}}}):([1-5])$")


def callback_data(question_id: str, score: int) -> str:
    """A button's data: the question id and the score only (well under 64 bytes)."""
    return f"csat:{question_id}:{score}"


def parse_callback(data: str | None) -> tuple[str, int] | None:
    """The question id and score of a button's data; ``None`` for anything else."""
    match = _CALLBACK.fullmatch(data or "")
    if match is None:
        return None
    return match.group(1), int(match.group(2))
