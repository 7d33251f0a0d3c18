"""The pending action of a chat and its confirmation card (pydantic: both cross Redis).

A pending action lives in the conversation's session, so it is stored with
the turn that proposed it (one commit, under the conversation's hash tag) and
at most one exists per chat: a new proposal replaces it.
"""

import secrets
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

ACTION_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
_ACTION_ID_LENGTH = 16

CARD_MIRROR = "Клиенту предложено действие (карточка с кнопками): "
"""How a card is mirrored into the staff topic while a handoff waits."""
OUTCOME_MIRROR = "Итог действия по кнопке клиента: "
"""How a settled action is mirrored into the staff topic while a handoff is on."""


Choice = Literal["yes", "no"]

ActionId = Annotated[
    str, StringConstraints(pattern=rf"^[{ACTION_ID_ALPHABET}]{{{_ACTION_ID_LENGTH}}}$")
]


def new_action_id() -> str:
    """A fresh action id (16 characters, about 80 bits): the handler's idempotency key."""
    return "".join(secrets.choice(ACTION_ID_ALPHABET) for _ in range(_ACTION_ID_LENGTH))


class PendingAction(BaseModel):
    """A write the model proposed and the customer has not decided on yet.

    ``arguments`` is the validated arguments model as JSON (run again through
    the model at execution); ``user_id`` is who may press the buttons.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    action_id: str
    tool_name: str
    arguments: str
    description: str
    proposed_at: datetime
    turn_id: str
    user_id: int | None = None
    # The conversation's photos when it was proposed (file ids): what a return carries.
    photos: tuple[str, ...] = ()
    # The shop's MCP server of its tool (``None``: the application's own tool).
    server: str | None = None


class ActionCard(BaseModel):
    """The card the customer confirms on: the application's text and two buttons."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    action_id: str
    text: str
    # The conversation's language when the card was made: its buttons are labelled in it.
    language: str | None = None


def pending_note(action: PendingAction) -> dict[str, str]:
    """The developer message telling the model a proposal still waits for the button.

    It names the tool and the action id only: the card's text may quote the
    customer (an address) and does not belong in a developer message.
    """
    return {
        "role": "developer",
        "content": (
            f"Действие {action.tool_name} (action_id {action.action_id}) ждёт решения клиента: "
            "карточка с кнопками «Подтвердить» и «Не нужно» уже отправлена. Ответ текстом "
            "(например «да») ничего не выполняет: попроси клиента нажать кнопку на карточке. "
            "Не говори, что действие выполнено, пока итог не появится в истории."
        ),
    }


def is_expired(action: PendingAction, now: datetime, card_window_seconds: float) -> bool:
    """Whether ``action`` waited longer than ``card_window_seconds`` for its button by ``now``."""
    return (now - action.proposed_at).total_seconds() > card_window_seconds


def expired_note(action: PendingAction) -> dict[str, str]:
    """The developer message for a proposal whose time for the button has run out.

    Its card no longer does anything: the model must not tell the customer to press it.
    """
    return {
        "role": "developer",
        "content": (
            f"Предложенное действие {action.tool_name} (action_id {action.action_id}) "
            "не подтверждено вовремя: срок карточки истёк, ничего не выполнено, и кнопки "
            "на ней больше не действуют. Не проси клиента нажимать их. Если клиент всё ещё "
            "хочет этого, предложи действие заново."
        ),
    }
