"""What waits in a chat's queue and in its outbox (pydantic: both cross the Redis boundary)."""

import hashlib
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.queue.staff_actions import StaffAction
from bot.sessions.pending import ActionCard
from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH

ReplyKeyboardKind = Literal["contact", "remove"]
"""The reply keyboards the bot sends: «share my number» (``contact``), or none (``remove``)."""


class Notice(StrEnum):
    """Jobs intake decides on its own (no model, no handler): texts, and the idle check."""

    RATE_LIMITED = "rate_limited"
    DAILY_LIMIT = "daily_limit"
    # The chat's queue is full (``CHAT_QUEUE_MAX``): said once per fill.
    QUEUE_FULL = "queue_full"
    # Intake could not read the update (a bug, or content nobody foresaw): said instead.
    UNREADABLE = "unreadable"
    # Not a text: a handoff may have gone idle; the worker checks and ends it if so.
    HANDOFF_IDLE = "handoff_idle"
    # Not a text: the satisfaction question may be due; the worker checks and asks if so.
    CSAT = "csat"
    # Not a text: an analysis found the customer angry and in a hurry; the worker offers
    # a person (one button) if the conversation is still the bot's.
    ESCALATION = "escalation"
    # Not a text: staff assist drafts a suggested reply for the topic, after a relay.
    SUGGESTION = "suggestion"
    # Not a text: a conversation the bot handled alone scored low; staff get it to review.
    QUALITY_REVIEW = "quality_review"


class QueuedJob(BaseModel):
    """One accepted update in a chat's FIFO queue."""

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    update_id: int
    turn_id: str
    enqueued_ms: int = Field(ge=0)
    chat_id: int
    notice: Notice | None = None
    update: dict[str, Any] = Field(default_factory=dict)
    # Intake's decision that a message is meant for the bot (``AddressedToBot``), carried so
    # the worker's router does not decide again. ``None``: not decided at intake (a staff
    # topic message, a press, the bot's own notice, or a job an older version queued).
    addressed: bool | None = None


class CardEdit(BaseModel):
    """A confirmation card's message to rewrite once its action is settled."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    message_id: int
    text: str


class FeedbackQuestion(BaseModel):
    """The satisfaction question to send (its buttons carry the question id)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    question_id: str


class OutboxEntry(BaseModel):
    """A reply committed and not yet delivered, with the audit entries its delivery completes.

    ``format="none"`` sends nothing to the customer (a handed-off message only
    relayed); ``staff`` are the relay steps done after the send (:mod:`bot.handoff`).
    ``audit`` holds the turn's audit entries as stream fields (JSON in Redis),
    built and read by :mod:`bot.audit.schema`; the turn entry's outcome is
    settled when delivery succeeds or fails.
    """

    # Stored in Redis: a field another version wrote (a rolling deploy) is ignored, not fatal.
    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    turn_id: str
    chat_id: int
    format: Literal["answer", "plain", "none"]
    text: str
    audit: tuple[dict[str, str], ...] = ()
    staff: tuple[StaffAction, ...] = ()
    # A confirmation card sent after the text (a write the model proposed).
    card: ActionCard | None = None
    # A confirmation card to edit before the text: its new text, its keyboard removed.
    card_edit: CardEdit | None = None
    # The action whose card a new proposal superseded: its card is edited to say so.
    superseded: str | None = None
    # The satisfaction question, sent instead of a text; its ``asked`` audit only if sent.
    question: FeedbackQuestion | None = None
    # The offer of a person (one button), sent instead of a text; its audit only if sent.
    person_offer: bool = False
    # A reply keyboard sent with the text: the button that shares the customer's own
    # contact (account linking), or its removal once linked.
    reply_keyboard: ReplyKeyboardKind | None = None
    # The conversation's language, for what the worker renders at delivery (the question).
    language: str | None = None


def turn_id_for(conversation_key: str, update_id: int) -> str:
    """The turn id of an update: the same for every delivery of it, so commits are keyed by it."""
    digest = hashlib.sha256(f"{conversation_key}/{update_id}".encode()).digest()
    return "".join(
        TURN_ID_ALPHABET[byte % len(TURN_ID_ALPHABET)] for byte in digest[:TURN_ID_LENGTH]
    )
