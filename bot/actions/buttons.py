"""A confirmation card's buttons: their typed data (aiogram ``CallbackData``) and labels.

Kept out of the stored card (``bot.sessions.pending``), which the queue and the
staff CLI import without aiogram.
"""

from typing import Literal

from aiogram.filters.callback_data import CallbackData
from pydantic import ConfigDict

from bot.customer_texts import CONFIRM_LABEL, DECLINE_LABEL, Translate
from bot.sessions.pending import ActionCard, ActionId, Choice


class ActionPress(CallbackData, prefix="act"):
    """What a card's button sends back: the action id and the choice only.

    Packed as ``act:<action id>:y|n`` (25 bytes, the format cards have always
    carried, so cards sent before still work); anything else does not unpack.
    """

    model_config = ConfigDict(frozen=True)

    action_id: ActionId
    pressed: Literal["y", "n"]

    @classmethod
    def of(cls, action_id: str, choice: Choice) -> "ActionPress":
        """The press of ``choice`` on the card of ``action_id``."""
        return cls(action_id=action_id, pressed="y" if choice == "yes" else "n")

    @property
    def choice(self) -> Choice:
        """The customer's choice."""
        return "yes" if self.pressed == "y" else "no"


def card_buttons(card: ActionCard, gettext: Translate | None = None) -> tuple[tuple[str, str], ...]:
    """(label, callback data) of ``card``'s buttons, confirm first (labels through ``gettext``)."""
    shown = gettext or (lambda message: message)
    return (
        (shown(CONFIRM_LABEL), ActionPress.of(card.action_id, "yes").pack()),
        (shown(DECLINE_LABEL), ActionPress.of(card.action_id, "no").pack()),
    )
