"""A suggestion's buttons in the staff topic: their typed data (aiogram ``CallbackData``).

Packed as ``sug:<customer chat id>:<suggestion id>:s|c`` (at most 37 bytes): intake
queues the press in the customer's chat (a staff chat's press names no customer
otherwise), once it saw the press came from the staff chat; the worker checks the
presser, the topic and the suggestion again.
"""

from typing import Literal

from aiogram.filters.callback_data import CallbackData
from pydantic import ConfigDict

from bot.sessions.suggestion import SuggestionId


class SuggestionPress(CallbackData, prefix="sug"):
    """A press on a suggestion: ``s`` sends its text as is, ``c`` sends its action's card."""

    model_config = ConfigDict(frozen=True)

    chat_id: int
    suggestion_id: SuggestionId
    pressed: Literal["s", "c"]


def suggestion_buttons(
    chat_id: int, suggestion_id: str, *, send: str, card: str | None
) -> list[list[tuple[str, str]]]:
    """Rows of (label, callback data): "send as is", and the card's button when it has one."""
    rows = [
        [(send, SuggestionPress(chat_id=chat_id, suggestion_id=suggestion_id, pressed="s").pack())]
    ]
    if card is not None:
        rows.append(
            [
                (
                    card,
                    SuggestionPress(
                        chat_id=chat_id, suggestion_id=suggestion_id, pressed="c"
                    ).pack(),
                )
            ]
        )
    return rows
