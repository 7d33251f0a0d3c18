"""The outbox entry as the previous version wrote it, read as delivery steps (a rolling deploy).

Until steps, an entry was one flat model with a field per feature (``format``
and ``text``, ``card_edit``, ``card`` and ``superseded``, ``question``,
``person_offer``, ``reply_keyboard``, ``staff``, ``language``), delivered in a
fixed order. An entry such a version committed and did not deliver before this
one took its chat over is read here as the steps that deliver it exactly as it
would have been: the question or the offer alone (their audit only when sent),
else the card's edit, the text, the card, then the staff relays.

The other way round, :func:`legacy_fields` gives an entry of steps the flat
fields that version reads, written beside the steps (:meth:`Delivery.stored
<bot.queue.delivery.Delivery.stored>`): a worker of the previous version that
takes a chat over mid-deploy delivers a reply of text, card and relays as it
would have (it ignores ``steps``), instead of moving it to the quarantine. A
question or an offer gets no flat fields (their audit sat where the delivery's
own is now): such a worker quarantines them, and nobody waits for either.

Kept while an outbox may still hold such an entry: an entry is delivered at its
chat's next drain and expires with the session (``SESSION_TTL_SECONDS``), so
this can go once a release has run that long.
"""

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from bot.queue.delivery_steps import (
    AskQuestion,
    DeliveryStep,
    EditCard,
    OfferPerson,
    ReplyKeyboardKind,
    SendCard,
    SendText,
    StaffRelay,
)
from bot.queue.staff_actions import StaffAction
from bot.sessions.pending import ActionCard

_STORED = ConfigDict(frozen=True, extra="ignore")


class LegacyCardEdit(BaseModel):
    """The previous version's ``card_edit``: a card's message to rewrite."""

    model_config = _STORED

    message_id: int
    text: str


class LegacyQuestion(BaseModel):
    """The previous version's ``question``: the satisfaction question's id."""

    model_config = _STORED

    question_id: str


class LegacyOutboxEntry(BaseModel):
    """The previous version's outbox entry, field for field (read only, never written)."""

    model_config = _STORED

    job_id: str
    turn_id: str
    chat_id: int
    format: Literal["answer", "plain", "none"]
    text: str
    audit: tuple[dict[str, str], ...] = ()
    staff: tuple[StaffAction, ...] = ()
    card: ActionCard | None = None
    card_edit: LegacyCardEdit | None = None
    superseded: str | None = None
    question: LegacyQuestion | None = None
    person_offer: bool = False
    reply_keyboard: ReplyKeyboardKind | None = None
    language: str | None = None

    def steps(self) -> tuple[tuple[DeliveryStep, ...], tuple[dict[str, str], ...]]:
        """The steps that deliver this entry as its version did, and the entry's own audit."""
        if self.question is not None:
            # Sent instead of anything else; its ``asked`` entry only if Telegram took it.
            asked = AskQuestion(
                question_id=self.question.question_id, language=self.language, audit=self.audit
            )
            return (asked,), ()
        if self.person_offer:
            return (OfferPerson(language=self.language, audit=self.audit),), ()
        steps: list[DeliveryStep] = []
        if self.card_edit is not None:
            steps.append(EditCard(message_id=self.card_edit.message_id, text=self.card_edit.text))
        if self.format != "none":
            steps.append(
                SendText(
                    text=self.text,
                    answer=self.format == "answer",
                    keyboard=self.reply_keyboard,
                    language=self.language,
                )
            )
        if self.card is not None:
            steps.append(SendCard(card=self.card, superseded=self.superseded))
        if self.staff:
            steps.append(StaffRelay(actions=self.staff))
        return tuple(steps), self.audit


def is_legacy(data: dict[str, Any]) -> bool:
    """Whether stored ``data`` is the previous version's flat entry (no steps, a format)."""
    return "steps" not in data and "format" in data


def steps_of_legacy(data: dict[str, Any]) -> dict[str, Any]:
    """The previous version's entry ``data`` as a delivery's fields (job, steps, audit)."""
    entry = LegacyOutboxEntry.model_validate(data)
    steps, audit = entry.steps()
    return {
        "job_id": entry.job_id,
        "turn_id": entry.turn_id,
        "chat_id": entry.chat_id,
        "steps": steps,
        "audit": audit,
    }


# The order of the previous version's fixed delivery: the card's edit, the text, the card, the
# relays; a reply of steps in this order (each at most once) can be written in its fields.
_LEGACY_ORDER: tuple[type[DeliveryStep], ...] = (EditCard, SendText, SendCard, StaffRelay)


def legacy_fields(steps: Sequence[DeliveryStep]) -> dict[str, Any] | None:
    """The previous version's flat fields that deliver ``steps`` as they mean (JSON-ready).

    ``None`` when that version could not say them: a question, an offer, a kind it did
    not have, or steps out of its fixed order.
    """
    at = 0
    fields: dict[str, Any] = {"format": "none", "text": ""}
    for step in steps:
        kinds = _LEGACY_ORDER[at:]
        if type(step) not in kinds:
            return None
        at += kinds.index(type(step)) + 1
        if isinstance(step, EditCard):
            fields["card_edit"] = {"message_id": step.message_id, "text": step.text}
        elif isinstance(step, SendText):
            fields["format"] = "answer" if step.answer else "plain"
            fields["text"] = step.text
            fields["reply_keyboard"] = step.keyboard
            fields["language"] = step.language
        elif isinstance(step, SendCard):
            fields["card"] = step.card.model_dump(mode="json")
            fields["superseded"] = step.superseded
        elif isinstance(step, StaffRelay):
            fields["staff"] = [action.model_dump(mode="json") for action in step.actions]
    return fields
