"""A suggested reply waiting in a staff topic (pydantic: it is stored in the session).

Staff assist drafts one suggestion per customer message while a person is in
charge; it lives in the conversation's session, so it is committed with the job
that drafted it and read by the press that sends it (one slot, one script). At most
one is open: a newer customer message replaces it, staff's own message or the
press that sends it ends it.
"""

import secrets
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

SUGGESTION_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
_SUGGESTION_ID_LENGTH = 12

SuggestionId = Annotated[
    str, StringConstraints(pattern=rf"^[{SUGGESTION_ID_ALPHABET}]{{{_SUGGESTION_ID_LENGTH}}}$")
]


def new_suggestion_id() -> str:
    """A fresh suggestion id (12 characters, 60 bits): what its buttons carry."""
    return "".join(secrets.choice(SUGGESTION_ID_ALPHABET) for _ in range(_SUGGESTION_ID_LENGTH))


class SuggestedAction(BaseModel):
    """The write a suggestion needs: proposed to the customer only on staff's press.

    ``arguments`` are the validated arguments as JSON (validated again when proposed);
    ``description`` what the card would say, for staff.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    tool_name: str
    arguments: str
    description: str


class StaffSuggestion(BaseModel):
    """One suggested reply to the customer message of turn ``for_turn``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    suggestion_id: str
    for_turn: str
    text: str
    language: str
    action: SuggestedAction | None = None
    # The action's card went to the customer already (its button sends it once).
    card_sent: bool = False
