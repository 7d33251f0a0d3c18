"""The satisfaction question's buttons: what each sends back, typed (aiogram ``CallbackData``)."""

import re
from typing import Annotated

from aiogram.filters.callback_data import CallbackData
from pydantic import BeforeValidator, ConfigDict, Field, StringConstraints

from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH

_SCORE = re.compile(r"[1-5]")


def _one_digit(value: object) -> object:
    # Unpacked data is text, and pydantic alone would read " 5", "05" or "5.0" as 5.
    if isinstance(value, str) and _SCORE.fullmatch(value) is None:
        raise ValueError("a score is one digit from 1 to 5")
    return value


class FeedbackPress(CallbackData, prefix="csat"):
    """A score pressed on the question: the question id and the score only.

    Packed as ``csat:<question id>:<1..5>`` (well under 64 bytes, the format
    questions have always carried); anything else does not unpack.
    """

    model_config = ConfigDict(frozen=True)

    question_id: Annotated[
        str, StringConstraints(pattern=rf"^[{TURN_ID_ALPHABET}]{{{TURN_ID_LENGTH}}}$")
    ]
    score: Annotated[int, BeforeValidator(_one_digit), Field(ge=1, le=5)]
