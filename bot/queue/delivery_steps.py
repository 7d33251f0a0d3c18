"""The kinds of step a reply's delivery is made of (pydantic: they cross Redis in the outbox).

A reply is an ordered tuple of typed steps (:class:`bot.queue.delivery.Delivery`),
the way openai-agents types its run items: each feature says what it sends as a
step kind of its own here, and its front end's twin delivers that kind (in
Telegram, a deliverer registered with the job runner: :mod:`bot.telegram.delivery`).
A new feature adds a kind (a class here and a member of :data:`KnownStep`)
and its deliverer; the runner that walks the steps stays as it is.

Every kind carries a ``kind`` tag (the discriminator). A step of a kind this
version does not know (a newer version wrote it, during a rolling deploy) is
read as an :class:`UnknownStep` (:func:`known_or_unknown`, on the slow path of
:meth:`bot.queue.delivery.Delivery.read`) and skipped, so the rest of the reply
is still delivered instead of the whole entry being set aside.
"""

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from bot.queue.staff_actions import StaffAction
from bot.sessions.pending import ActionCard

ReplyKeyboardKind = Literal["contact", "remove"]
"""The reply keyboards the bot sends: «share my number» (``contact``), or none (``remove``)."""

# Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
_STORED = ConfigDict(frozen=True, extra="ignore")


class EditCard(BaseModel):
    """Rewrite a message of the bot's that carried buttons (a card, the question, the offer):
    its new ``text``, its buttons removed. Before the text it explains; skipped for a chat
    that blocked the bot."""

    model_config = _STORED

    kind: Literal["edit_card"] = "edit_card"
    message_id: int
    text: str


class SendText(BaseModel):
    """A text for the customer: the model's answer (``answer``: formatted, and an answer
    that never arrives is marked so in the history and the audit) or the bot's own words
    (plain). ``keyboard``: a reply keyboard sent with it (account linking's «share my
    number», or its removal), its button rendered in ``language``."""

    model_config = _STORED

    kind: Literal["send_text"] = "send_text"
    text: str
    answer: bool = False
    keyboard: ReplyKeyboardKind | None = None
    language: str | None = None


class SendCard(BaseModel):
    """A confirmation card (a write the model proposed), sent only after the text asking to
    press it arrived; one that cannot be delivered withdraws its action. ``superseded``: the
    action whose card this one replaces, edited to say so first."""

    model_config = _STORED

    kind: Literal["send_card"] = "send_card"
    card: ActionCard
    superseded: str | None = None


class AskQuestion(BaseModel):
    """The satisfaction question (buttons 1 to 5 carrying ``question_id``), in ``language``.

    ``audit``: its ``asked`` entry, written only when Telegram took the question.
    """

    model_config = _STORED

    kind: Literal["ask_question"] = "ask_question"
    question_id: str
    language: str | None = None
    audit: tuple[dict[str, str], ...] = ()


class OfferPerson(BaseModel):
    """The offer of a person (one button), in ``language`` as the conversation has it when
    sent. ``audit``: its ``escalation_offered`` entry, written only when Telegram took it."""

    model_config = _STORED

    kind: Literal["offer_person"] = "offer_person"
    language: str | None = None
    audit: tuple[dict[str, str], ...] = ()


class StaffRelay(BaseModel):
    """The handoff's relay steps in the staff chat, in order, once the customer's part of the
    reply is delivered and audited (:class:`~bot.queue.staff_actions.StaffAction`)."""

    model_config = _STORED

    kind: Literal["staff_relay"] = "staff_relay"
    actions: tuple[StaffAction, ...]


class UnknownStep(BaseModel):
    """A step of a kind this version does not know (``was``: its kind; a newer version
    wrote it): skipped."""

    model_config = _STORED

    kind: Literal["unknown"] = "unknown"
    was: str = ""


KnownStep = EditCard | SendText | SendCard | AskQuestion | OfferPerson | StaffRelay
"""Every step kind this version delivers (a new kind is added here)."""

STEP_KINDS: frozenset[str] = frozenset(
    model.model_fields["kind"].default for model in get_args(KnownStep)
)
"""The ``kind`` tags of :data:`KnownStep`."""

DeliveryStep = Annotated[KnownStep | UnknownStep, Field(discriminator="kind")]
"""One step of a delivery, read by its ``kind``."""


def known_or_unknown(steps: list[Any]) -> list[Any]:
    """Stored ``steps`` with each of a kind this version does not know as an unknown step."""
    return [
        {"kind": "unknown", "was": str(step.get("kind"))}
        if isinstance(step, dict) and step.get("kind") not in STEP_KINDS
        else step
        for step in steps
    ]


def relay(*actions: StaffAction) -> StaffRelay | None:
    """The staff relay of ``actions`` (``None`` when there are none: no step)."""
    return StaffRelay(actions=actions) if actions else None
