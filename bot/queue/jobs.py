"""What waits in a chat's queue (pydantic: it crosses the Redis boundary).

What waits in its outbox, a committed reply, is :class:`bot.queue.delivery.Delivery`.
"""

import hashlib
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from turn import TURN_ID_ALPHABET
from turn.ids import TURN_ID_LENGTH


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


def turn_id_for(conversation_key: str, update_id: int) -> str:
    """The turn id of an update: the same for every delivery of it, so commits are keyed by it."""
    digest = hashlib.sha256(f"{conversation_key}/{update_id}".encode()).digest()
    return "".join(
        TURN_ID_ALPHABET[byte % len(TURN_ID_ALPHABET)] for byte in digest[:TURN_ID_LENGTH]
    )
